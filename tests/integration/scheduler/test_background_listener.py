"""Long-lived background tasks: no call's context, and a quiet shutdown of their connection."""

from __future__ import annotations

from typing import Any

import psycopg

from runtime.composition.bootstrap import build_services
from runtime.execution.waiter import waiter_for
from runtime.scheduler.store.listener import TASK_READY_CHANNEL, NotificationListener
from runtime.settings import Settings
from runtime.store import Database
from runtime.telemetry.context import bound, current_fields
from tests.support.waiting import wait_until


async def test_a_listener_started_inside_a_call_does_not_run_with_that_calls_fields(
    database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    seen: list[dict[str, str]] = []
    listener = NotificationListener(
        database_url, [TASK_READY_CHANNEL], lambda _payload: seen.append(current_fields())
    )
    # As the shared run waiter is: started lazily by the first tools/call that waits.
    with bound(host_id="host-of-an-earlier-call", tool="workflow_invoke"):
        await listener.start()
    try:
        await admin.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
        await wait_until(lambda: listener.reconnects >= 1, what="the listener reconnected")
    finally:
        await listener.close()
    # The reconnect callback (and the lost-connection warning before it) run in the
    # listener's own empty context, not in the call's that started it.
    assert seen == [{}]


async def test_closing_the_service_closes_the_run_waiters_listen_connection_first(
    settings: Settings, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    settings.store.database_url = database_url
    settings.store.runtime_role = None
    services, close = await build_services(settings)
    waiter = await waiter_for(services.database)
    pids = [shard.listener.backend_pid for shard in waiter._shards]
    assert pids and all(pid is not None for pid in pids)
    await close()

    # Closed by close(), not left for the cluster's stop: an embedded cluster stopped under
    # them would log a lost connection on every clean shutdown. A backend leaves
    # pg_stat_activity a moment after its client hangs up, so wait for that (a connection
    # close() forgot would stay there).
    async def gone() -> bool:
        cursor = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        )
        row = await cursor.fetchone()
        return row is not None and row["count"] == 0

    await wait_until(gone, what="the waiter's LISTEN backends ended")


async def test_a_run_waiter_nobody_closed_closes_with_its_database(
    database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    # As a tools/call that waits does: the waiter LISTENs on first use; nobody calls
    # close_waiter (a test without the fixture that does, a process that forgot). Its pump
    # then outlived the database and reconnected for ever to a dropped one, in the suite's
    # one event loop, still running when a later test's teardown waited.
    database = Database(database_url, runtime_role=None, min_size=1, max_size=2)
    await database.open()
    waiter = await waiter_for(database)
    listeners = [shard.listener for shard in waiter._shards]
    pids = [listener.backend_pid for listener in listeners]
    assert pids and all(pid is not None for pid in pids)
    await database.close()
    assert all(listener._pump is None for listener in listeners)
    assert all(listener.backend_pid is None for listener in listeners)

    async def gone() -> bool:
        cursor = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        )
        row = await cursor.fetchone()
        return row is not None and row["count"] == 0

    await wait_until(gone, what="the waiter's LISTEN backends ended")
