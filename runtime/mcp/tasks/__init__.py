"""MCP tasks over POST /mcp (issue 35): the 2026-07-28 extension and 2025-11-25's tasks.

- ``service``: TaskService, the task methods on the service's own tools.
- ``shapes``: the Task objects, the extension's DetailedTask and the elicitation requests.
"""

from __future__ import annotations

from runtime.mcp.tasks.service import TaskService
from runtime.mcp.tasks.shapes import (
    EXTENSION,
    LEGACY_TASK_METHODS,
    MODERN_TASK_METHODS,
    RELATED_TASK_KEY,
    TASK_TOOLS,
    InputRequired,
    InputRound,
    TaskState,
    declares_extension,
    detailed_task,
    form_request,
    missing_capability,
    task_object,
)

__all__ = [
    "EXTENSION",
    "LEGACY_TASK_METHODS",
    "MODERN_TASK_METHODS",
    "RELATED_TASK_KEY",
    "TASK_TOOLS",
    "InputRequired",
    "InputRound",
    "TaskService",
    "TaskState",
    "declares_extension",
    "detailed_task",
    "form_request",
    "missing_capability",
    "task_object",
]
