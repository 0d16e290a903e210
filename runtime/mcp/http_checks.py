"""Request checks made before a body is read: one credential header of each kind, JSON only."""

from __future__ import annotations

from collections.abc import Iterable

from runtime.mcp.jsonrpc import INVALID_REQUEST, JsonRpcFault

# Last-wins (or first-wins) on a repeated credential header lets two parties disagree about
# who is calling, so a repeated one is refused outright.
CREDENTIAL_HEADERS = (b"authorization", b"x-scope-token")
JSON_MEDIA_TYPE = "application/json"


def duplicate_credential_fault(raw_headers: Iterable[tuple[bytes, bytes]]) -> JsonRpcFault | None:
    """A 400 fault when Authorization or X-Scope-Token appears more than once, else None."""
    seen: set[bytes] = set()
    for raw_name, _ in raw_headers:
        name = raw_name.lower()
        if name in CREDENTIAL_HEADERS:
            if name in seen:
                label = name.decode("ascii")
                return JsonRpcFault(
                    INVALID_REQUEST, f"invalid request: more than one {label} header"
                )
            seen.add(name)
    return None


def is_json_content_type(value: str | None) -> bool:
    """Content-Type is application/json; a charset parameter, if any, must be utf-8."""
    if value is None:
        return False
    media_type, *parameters = value.split(";")
    if media_type.strip().lower() != JSON_MEDIA_TYPE:
        return False
    # The body is always decoded as UTF-8 (RFC 8259), so another declared charset would be
    # read as something the client did not send.
    return all(_utf8_or_other_parameter(parameter) for parameter in parameters)


def _utf8_or_other_parameter(parameter: str) -> bool:
    name, _, raw = parameter.partition("=")
    if name.strip().lower() != "charset":
        return True
    return raw.strip().strip('"').lower() == "utf-8"


def unsupported_media_fault() -> JsonRpcFault:
    """HTTP 415 for a POST /mcp whose body is not declared as JSON."""
    return JsonRpcFault(
        INVALID_REQUEST,
        "unsupported media type: POST /mcp takes Content-Type: application/json "
        "(charset utf-8 if one is named)",
        http_status=415,
        headers={"Accept": JSON_MEDIA_TYPE},
    )
