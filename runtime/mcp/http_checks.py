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
    """Content-Type is application/json (parameters such as charset allowed)."""
    if value is None:
        return False
    return value.split(";", 1)[0].strip().lower() == JSON_MEDIA_TYPE


def unsupported_media_fault() -> JsonRpcFault:
    """HTTP 415 for a POST /mcp whose body is not declared as JSON."""
    return JsonRpcFault(
        INVALID_REQUEST,
        "unsupported media type: POST /mcp takes Content-Type: application/json",
        http_status=415,
        headers={"Accept": JSON_MEDIA_TYPE},
    )
