"""ExpressionError: a CEL expression that does not compile, evaluate or convert to JSON."""

from __future__ import annotations


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
