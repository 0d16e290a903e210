"""JSON-RPC 2.0 framing: body decoding, error codes, faults and response builders."""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from typing import Any, NamedTuple, NoReturn, TypeGuard

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHENTICATED = -32001
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

_HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    UNAUTHENTICATED: 401,
    INTERNAL_ERROR: 500,
}

RequestId = str | int


class JsonRpcFault(Exception):
    """A protocol-level failure answered as a JSON-RPC error response."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        data: Any = None,
        http_status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status if http_status is not None else _HTTP_STATUS.get(code, 200)
        self.headers = headers or {}

    def to_response(self, request_id: RequestId | None) -> dict[str, Any]:
        """The JSON-RPC error response object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        response: dict[str, Any] = {"jsonrpc": "2.0", "error": error}
        if request_id is not None:
            response["id"] = request_id
        return response


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC success response object."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def is_request_id(value: Any) -> TypeGuard[RequestId]:
    """Whether value is a usable JSON-RPC request id (string or integer, never bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class _DuplicateKey(ValueError):
    """An object of the body names one member twice."""


class _UnreadableNumber(ValueError):
    """A number literal no double or bounded integer can hold faithfully."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _DuplicateKey
    return members


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# Python's own int() limit: beyond it int() raises, which would read as a syntax error.
MAX_INTEGER_DIGITS = 4300


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _UnreadableNumber(
            f"an integer of {len(text.lstrip('-'))} digits is outside the canonical range "
            "+/-(2^53 - 1); send large numbers as strings"
        )
    return int(text)


def _no_underflow(text: str) -> float:
    value = float(text)
    mantissa = re.split("[eE]", text, maxsplit=1)[0]
    if value == 0.0 and any(digit in mantissa for digit in "123456789"):
        # Admitting it as 0 would run the workflow on a value the caller did not send.
        raise _UnreadableNumber(
            "a non-zero number underflows to zero as a double (the canonical profile's "
            "numbers are IEEE doubles); send it as a string"
        )
    return value


# The C scanner calls the hooks once per object and per number: about 15 us more than msgspec
# for a typical 550-byte tools/call and 1.3 ms more for a 40 kB body of 500 objects (measured
# on the dev VM, before the number hooks).
_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_members,
    parse_constant=_no_constant,
    parse_int=_bounded_int,
    parse_float=_no_underflow,
)
# Only an escape can carry a surrogate: UTF-8 bytes cannot encode one (decode() refuses them).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _holds_lone_surrogate(value: Any) -> bool:
    # A well-formed pair decodes to one astral code point, so any surrogate left is lone.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def decode_body(body: bytes) -> Any:
    """Decode a request body; invalid JSON, a repeated member or a lone surrogate is -32700.

    Every object is checked for duplicate members (I-JSON; seed 001 "Canonical effective
    input"): a last-duplicate-wins decoder would hand admission an input the caller did not
    send in that form, and the canonical profile's own refusal could never fire. A string
    holding a lone surrogate escape (I-JSON) is not Unicode text: no later layer could store
    or digest it. Numbers stay as decoded (int or float); the canonical profile judges them at
    admission, except those the decoder cannot hold faithfully (thousands of digits, a
    non-zero literal that underflows to zero), refused here with data.reason
    unsupported-number.
    """
    try:
        # RFC 8259 JSON on the wire is UTF-8; a str skips json's encoding sniffing.
        decoded = _DECODER.decode(body.decode("utf-8"))
    except _DuplicateKey:
        raise JsonRpcFault(
            PARSE_ERROR,
            "parse error: an object names the same member twice",
            data={"reason": "duplicate-key"},
        ) from None
    except _UnreadableNumber as exc:
        raise JsonRpcFault(
            PARSE_ERROR, f"parse error: {exc}", data={"reason": "unsupported-number"}
        ) from None
    except (ValueError, RecursionError):
        raise JsonRpcFault(PARSE_ERROR, "parse error: invalid JSON") from None
    if _SURROGATE_ESCAPE.search(body) and _holds_lone_surrogate(decoded):
        raise JsonRpcFault(
            PARSE_ERROR,
            "parse error: a string holds a lone surrogate escape (\\uD800-\\uDFFF outside a "
            "pair), which is not Unicode text",
            data={"reason": "lone-surrogate"},
        )
    return decoded


# The ASGI scope key under which a body decoded in front of the app (by the front door, which
# reads workflow_invoke calls before litestar) waits for the app, so the app does not decode it
# a second time: decoding is most of what the MCP layer spends on a call's body, and more in
# the 2026-07-28 form (its params._meta adds three objects to check for duplicate members).
DECODED_BODY = "workflow.mcp.decoded_body"


class DecodedBody(NamedTuple):
    """A request body and what decode_body made of it."""

    body: bytes
    message: Any


def remember_decoded(scope: MutableMapping[str, Any], body: bytes, message: Any) -> None:
    """Leave decode_body(body) in the request's scope for the app (decoded_before)."""
    scope[DECODED_BODY] = DecodedBody(body, message)


def decoded_before(scope: MutableMapping[str, Any], body: bytes) -> DecodedBody | None:
    """What was decoded in front of the app, taken from the scope, if it is of this very body."""
    decoded = scope.pop(DECODED_BODY, None)
    if isinstance(decoded, DecodedBody) and decoded.body == body:
        return decoded
    return None
