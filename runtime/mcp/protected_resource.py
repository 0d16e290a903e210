"""MCP authorization discovery: the Bearer challenge and protected resource metadata (RFC 9728)."""

from __future__ import annotations

from typing import Any

METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
_REALM = 'Bearer realm="workflow"'


def bearer_challenge(*, credentials_sent: bool) -> str:
    """The WWW-Authenticate value of a 401 (RFC 6750 section 3.1).

    A request that sent no credentials gets no error code; an invalid credential is
    "invalid_token".
    """
    return f'{_REALM}, error="invalid_token"' if credentials_sent else _REALM


def with_resource_metadata(challenge: str, base_url: str) -> str:
    """The challenge pointing the client at this server's protected resource metadata."""
    return f'{challenge}, resource_metadata="{metadata_url(base_url)}"'


def metadata_url(base_url: str) -> str:
    """Where this server publishes its protected resource metadata."""
    return base_url.rstrip("/") + METADATA_PATH


def resource_metadata(base_url: str, issuers: list[str]) -> dict[str, Any]:
    """The metadata document: the MCP endpoint and the servers that issue its user tokens."""
    return {
        "resource": base_url.rstrip("/") + MCP_PATH,
        "authorization_servers": list(issuers),
        "bearer_methods_supported": ["header"],
    }
