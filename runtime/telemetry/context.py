"""What the current call or task is about: the fields every log record and span carries.

Context variables, so each asyncio task (a tools/call, an executor slot) sees its own.
Only identifiers live here, never a token, an input value or an output value.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from types import TracebackType

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


class bound:  # a class, not @contextmanager: entered for every task and call
    """Identifiers bound for the duration of a block, restored afterwards."""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: str | None) -> None:
        self._fields = fields
        self._token: Token[dict[str, str]] | None = None

    def __enter__(self) -> None:
        merged = dict(_FIELDS.get())
        merged.update({name: value for name, value in self._fields.items() if value is not None})
        self._token = _FIELDS.set(merged)

    def __exit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _FIELDS.reset(self._token)
