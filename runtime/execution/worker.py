"""Handlers for the scheduler worker CLI, configured like the service.

    python -m runtime.scheduler.worker --handlers runtime.execution.worker:HANDLERS

$WORKFLOW_CONFIG is the service's configuration file: its security section verifies every
run's user token before each call (with no trusted keys configured, the same development
identity as `make run`), and its keyring opens sealed run credentials.
$WORKFLOW_EXECUTION_SETTINGS holds ExecutionSettings as JSON (else the config's `execution`).
"""

from __future__ import annotations

import os

from runtime.bootstrap import apply_dev_identity
from runtime.config import Settings, load_settings
from runtime.execution.settings import SETTINGS_ENV, ExecutionSettings, settings_from_env
from runtime.execution.task_runner import WorkflowRuntime
from runtime.scheduler.lease import TaskHandler
from runtime.security import load_configured_keyring


def _execution(settings: Settings) -> ExecutionSettings:
    if os.environ.get(SETTINGS_ENV):
        return settings_from_env()
    return settings.execution.outbound


def runtime_from_config() -> WorkflowRuntime:
    """The workflow runtime of a worker process, from $WORKFLOW_CONFIG and the environment."""
    settings = load_settings()
    apply_dev_identity(settings)
    return WorkflowRuntime.verifying(
        _execution(settings), load_configured_keyring(settings.security), settings.security
    )


RUNTIME = runtime_from_config()
HANDLERS: dict[str, TaskHandler] = RUNTIME.handlers()
