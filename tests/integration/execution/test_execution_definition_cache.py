"""A start run's definition is parsed once per run, not once per task."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from runtime.engine import parse_definition
from runtime.execution import ExecutionSettings, WorkflowRuntime, task_runner
from runtime.security import Keyring
from runtime.store import Database
from tests.support.execution import document, executor, set_tasks
from tests.support.execution_runs import finished, start


async def test_a_start_run_parses_its_definition_once_for_all_its_tasks(
    db: Database, keyring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[int] = []

    def counting(doc: Any) -> Any:
        parsed.append(1)
        return parse_definition(doc)

    monkeypatch.setattr(task_runner, "parse_definition", counting)
    host = str(uuid.uuid4())
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    async with executor(db, runtime):
        pid = await start(db, keyring, document(set_tasks(4)), {"seen": 0}, host_id=host)
        run = await finished(db, host, pid)
    assert run.state == "COMPLETED"
    # Four top-level tasks, four scheduler steps, one parse.
    assert len(parsed) == 1
