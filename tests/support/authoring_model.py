"""A local OpenAI-compatible chat-completions stub and the drafts it answers (issue 38).

The stub records every request it receives (headers and JSON body) and answers from a queue:
a draft (sent as the assistant message's JSON content), raw content text, an HTTP status, or a
hang (the request never gets an answer). Tests assert on what it received.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, field
from typing import Any

from runtime.authoring import AuthoringSettings
from tests.support.execution import read_body
from tests.support.protected_backend import Receive, Send

MODEL = "stub-coder-1"
MODEL_TOKEN = "model-endpoint-token-7d1e"  # the model endpoint's own bearer


@dataclass
class Reply:
    """One queued answer: a draft dict, raw content, a status, or hang."""

    draft: dict[str, Any] | None = None
    content: str | None = None
    status: int = 200
    hang: bool = False


@dataclass
class StubModel:
    """ASGI app: an OpenAI-compatible /v1/chat/completions that answers queued replies."""

    replies: list[Reply] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    # A hanging request waits for this; set it before stopping the server so it can stop.
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        """The API base the service is configured with."""
        return f"http://127.0.0.1:{self.port}/v1"

    def settings(self, **changes: Any) -> AuthoringSettings:
        """Authoring settings pointing at this stub."""
        values: dict[str, Any] = {
            "llm_url": self.url,
            "llm_model": MODEL,
            "llm_bearer_token": MODEL_TOKEN,
            "llm_timeout_seconds": 10.0,
        }
        values.update(changes)
        return AuthoringSettings(**values)

    def answer(self, *replies: Reply) -> None:
        """Queue replies for the next requests."""
        self.replies.extend(replies)

    @property
    def received_text(self) -> str:
        """Everything the stub received (headers and bodies), as one text."""
        return json.dumps({"headers": self.headers, "bodies": self.received})

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        self.headers.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        self.received.append(json.loads(body))
        reply = self.replies.pop(0) if self.replies else Reply(status=503)
        if reply.hang:
            await self.release.wait()
        if reply.status != 200:
            await _send(send, reply.status, {"error": {"message": "stub failure"}})
            return
        content = reply.content if reply.content is not None else json.dumps(reply.draft)
        completion = {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}},
            ],
        }
        await _send(send, 200, completion)


async def _send(send: Send, status: int, payload: Any) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def mcp_call(tool: str, arguments: dict[str, Any], **transport: Any) -> dict[str, Any]:
    """A generated `call: mcp` task body through the Gateway, reading structuredContent."""
    http: dict[str, Any] = {"endpoint": "/mcp", **transport}
    return {
        "call": "mcp",
        "with": {
            "method": "tools/call",
            "parameters": {"name": tool, "arguments": arguments},
            "transport": {"http": http},
        },
        "output": {"as": "${ output.structuredContent }"},
    }


LOOKUP = "claims.lookup"
SCORE = "claims.score"


def good_definition() -> dict[str, Any]:
    """A draft that looks a claim up and scores it: the two selected Tools, in sequence."""
    return {
        "document": {
            "dsl": "1.0.3",
            "namespace": "claims",
            "name": "claim-score",
            "version": "0.1.0",
        },
        "input": {
            "schema": {
                "format": "json",
                "document": {
                    "type": "object",
                    "required": ["claimId"],
                    "properties": {"claimId": {"type": "string"}},
                },
            }
        },
        "do": [
            {"lookup": mcp_call(LOOKUP, {"claimId": "${ input.claimId }"})},
            {"score": mcp_call(SCORE, {"status": "${ input.status }"})},
        ],
    }


def _fixture(name: str, answers: list[dict[str, Any]], expect: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "input": {"claimId": "C-1"}, "toolAnswers": answers, "expect": expect}


def good_draft(definition: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model's whole answer around a definition (the good one by default)."""
    return {
        "definition": copy.deepcopy(definition or good_definition()),
        "assumptions": ["claims.lookup returns the claim's status"],
        "policyFindings": ["both Tools are read-only"],
        "fixtures": {
            "contract": [
                _fixture(
                    "scores-an-open-claim",
                    [
                        {"tool": LOOKUP, "structuredContent": {"status": "open"}},
                        {"tool": SCORE, "structuredContent": {"score": 7}},
                    ],
                    {"output": {"score": 7}},
                )
            ],
            "mapping": [
                _fixture(
                    "passes-the-status-on",
                    [
                        {"tool": LOOKUP, "structuredContent": {"status": "closed"}},
                        {"tool": SCORE, "structuredContent": {"score": 3}},
                    ],
                    {"output": {"score": 3}},
                )
            ],
            "edge": [_fixture("stubbed-from-the-schemas", [], {"output": {"score": 0}})],
            "failure": [
                _fixture("lookup-fails", [{"tool": LOOKUP, "isError": True}], {"fault": {}})
            ],
        },
    }
