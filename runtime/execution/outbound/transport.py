"""The outbound HTTP transport: each connection goes to an address the policy has just checked.

Why a network backend and not a check before the request: a check that resolves the name and
then lets the HTTP library resolve it again can be answered with a public address first and an
internal one second (DNS rebinding). Here the name is resolved once, every address is checked,
and the socket is opened to one of exactly those addresses; TLS still verifies the certificate
and sends SNI for the name, and the Host header keeps the name, because only the TCP connect
sees the address. Environment proxies are never used: a proxy would resolve the name itself.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpcore
import httpx

from runtime.addresses import AddressPolicy, CheckedHost, DestinationRefused, Resolver

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)
# httpx's own defaults for a client's pool.
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)


class CheckedNetworkBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections only to checked addresses of the requested host."""

    def __init__(self, checked: CheckedHost, inner: httpcore.AsyncNetworkBackend | None = None):
        self._checked = checked
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve and check host once, then connect to the first checked address that answers."""
        addresses = await self._checked.addresses(host, port)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # addresses is never empty
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Never: an outbound call does not reach local sockets."""
        raise DestinationRefused("unix sockets are not an outbound destination")

    async def sleep(self, seconds: float) -> None:
        """Sleep as the inner backend does."""
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport with its connection pool on the checked network backend."""

    def __init__(self, policy: AddressPolicy, resolver: Resolver) -> None:
        super().__init__(trust_env=False)
        # httpx takes no network backend, so its pool is rebuilt with one (as httpx builds it).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=CheckedNetworkBackend(CheckedHost(policy, resolver)),
        )


def outbound_client(
    policy: AddressPolicy, resolver: Resolver, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The client for workflow calls: the checked transport unless a test passes its own."""
    return httpx.AsyncClient(
        transport=transport or CheckedTransport(policy, resolver),
        follow_redirects=False,
        trust_env=False,
    )
