"""The development identity's client-credentials token endpoint (an ASGI app). Never for production.

It plays the identity provider that gives Workflow its own application token for nested MCP
calls (RFC 6749 section 4.4): one client, authenticated with HTTP Basic or with client_id and
client_secret form fields (RFC 6749 section 2.3.1), gets a fresh application token per grant.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from runtime.security.dev_token_exchange import Receive, Send, answer, basic_client, read_form

GRANT_TYPE = "client_credentials"
# Workflow's own OAuth client in development (its tokens' sub, client_id and sid).
DEV_SERVICE_CLIENT_ID = "workflow"

# Mints an application token for the client: (scope asked for, or None) -> a signed JWT.
Mint = Callable[[str | None], str]


@dataclass
class DevClientCredentials:
    """POST form grant_type=client_credentials (client authenticated) -> an application token."""

    mint: Mint
    client_secret: str
    client_id: str = DEV_SERVICE_CLIENT_ID
    ttl: int = 3600
    grants: int = 0  # how many tokens it issued (tests read it)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_form(receive)
        if scope["method"] != "POST":
            await answer(send, 405, {"error": "invalid_request"})
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        form = parse_qs(body.decode("ascii", errors="replace"))

        def one(name: str) -> str | None:
            values = form.get(name, [])
            return values[0] if len(values) == 1 else None

        if not self._client_ok(headers.get("authorization"), one):
            await answer(send, 401, {"error": "invalid_client"}, challenge=True)
            return
        if one("grant_type") != GRANT_TYPE:
            await answer(send, 400, {"error": "unsupported_grant_type"})
            return
        self.grants += 1
        payload = {"access_token": self.mint(one("scope")), "token_type": "Bearer"}
        await answer(send, 200, payload | {"expires_in": self.ttl})

    def _client_ok(self, header: str | None, one: Callable[[str], str | None]) -> bool:
        if header is not None:
            # RFC 6749 2.3.1: one method per request; Basic when the header is sent.
            return basic_client(header, self.client_id, self.client_secret)
        client_id, secret = one("client_id"), one("client_secret")
        return (
            client_id == self.client_id
            and secret is not None
            and hmac.compare_digest(secret.encode(), self.client_secret.encode())
        )
