"""The example backend's order steps (README "A write that is undone"): what it records."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest

from examples.backend import serve
from tests.support.server import free_port


def _bearer(subject: str) -> str:
    # The backend reads the subject only; the signature is Workflow's to verify.
    claims = base64.urlsafe_b64encode(json.dumps({"sub": subject}).encode()).decode().rstrip("=")
    return f"Bearer e30.{claims}.signature"


@pytest.fixture
def backend() -> Iterator[httpx.Client]:
    port = free_port()
    server = serve(port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        server.shutdown()
        server.server_close()


def _recorded(backend: httpx.Client, order_id: str) -> list[str]:
    listed = backend.get("/orders", headers={"Authorization": _bearer("ann")})
    assert listed.status_code == 200, listed.text
    return [call["step"] for call in listed.json()["calls"] if call["orderId"] == order_id]


def test_an_order_step_is_recorded_and_ship_always_fails(backend: httpx.Client) -> None:
    auth = {"Authorization": _bearer("ann")}
    reserved = backend.post("/orders/reserve", json={"orderId": "U-1"}, headers=auth)
    assert reserved.status_code == 201
    assert reserved.json() == {"step": "reserve", "orderId": "U-1"}
    shipped = backend.post("/orders/ship", json={"orderId": "U-1"}, headers=auth)
    assert shipped.status_code == 503
    assert _recorded(backend, "U-1") == ["reserve"]


def test_an_order_step_without_a_bearer_or_an_order_id_records_nothing(
    backend: httpx.Client,
) -> None:
    unauthenticated = backend.post("/orders/charge", json={"orderId": "U-2"})
    assert unauthenticated.status_code == 401
    auth = {"Authorization": _bearer("ann")}
    assert backend.post("/orders/charge", json={}, headers=auth).status_code == 400
    assert backend.post("/orders/charge", content=b"[1]", headers=auth).status_code == 400
    assert backend.get("/orders").status_code == 401
    assert _recorded(backend, "U-2") == []
