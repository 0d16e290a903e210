"""The HTTP server of `serve` and `gateway`: uvicorn, with keep-alive and shutdown made explicit.

Why not `uvicorn.run` with its defaults: its 5 s keep-alive equals httpx's idle reuse, so
under load a client's next request meets the connection closing (ReadError, no answer); and
on SIGTERM it waits for every in-flight request before the app hears of the shutdown, so a
sync call waits out its syncWaitMs (up to 20 s) and nothing bounds a request that never ends.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable

import uvicorn
from litestar import Litestar

from runtime.composition.http_protocol import EarlyAnswer, answering

log = logging.getLogger("workflow.http")


class DrainingServer(uvicorn.Server):
    """uvicorn.Server that tells the app to answer what is in flight before it waits for it."""

    def __init__(self, config: uvicorn.Config, on_drain: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_drain = on_drain

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Drain (in-flight waits answer now), then uvicorn's own bounded shutdown."""
        try:
            self._on_drain()
        except Exception as exc:
            # The stop goes on regardless: the grace still bounds what is in flight.
            log.error("draining before shutdown failed: %s", type(exc).__name__)
        await super().shutdown(sockets)


def run_http_server(
    app: Litestar | Callable[..., Awaitable[None]],
    *,
    host: str,
    port: int,
    keep_alive_timeout_s: int,
    shutdown_grace_s: float,
    on_drain: Callable[[], None] = lambda: None,
    early_answer: EarlyAnswer | None = None,
) -> None:
    """Serve app until SIGTERM/SIGINT; then drain, answer in-flight requests, and return.

    early_answer, if given, sees each POST once read, before the app (http_protocol).
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        # Our lines go through the telemetry handler (JSON outside a terminal) instead of
        # uvicorn's plain-text handlers; our access record replaces its own.
        log_config=None,
        access_log=False,
        # uvloop and httptools: the event loop's reader/timer bookkeeping (every database round
        # trip re-registers its socket) and h11's pure-Python parsing were about a tenth of a
        # call's CPU each; both are pinned dependencies, so naming them fails loudly if absent.
        loop="uvloop",
        http="httptools" if early_answer is None else answering(early_answer),
        # Nothing reads the client's address, so nothing trusts X-Forwarded-For to rewrite it:
        # uvicorn's proxy-headers middleware was a tenth of what a refusal cost the loop.
        proxy_headers=False,
        timeout_keep_alive=keep_alive_timeout_s,
        # A request still running this long after SIGTERM is cancelled (uvicorn answers 500
        # if nothing was sent yet), so the lifespan shutdown, and the exit, always come.
        timeout_graceful_shutdown=max(1, round(shutdown_grace_s)),
    )
    DrainingServer(config, on_drain).run()
