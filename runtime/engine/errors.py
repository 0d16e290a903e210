"""Engine error types: publication-time definition errors and CEL expression errors."""

from __future__ import annotations


class DefinitionError(Exception):
    """A definition breaks a publication rule; names the task path and expression when known."""

    def __init__(self, message: str, *, task: str | None = None, expression: str | None = None):
        parts = [message]
        if task is not None:
            parts.append(f"(task {task})")
        if expression is not None:
            parts.append(f"(expression {expression!r})")
        super().__init__(" ".join(parts))
        self.message = message
        self.task = task
        self.expression = expression


class ExpressionError(Exception):
    """A CEL expression failed to compile, evaluate, type-check or convert to JSON.

    ``reason`` is one of: syntax, limit, function, evaluate, missing, type, convert, cost.
    The message never embeds evaluated data.
    """

    def __init__(self, message: str, *, reason: str, expression: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.expression = expression
