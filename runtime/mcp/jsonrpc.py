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


class _Repeating(dict[str, Any]):
    """An object that named a member twice (only the second, locating pass builds one)."""


def _marking_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    return _Repeating(members) if len(members) != len(pairs) else members


class RepeatedMembers:
    """Tool arguments in which an object names one member twice, in place of the arguments.

    The call itself is readable (its envelope names every member once), so it is answered as a
    tool call: authenticated, then refused as invalid input with an isError result (seed 000
    Error envelopes), never run. Seed 001 "Canonical effective input": duplicate object keys
    are rejected; a last-wins decoder would run the workflow on an input the caller did not
    send in that form.
    """

    __slots__ = ("pointer",)

    def __init__(self, pointer: str) -> None:
        self.pointer = pointer


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
# The second pass, run only when the first met a repeated member: it says where.
_LOCATING_DECODER = json.JSONDecoder(
    object_pairs_hook=_marking_members,
    parse_constant=_no_constant,
    parse_int=_bounded_int,
    parse_float=_no_underflow,
)
MAX_POINTER = 200


def _pointer(path: tuple[str | int, ...]) -> str:
    text = "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
    return text if len(text) <= MAX_POINTER else text[:MAX_POINTER] + "..."


def _repeating_at(value: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The path of the first object that named a member twice, None when none did."""
    if isinstance(value, _Repeating):
        return path
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _repeating_at(item, (*path, key))
        if found is not None:
            return found
    return None


def _only_arguments_repeat(decoded: Any) -> Any | None:
    """The message with RepeatedMembers for its arguments, when only they repeat a member."""
    if type(decoded) is not dict or decoded.get("method") != "tools/call":
        return None
    params = decoded.get("params")
    if type(params) is not dict:
        return None
    envelope = {key: value for key, value in decoded.items() if key != "params"}
    around = {key: value for key, value in params.items() if key != "arguments"}
    if _repeating_at(envelope) is not None or _repeating_at(around) is not None:
        return None
    where = _repeating_at(params.get("arguments"))
    if where is None:
        return None
    return {**decoded, "params": {**params, "arguments": RepeatedMembers(_pointer(where))}}


def _repeated_member_fault() -> JsonRpcFault:
    return JsonRpcFault(
        PARSE_ERROR,
        "parse error: an object names the same member twice",
        data={"reason": "duplicate-key"},
    )


def decode_arguments(body: bytes) -> Any:
    """Decode a body that is a tool's arguments (POST /tools/{name}).

    A repeated member anywhere becomes RepeatedMembers (an isError refusal of the call, as in a
    tools/call); anything else unreadable is a parse error as in decode_body.
    """
    try:
        return decode_body(body)
    except JsonRpcFault as fault:
        if fault.data != {"reason": "duplicate-key"}:
            raise
    where = _repeating_at(_LOCATING_DECODER.decode(body.decode("utf-8")))
    return RepeatedMembers(_pointer(where or ()))


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

    A member repeated only inside a tools/call's arguments is the exception: the request is
    readable, and its arguments arrive as RepeatedMembers for the tool to refuse as input.

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
        text = body.decode("utf-8")
        try:
            decoded = _DECODER.decode(text)
        except _DuplicateKey:
            # Inside a tools/call's arguments it is the tool's bad input (an isError result);
            # anywhere else the request itself cannot be read.
            decoded = _only_arguments_repeat(_LOCATING_DECODER.decode(text))
            if decoded is None:
                raise _repeated_member_fault() from None
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
