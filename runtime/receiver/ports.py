"""The other side's two endpoints over HTTP: Lightspeed's content store and the holder's signal.

A content reference is `sha256:<hex>` of the bytes; what the store returns is checked against
it before anyone reads it (E9). A delivery is `deliver_emission` to a stable workflow id, never
a run id (E2): the holder stand-in takes {"workflow_id", "envelope"} and, like a Temporal signal,
answers only "delivered" (its verdict is its own).
"""

from __future__ import annotations

from typing import Any

import httpx

from runtime.errors import WorkflowError
from runtime.lightspeed import content_ref, is_content_ref


class PortUnavailable(Exception):
    """The content store or the holder did not answer as expected (a retry may succeed)."""


def _unavailable(what: str) -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_INVOCATION_UNAVAILABLE", f"the Lightspeed {what} is unavailable; retry"
    )


async def read_content(client: httpx.AsyncClient, base_url: str | None, ref: str) -> bytes:
    """The bytes at ref, checked against it; WORKFLOW_NOT_FOUND or _UNAVAILABLE otherwise."""
    if not is_content_ref(ref):
        raise WorkflowError(
            "WORKFLOW_INPUT_INVALID", "arguments_ref: invalid format: expected sha256:<64 hex>"
        )
    if base_url is None:
        raise _unavailable("content store (lightspeed.content_store_url is not set)")
    try:
        response = await client.get(f"{base_url.rstrip('/')}/{ref}")
    except httpx.HTTPError:
        raise _unavailable("content store") from None
    if response.status_code == 404:
        raise WorkflowError("WORKFLOW_NOT_FOUND", f"the content store has no {ref}")
    if response.status_code != 200:
        raise _unavailable("content store")
    if content_ref(response.content) != ref:
        # A store that answers other bytes is not trusted with the run's input.
        raise WorkflowError(
            "WORKFLOW_INPUT_INVALID", f"arguments_ref: the content store's bytes are not {ref}"
        )
    return response.content


async def put_content(client: httpx.AsyncClient, base_url: str | None, data: bytes) -> str:
    """Store bytes by their digest; the reference (PortUnavailable when the store refuses)."""
    ref = content_ref(data)
    if base_url is None:
        raise PortUnavailable("lightspeed.content_store_url is not set")
    try:
        response = await client.put(f"{base_url.rstrip('/')}/{ref}", content=data)
    except httpx.HTTPError as error:
        raise PortUnavailable(type(error).__name__) from None
    if response.status_code not in (200, 201, 204):
        raise PortUnavailable(f"HTTP {response.status_code}")
    return ref


async def deliver_emission(
    client: httpx.AsyncClient, holder_url: str | None, workflow_id: str, envelope: dict[str, Any]
) -> None:
    """Signal deliver_emission(envelope) to workflow_id (PortUnavailable: not delivered)."""
    if holder_url is None:
        raise PortUnavailable("lightspeed.holder_url is not set")
    body = {"workflow_id": workflow_id, "envelope": envelope}
    try:
        response = await client.post(f"{holder_url.rstrip('/')}/deliver_emission", json=body)
    except httpx.HTTPError as error:
        raise PortUnavailable(type(error).__name__) from None
    if response.status_code not in (200, 202, 204):
        raise PortUnavailable(f"HTTP {response.status_code}")
