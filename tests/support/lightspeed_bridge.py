"""The Lightspeed bridge under test: a holder stand-in on a free port, an echo Tool mapped to
a Lightspeed tool id, and envelopes of pushed calls (examples/lightspeed_holder.py's)."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from examples.lightspeed_holder import (
    HolderState,
    cancellation_envelope,
    invocation_envelope,
    serve,
)
from runtime.collaborators import Services
from runtime.receiver import LightspeedSettings, send_due_replies
from tests.support.binding_builders import definition_yaml
from tests.support.invocation import Tool, publish_tool
from tests.support.mcp import McpTestClient

UNIVERSE = "6f3a1a52-58c1-4f0e-9c2d-1a2b3c4d5e6f"
SESSION = "bot:v1:demo"
HOLDER_ID = f"{UNIVERSE}/{SESSION}"
RECEIVER_ID = "workflow-mcp/receiver/demo"
ECHO = "demo.echo.v1"
SLOW = "demo.slow.v1"
_HEAD = definition_yaml().split("do:\n")[0]
ECHO_TEXT = _HEAD + 'do:\n  - echo:\n      set:\n        text: "${ .text }"\n'
SLOW_TEXT = _HEAD + "do:\n  - pause:\n      wait: PT25S\n"
# The invocation id is the idempotency key (E4): the Tool must be keyed by the caller.
EXPLICIT = {"kind": "explicit", "resultReplayMs": 600000}


@dataclass
class Holder:
    """The holder stand-in and where it listens."""

    state: HolderState
    url: str

    def put(self, data: bytes) -> str:
        """Put bytes in its content store; their reference."""
        ref = "sha256:" + hashlib.sha256(data).hexdigest()
        self.state.cas[ref] = data
        return ref

    def accepted(self) -> list[dict[str, Any]]:
        """The deliveries it accepted."""
        return [d for d in self.state.deliveries if d["verdict"] == "accepted"]

    def verdicts(self) -> list[str]:
        """Every delivery's verdict, in order."""
        return [d["verdict"] for d in self.state.deliveries]


@contextmanager
def running_holder() -> Iterator[Holder]:
    """The holder stand-in on a free 127.0.0.1 port, for the duration."""
    state = HolderState(universe_id=UNIVERSE, session_id=SESSION)
    server = serve(state, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Holder(state, f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def receiver(tool_id: str, universes: tuple[str, ...] = (UNIVERSE,)) -> dict[str, Any]:
    """A binding's lightspeedReceiver: the Lightspeed tool it serves, for which universes."""
    return {"toolId": tool_id, "universes": list(universes), "receiverWorkflowId": RECEIVER_ID}


async def publish_receivers(owner: McpTestClient) -> tuple[Tool, Tool]:
    """The echo Tool and the slow Tool, keyed by the caller's key, serving ECHO and SLOW."""
    echo = await publish_tool(
        owner, text=ECHO_TEXT, idempotencyPolicy=EXPLICIT, lightspeedReceiver=receiver(ECHO)
    )
    slow = await publish_tool(
        owner, text=SLOW_TEXT, idempotencyPolicy=EXPLICIT, lightspeedReceiver=receiver(SLOW)
    )
    return echo, slow


def configure(services: Services, holder: Holder) -> LightspeedSettings:
    """The bridge's ports on the holder; retries without pauses."""
    settings = LightspeedSettings(
        content_store_url=f"{holder.url}/cas",
        holder_url=holder.url,
        reply_pause_ms=0,
        reply_attempts=3,
    )
    services.settings.lightspeed = settings
    return settings


def new_invocation_id() -> str:
    """A fresh `wti:sha256:` invocation id."""
    return "wti:sha256:" + hashlib.sha256(uuid.uuid4().bytes).hexdigest()


def pushed(
    holder: Holder, tool: str, arguments: Any, *, source: str = RECEIVER_ID
) -> tuple[dict[str, Any], str]:
    """A tool_invocation envelope whose arguments are in the CAS and whose Promise is admitted."""
    ref = holder.put(json.dumps(arguments, separators=(",", ":")).encode())
    promise = holder.state.admit_promise(source)
    envelope = invocation_envelope(UNIVERSE, SESSION, tool, ref, promise, new_invocation_id(), 1)
    return envelope, promise


def cancellation(envelope: dict[str, Any]) -> dict[str, Any]:
    """The invocation_cancellation notice of a pushed envelope's reply Promise."""
    invocation = envelope["body"]["invocation"]
    promise = invocation["completion_promises"]["reply"]
    return cancellation_envelope(UNIVERSE, SESSION, invocation["invocation_id"], promise, 2)


async def reply_rounds(services: Services, settings: LightspeedSettings, rounds: int = 1) -> int:
    """Run the reply job's rounds; how many replies the holder took."""
    sent = 0
    async with httpx.AsyncClient(timeout=5.0) as client:
        for _ in range(rounds):
            sent += await send_due_replies(services.database, client, settings)
    return sent
