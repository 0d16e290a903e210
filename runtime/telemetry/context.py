"""What the current call or task is about: the fields every log record and span carries.

Context variables, so each asyncio task (a tools/call, an executor slot) sees its own.
Only identifiers live here, never a token, an input value or an output value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

LOG_FIELDS = ("host_id", "tool", "workflow_instance_id", "task")

_FIELDS: ContextVar[dict[str, str]] = ContextVar("workflow_log_fields", default={})  # noqa: B039


def current_fields() -> dict[str, str]:
    """The identifiers bound in this context (a copy)."""
    return dict(_FIELDS.get())


def bind(**fields: str | None) -> None:
    """Add identifiers to this context (the current asyncio task and what it starts)."""
    merged = dict(_FIELDS.get())
    merged.update({name: value for name, value in fields.items() if value is not None})
    _FIELDS.set(merged)


@contextmanager
def bound(**fields: str | None) -> Iterator[None]:
    """Identifiers bound for the duration of a block, restored afterwards."""
    merged = dict(_FIELDS.get())
    merged.update({name: value for name, value in fields.items() if value is not None})
    token = _FIELDS.set(merged)
    try:
        yield
    finally:
        _FIELDS.reset(token)
