"""Replies as effects: each ended run's source_resolution, sent at least once with one id.

The inbox row is the effect record. Before the first send the resolution (its payload put in
the content store) and the derived emission id are written to the row, and every later attempt
sends exactly those (E17): a crash between the write and the send (fault point before_reply),
or a lost answer, re-sends the same envelope, which the holder dedupes. Attempts are bounded
(reply_attempts, then 'abandoned'); a cancelled invocation is never answered (E10).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import msgspec

from runtime.execution import read_run
from runtime.lightspeed import source_resolution_id
from runtime.receiver import store
from runtime.receiver.ports import PortUnavailable, deliver_emission, put_content
from runtime.receiver.settings import LightspeedSettings
from runtime.scheduler import faults
from runtime.scheduler.models import TERMINAL_STATES, RunSnapshot
from runtime.store import Database

log = logging.getLogger("workflow.lightspeed")


async def _resolution(
    client: httpx.AsyncClient, settings: LightspeedSettings, run: RunSnapshot
) -> dict[str, Any]:
    """The Promise's resolution from the run's end; payloads go to the content store."""
    if run.state == "COMPLETED":
        payload = msgspec.json.encode(run.result)
        ref = await put_content(client, settings.content_store_url, payload)
        return {"kind": "resolved", "payload_ref": ref}
    if run.state == "FAILED":
        error = msgspec.json.encode(run.error or {})
        ref = await put_content(client, settings.content_store_url, error)
        return {"kind": "failed", "error_ref": ref}
    return {"kind": "cancelled"}


def envelope(reply: store.DueReply, resolution: dict[str, Any], emission_id: str) -> dict[str, Any]:
    """The source_resolution envelope of a reply, as a workflow producer (E16, E18)."""
    return {
        "emission_id": emission_id,
        "producer": {
            "kind": "workflow",
            "universe_id": reply.universe_id,
            "workflow_id": reply.producer_workflow_id,
        },
        "body": {
            "kind": "source_resolution",
            "promise_id": reply.promise_id,
            "resolution": resolution,
        },
    }


async def _decided(
    db: Database, client: httpx.AsyncClient, settings: LightspeedSettings, reply: store.DueReply
) -> tuple[dict[str, Any], str] | None:
    """The reply's resolution and id: the recorded ones, or decided now (None: run still live)."""
    if reply.resolution is not None and reply.reply_emission_id is not None:
        return reply.resolution, reply.reply_emission_id
    run = await read_run(db, reply.host_id, reply.process_id)
    if run is None or run.state not in TERMINAL_STATES:
        return None
    resolution = await _resolution(client, settings, run)
    emission_id = source_resolution_id(
        reply.universe_id, reply.producer_workflow_id, reply.holder_workflow_id, reply.promise_id
    )
    async with db.transaction() as conn:
        return await store.record_reply_intent(conn, reply, resolution, emission_id)


async def send_reply(
    db: Database, client: httpx.AsyncClient, settings: LightspeedSettings, reply: store.DueReply
) -> bool:
    """One attempt at one reply; whether the holder took it."""
    try:
        decided = await _decided(db, client, settings, reply)
    except PortUnavailable as error:
        log.warning("lightspeed reply payload not stored: %s", error)
        await _failed(db, settings, reply)
        return False
    if decided is None:
        return False
    resolution, emission_id = decided
    await faults.point("before_reply")
    try:
        # To holder_workflow_id exactly as the invocation gave it (E8).
        await deliver_emission(
            client,
            settings.holder_url,
            reply.holder_workflow_id,
            envelope(reply, resolution, emission_id),
        )
    except PortUnavailable as error:
        log.warning("lightspeed reply not delivered: %s", error)
        await _failed(db, settings, reply)
        return False
    # A crash here (fault point after_reply) re-sends the same envelope: the holder dedupes it.
    await faults.point("after_reply")
    async with db.transaction() as conn:
        await store.record_reply_sent(conn, reply.host_id, reply.emission_id)
    return True


async def _failed(db: Database, settings: LightspeedSettings, reply: store.DueReply) -> None:
    async with db.transaction() as conn:
        await store.record_reply_failed(
            conn, reply.host_id, reply.emission_id, settings.reply_pause_ms, settings.reply_attempts
        )


async def send_due_replies(
    db: Database, client: httpx.AsyncClient, settings: LightspeedSettings
) -> int:
    """Every due reply attempted once; how many the holder took."""
    async with db.transaction(read_only=True) as conn:
        due = await store.select_due_replies(conn, settings.reply_batch)
    sent = 0
    for reply in due:
        sent += await send_reply(db, client, settings, reply)
    return sent


async def reply_round(db: Database, settings: LightspeedSettings) -> int:
    """One round of the reply job, with its own client (closed when the round ends)."""
    async with httpx.AsyncClient(timeout=settings.request_timeout_s) as client:
        return await send_due_replies(db, client, settings)
