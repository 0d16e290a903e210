"""Handlers for the scheduler worker CLI, configured from the environment.

    python -m runtime.scheduler.worker --handlers runtime.execution.worker:HANDLERS

$WORKFLOW_EXECUTION_SETTINGS holds ExecutionSettings as JSON; the keyring comes from
$WORKFLOW_LONG_KEYRING_FILE (absent: runs with a credential cannot call MCP tools).
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.execution.handler import WorkflowRuntime
from runtime.execution.settings import settings_from_env
from runtime.scheduler.lease import TaskHandler
from runtime.security import Keyring
from runtime.security.keyring import KEYRING_ENV


def _keyring() -> Keyring:
    path = os.environ.get(KEYRING_ENV)
    if path and Path(path).exists():
        return Keyring.load(path)
    return Keyring.empty()


RUNTIME = WorkflowRuntime(settings_from_env(), _keyring())
HANDLERS: dict[str, TaskHandler] = RUNTIME.handlers()
