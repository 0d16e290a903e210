"""Shared pieces of the compensation tests (no tests here): an order backend and workflows.

The backend records every request by path, answers JSON with an id per effect, and fails,
stalls or drops the paths a test names.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from tests.support.execution import HEADER, Receive, Send, read_body

# Writes and their compensations, in the order the order workflow runs them.
WRITES = ("reserve", "charge", "ship")
UNDO = {"reserve": "release", "charge": "refund"}


@dataclass
class OrderBackend:
    """A tiny ASGI order service on 127.0.0.1: records requests, fails or stalls by path."""

    failing: dict[str, int] = field(default_factory=dict)
    # Paths that answer only after this many seconds (a cancel or deadline lands meanwhile).
    slow: dict[str, float] = field(default_factory=dict)
    requests: list[tuple[str, Any]] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The backend's origin."""
        return f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        """The paths called, in order."""
        return [path for path, _ in self.requests]

    def body_of(self, path: str) -> Any:
        """The body of the (only) request to path."""
        bodies = [body for called, body in self.requests if called == path]
        assert len(bodies) == 1, f"{path} was called {len(bodies)} times"
        return bodies[0]

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        path = scope["path"].lstrip("/")
        self.requests.append((path, json.loads(raw) if raw else None))
        await asyncio.sleep(self.slow.get(path, 0.0))
        status = self.failing.get(path, 200)
        payload = {"id": f"{path}-1", "ok": status < 400}
        body = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def order_tasks(
    base: str, *, when_possible: bool = False, evidence: str | None = None
) -> list[dict[str, Any]]:
    """reserve (undone by release), charge (undone by refund) and ship (no undo).

    evidence: the approvalEvidenceDigest every write (compensations too) carries, as a write
    Tool's publication asks.
    """

    def _post(base: str, path: str, body: Any) -> dict[str, Any]:
        task: dict[str, Any] = {
            "call": "http",
            "with": {"method": "post", "endpoint": f"{base}/{path}", "body": body},
        }
        if evidence is not None:
            task["metadata"] = {"approvalEvidenceDigest": evidence}
        return task

    reserve = _post(base, "reserve", {"sku": "${ .sku }"})
    reserve["export"] = {"as": {"order": "${ .id }"}}
    reserve["compensate"] = _post(
        base, "release", {"reservation": "${ .id }", "sku": "${ workflow.input.sku }"}
    )
    charge = _post(base, "charge", {"amount": "${ workflow.input.amount }"})
    # By the order and amount, not the charge's output: it also undoes a charge whose outcome
    # is unknown (when: possible), which has no output.
    refund = _post(
        base, "refund", {"order": "${ context.order }", "amount": "${ workflow.input.amount }"}
    )
    charge["compensate"] = {"do": [{"refund": refund}]}
    if when_possible:
        charge["compensate"]["when"] = "possible"
    ship = _post(base, "ship", {"order": "${ context.order }"})
    return [{"reserve": reserve}, {"charge": charge}, {"ship": ship}]


def order_document(base: str, **options: Any) -> dict[str, Any]:
    """The order workflow as a definition document."""
    return {"document": dict(HEADER), "do": order_tasks(base, **options)}


ORDER_INPUT = {"sku": "sku-7", "amount": 42}
