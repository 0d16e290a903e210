"""Workflow runs started in-process: a keyring fixture, a starter and a bounded result wait."""

from __future__ import annotations

import uuid
from typing import Any

from runtime.execution import start_workflow_run, wait_for_result
from runtime.security import Keyring, SecretToken
from runtime.store import Database

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1LTEiLCJleHAiOjQxMDI0NDQ4MDB9.c2ln"


async def start(db: Database, keyring: Keyring, doc: dict[str, Any], data: Any, **kw: Any) -> str:
    return await start_workflow_run(
        db,
        host_id=kw.pop("host_id", str(uuid.uuid4())),
        user_id="u-1",
        input=data,
        keyring=keyring,
        credential=kw.pop("credential", SecretToken(TOKEN)),
        definition=doc,
        **kw,
    )


async def finished(db: Database, host_id: str, process_id: str) -> dict[str, Any]:
    run = await wait_for_result(db, host_id, process_id, timeout=20)
    assert run is not None and run.state in ("COMPLETED", "FAILED", "CANCELLED"), run
    return run
