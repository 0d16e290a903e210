"""A stub backend that wants an API key, and definitions that authenticate to it with a secret."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runtime.publication.authorization_policy import authorization_policy_digest
from tests.support.binding_builders import EVIDENCE
from tests.support.execution import read_body
from tests.support.protected_backend import Receive, Send

# The authorizationPolicyDigest of a target that api_key_definition's call reaches.
PARTNER_POLICY_DIGEST = authorization_policy_digest(["partnerApi"])


@dataclass
class KeyedBackend:
    """ASGI app: records every request's headers; 200 when X-API-Key is `expected`, else 401.

    It never echoes the key, so whatever of it shows up in a result came from the runtime.
    """

    expected: str | None = None
    seen: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The backend's origin."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def keys(self) -> list[str | None]:
        """The X-API-Key of each request, in order."""
        return [headers.get("x-api-key") for headers in self.seen]

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append(headers)
        granted = self.expected is not None and headers.get("x-api-key") == self.expected
        status, payload = (200, {"accepted": True, "n": len(self.seen)}) if granted else (401, {})
        start = {"type": "http.response.start", "status": status}
        start["headers"] = [(b"content-type", b"application/json")]
        await send(start)
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def api_key_definition(uri: str, *, header_line: str = "", secret: str = "partnerKey") -> str:
    """A definition whose POST authenticates with `X-API-Key: ${ $secrets.<secret> }`.

    header_line adds a task header (`X-API-Key: literal` shows the literal refusal).
    """
    headers = f"        headers:\n          {header_line}\n" if header_line else ""
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        f"use:\n  secrets:\n    - {secret}\n  authentications:\n    partnerApi:\n"
        "      apiKey:\n        header: X-API-Key\n"
        f'        value: "${{ $secrets.{secret} }}"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n  - submit:\n      call: http\n      with:\n        method: POST\n"
        f"        endpoint:\n          uri: {uri}\n"
        "          authentication:\n            use: partnerApi\n"
        f"{headers}"
        '        body:\n          claim: "${ input.claimId }"\n'
        f"      metadata:\n        approvalEvidenceDigest: {EVIDENCE}\n"
    )
