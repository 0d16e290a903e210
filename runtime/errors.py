"""Typed workflow errors: the one error base every refusal goes through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from generated.errors import ErrorCode, ErrorCodeName

ErrorStatus = Literal["failed", "timeout", "cancelled", "rejected"]

_CODES: Mapping[str, ErrorCode] = {code.value: code for code in ErrorCode}


def error_registry() -> Mapping[str, ErrorCode]:
    """The stable error codes (generated from contracts errors.json), keyed by their string."""
    return _CODES


def error_code(code: ErrorCode | str) -> ErrorCode:
    """The ErrorCode of a registered code string; ValueError for anything unregistered."""
    try:
        return ErrorCode(code)
    except ValueError:
        raise ValueError(f"unregistered workflow error code {code!r}") from None


class WorkflowError(Exception):
    """An authenticated refusal or failure, sent as an MCP result with isError: true."""

    def __init__(
        self,
        code: ErrorCode | ErrorCodeName,
        message: str,
        *,
        status: ErrorStatus = "rejected",
        retryable: bool | None = None,
        after_effect: bool = False,
        retry_after_ms: int | None = None,
        details: dict[str, Any] | None = None,
        workflow_instance_id: str | None = None,
    ) -> None:
        typed = error_code(code)
        super().__init__(f"{typed.value}: {message}")
        self.code: ErrorCode = typed
        self.message = message
        self.status: ErrorStatus = status
        self.retryable = typed.retryable if retryable is None else retryable
        self.after_effect = after_effect
        self.retry_after_ms = retry_after_ms
        self.details = details
        self.workflow_instance_id = workflow_instance_id

    def to_structured(self) -> dict[str, Any]:
        """The structuredContent of the isError result (WorkflowErrorResult)."""
        error: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "retryable": self.retryable,
            "afterEffect": self.after_effect,
        }
        if self.retry_after_ms is not None:
            error["retryAfterMs"] = self.retry_after_ms
        if self.details is not None:
            error["details"] = self.details
        body: dict[str, Any] = {"status": self.status}
        if self.workflow_instance_id is not None:
            body["workflowInstanceId"] = self.workflow_instance_id
        body["error"] = error
        return body

    def text(self) -> str:
        """The text content block: "<code>: <message>"."""
        return f"{self.code.value}: {self.message}"


class AuthenticationError(Exception):
    """A missing or unverifiable bearer: a JSON-RPC error with HTTP 401 on non-publication tools.

    The message is safe to show: it never contains token text.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def policy_denied(message: str) -> WorkflowError:
    """A WORKFLOW_POLICY_DENIED refusal."""
    return WorkflowError("WORKFLOW_POLICY_DENIED", message)


def input_invalid(message: str, details: dict[str, Any] | None = None) -> WorkflowError:
    """A WORKFLOW_INPUT_INVALID refusal."""
    return WorkflowError("WORKFLOW_INPUT_INVALID", message, details=details)
