"""Which browser origins the endpoints accept (issue 40, interop b): loopback defaults match
their scheme and host on any port, every other configured origin exactly."""

from __future__ import annotations

import pytest

from runtime.mcp import origin_allowed
from runtime.settings import ServerSettings

pytestmark = pytest.mark.requirement("issue-2:mcp-endpoint")

DEFAULTS = ServerSettings().allowed_origins


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8787",
        "http://localhost:8787",
        "http://localhost:5173",
        "http://127.0.0.1",
        "http://LOCALHOST:3000",
    ],
)
def test_a_browser_on_a_loopback_default_is_accepted_on_any_port(origin: str) -> None:
    assert origin_allowed(origin, DEFAULTS)


@pytest.mark.parametrize(
    "origin",
    [
        "https://127.0.0.1:8787",
        "http://127.0.0.2:8787",
        "http://localhost.evil.example:8787",
        "http://127.0.0.1.nip.io",
        "http://user@127.0.0.1:8787",
        "http://127.0.0.1:8787/path",
        "http://127.0.0.1:notaport",
        "null",
        "",
    ],
)
def test_another_scheme_host_or_a_malformed_origin_is_refused_under_the_defaults(
    origin: str,
) -> None:
    assert not origin_allowed(origin, DEFAULTS)


def test_a_configured_origin_that_is_not_loopback_matches_exactly() -> None:
    allowed = ["https://portal.example.com", "http://127.0.0.1:9000"]
    assert origin_allowed("https://portal.example.com", allowed)
    assert not origin_allowed("https://portal.example.com:8443", allowed)
    assert not origin_allowed("http://portal.example.com", allowed)
    # A loopback entry that names its port is one exact origin too.
    assert origin_allowed("http://127.0.0.1:9000", allowed)
    assert not origin_allowed("http://127.0.0.1:9001", allowed)


def test_a_request_without_an_origin_is_not_a_browser_and_passes() -> None:
    assert origin_allowed(None, DEFAULTS)
