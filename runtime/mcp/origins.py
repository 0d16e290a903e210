"""Which browser origins may call the endpoint (DNS-rebinding protection)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


def _scheme_host_port(origin: str) -> tuple[str, str, int | None] | None:
    """An origin's scheme, host (brackets kept for IPv6) and port; None when it is no origin."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc or parts.path or parts.query or parts.fragment:
        return None
    if "@" in parts.netloc:
        return None
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    return parts.scheme.lower(), host.lower(), port


def _matches(origin: str, allowed: str) -> bool:
    if origin == allowed:
        return True
    entry = _scheme_host_port(allowed)
    # A loopback entry without a port stands for that scheme and host on any port: a browser
    # always sends the port, and a local client's port is not known in advance. Any other
    # entry is one exact origin.
    if entry is None or entry[1] not in LOOPBACK_HOSTS or entry[2] is not None:
        return False
    sent = _scheme_host_port(origin)
    return sent is not None and sent[:2] == entry[:2]


def origin_allowed(origin: str | None, allowed: Sequence[str]) -> bool:
    """Whether a request with this Origin header may proceed.

    Non-browser clients send no Origin; a browser's must be one the configuration trusts.
    """
    return origin is None or any(_matches(origin, entry) for entry in allowed)
