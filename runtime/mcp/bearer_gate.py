"""MCP authorization on the methods other than tools/call: a sent bearer must verify."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runtime.errors import AuthenticationError
from runtime.mcp.jsonrpc import UNAUTHENTICATED, JsonRpcFault
from runtime.mcp.protected_resource import bearer_challenge
from runtime.security import Authenticator

SCOPE_TOKEN_HEADER = "x-scope-token"
# tools/call authenticates per tool in the dispatcher (publication tools answer with isError).
_TOOL_CALL = "tools/call"
_DISCOVERY = "tools/list"


def unauthenticated(message: str, headers: Mapping[str, str]) -> JsonRpcFault:
    """The JSON-RPC 401 answer with its WWW-Authenticate challenge."""
    return JsonRpcFault(
        UNAUTHENTICATED,
        f"authentication failed: {message}",
        http_status=401,
        headers={"WWW-Authenticate": bearer_challenge(credentials_sent=credentials_sent(headers))},
    )


def credentials_sent(headers: Mapping[str, str]) -> bool:
    """True when the request carries a credential header (even an empty or malformed one)."""
    return any(headers.get(name) is not None for name in ("authorization", SCOPE_TOKEN_HEADER))


@dataclass(frozen=True)
class BearerGate:
    """A present but invalid bearer is 401 on every method; tools/list may need one."""

    authenticator: Authenticator
    anonymous_discovery: bool = False

    def check(self, method: str, headers: Mapping[str, str]) -> None:
        """Raise the 401 fault when a sent bearer does not verify, or discovery needs one."""
        if method == _TOOL_CALL:
            return
        required = method == _DISCOVERY and not self.anonymous_discovery
        try:
            self.authenticator.check_present(
                headers.get("authorization"),
                headers.get(SCOPE_TOKEN_HEADER),
                user_required=required,
            )
        except AuthenticationError as failure:
            raise unauthenticated(failure.message, headers) from None
