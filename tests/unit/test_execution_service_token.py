"""ServiceTokens: the client-credentials grant, its renewal schedule and what it never shows."""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import jwt
import pytest

from runtime.execution import ServiceTokenSettings
from runtime.execution.service_token import SecretFile, ServiceTokenError, ServiceTokens

SECRET = "s3cr:et/with+odd=chars"
CLIENT = "workflow runtime"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Endpoint:
    """A token endpoint on httpx.MockTransport: scripted answers, every request kept."""

    def __init__(self, *answers: tuple[int, Any]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.issued = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.answers:
            status, body = self.answers.pop(0)
            return httpx.Response(status, json=body)
        self.issued += 1
        return httpx.Response(
            200,
            json={
                "access_token": f"token-{self.issued}",
                "token_type": "Bearer",
                "expires_in": 100,
            },
        )

    def form(self, index: int = -1) -> dict[str, list[str]]:
        return parse_qs(self.requests[index].content.decode())


def _source(
    tmp_path: Path, endpoint: Endpoint, clock: FakeClock | None = None, **settings: Any
) -> ServiceTokens:
    secret_file = tmp_path / "secret"
    if not secret_file.exists():
        secret_file.write_text(SECRET + "\n", encoding="utf-8")
    values: dict[str, Any] = {
        "endpoint": "https://login.example.com/oauth2/token",
        "client_id": CLIENT,
        "client_secret_file": str(secret_file),
        **settings,
    }
    return ServiceTokens(
        ServiceTokenSettings(**values),
        SecretFile(secret_file),
        transport=httpx.MockTransport(endpoint),
        clock=clock or FakeClock(),
    )


async def test_a_grant_authenticates_the_client_with_http_basic_by_default(tmp_path: Path) -> None:
    endpoint = Endpoint()
    tokens = _source(tmp_path, endpoint, scope="mcp.call", audience="gateway")
    assert (await tokens.token()).reveal() == "token-1"
    request = endpoint.requests[0]
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    scheme, _, encoded = request.headers["authorization"].partition(" ")
    # RFC 6749 2.3.1: id and secret form-urlencoded, then Basic.
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == "workflow%20runtime:s3cr%3Aet%2Fwith%2Bodd%3Dchars"
    assert endpoint.form() == {
        "grant_type": ["client_credentials"],
        "scope": ["mcp.call"],
        "audience": ["gateway"],
    }


async def test_client_secret_post_sends_the_credentials_as_form_fields(tmp_path: Path) -> None:
    endpoint = Endpoint()
    tokens = _source(tmp_path, endpoint, client_auth="client_secret_post")
    await tokens.token()
    assert "authorization" not in endpoint.requests[0].headers
    assert endpoint.form() == {
        "grant_type": ["client_credentials"],
        "client_id": [CLIENT],
        "client_secret": [SECRET],
    }


async def test_the_token_is_kept_until_the_fraction_of_its_lifetime_passed(tmp_path: Path) -> None:
    endpoint, clock = Endpoint(), FakeClock()
    tokens = _source(tmp_path, endpoint, clock, renew_fraction=0.8)
    assert (await tokens.token()).reveal() == "token-1"
    clock.now += 79.9
    assert (await tokens.token()).reveal() == "token-1"
    assert len(endpoint.requests) == 1
    clock.now += 0.2
    assert (await tokens.token()).reveal() == "token-2"
    assert len(endpoint.requests) == 2


async def test_a_failed_renewal_keeps_the_valid_token_until_it_expires(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint, clock = Endpoint(), FakeClock()
    tokens = _source(tmp_path, endpoint, clock)
    await tokens.token()
    endpoint.answers = [(503, {"error": "temporarily_unavailable"})] * 2
    clock.now += 90
    with caplog.at_level(logging.WARNING, "workflow.execution.service_token"):
        assert (await tokens.token()).reveal() == "token-1"
    assert "HTTP 503" in caplog.text
    clock.now += 4  # not asked again at once: the endpoint gets a moment
    assert (await tokens.token()).reveal() == "token-1" and len(endpoint.requests) == 2
    clock.now += 6  # now past its expiry: never sent, whatever the endpoint says
    with pytest.raises(ServiceTokenError, match="HTTP 503"):
        await tokens.token()
    assert (await tokens.token()).reveal() == "token-2"  # the endpoint is back
    assert "token-1" not in caplog.text and SECRET not in caplog.text


async def test_the_secret_file_is_read_at_every_grant(tmp_path: Path) -> None:
    endpoint, clock = Endpoint(), FakeClock()
    tokens = _source(tmp_path, endpoint, clock, client_auth="client_secret_post")
    await tokens.token()
    (tmp_path / "secret").write_text("rotated", encoding="utf-8")
    clock.now += 100
    await tokens.token()
    assert endpoint.form(0)["client_secret"] == [SECRET]
    assert endpoint.form(1)["client_secret"] == ["rotated"]


async def test_a_jwts_own_exp_shortens_the_lifetime_it_is_held(tmp_path: Path) -> None:
    short = jwt.encode({"exp": int(time.time()) + 10}, "k" * 32, algorithm="HS256")
    endpoint, clock = (
        Endpoint((200, {"access_token": short, "token_type": "bearer", "expires_in": 3600})),
        FakeClock(),
    )
    tokens = _source(tmp_path, endpoint, clock, renew_fraction=0.5)
    assert (await tokens.token()).reveal() == short
    clock.now += 6  # past half of the JWT's ten seconds, far from half of expires_in
    assert (await tokens.token()).reveal() == "token-1"


async def test_refresh_after_a_401_grants_once_and_only_for_the_token_it_refused(
    tmp_path: Path,
) -> None:
    endpoint = Endpoint()
    tokens = _source(tmp_path, endpoint)
    first = await tokens.token()
    renewed = await tokens.refresh(first)
    assert renewed is not None and renewed.reveal() == "token-2"
    # A caller that sent the old token meanwhile gets the newer one with no grant.
    again = await tokens.refresh(first)
    assert again is not None and again.reveal() == "token-2"
    assert len(endpoint.requests) == 2


async def test_refresh_is_none_when_the_endpoint_answers_the_same_token(tmp_path: Path) -> None:
    same = {"access_token": "cached", "token_type": "Bearer", "expires_in": 100}
    tokens = _source(tmp_path, Endpoint((200, same), (200, same)))
    assert await tokens.refresh(await tokens.token()) is None


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (401, {"error": "invalid_client"}, "HTTP 401"),
        (200, {"token_type": "Bearer"}, "no access_token"),
        (200, {"access_token": "t", "token_type": "mac"}, "not a bearer"),
        (200, {"access_token": "t", "token_type": "Bearer", "expires_in": "soon"}, "malformed"),
        (200, {"access_token": "t", "token_type": "Bearer", "expires_in": 0}, "expired"),
        (200, ["t"], "no JSON object"),
    ],
)
async def test_a_bad_answer_is_refused_without_repeating_it(
    tmp_path: Path, status: int, body: Any, reason: str
) -> None:
    tokens = _source(tmp_path, Endpoint((status, body)))
    with pytest.raises(ServiceTokenError, match=reason) as refused:
        await tokens.token()
    assert json.dumps(body) not in refused.value.message


async def test_an_unreadable_secret_file_fails_the_grant_before_any_request(tmp_path: Path) -> None:
    endpoint = Endpoint()
    tokens = _source(tmp_path, endpoint)
    (tmp_path / "secret").unlink()
    with pytest.raises(ServiceTokenError, match="client secret file cannot be read"):
        await tokens.token()
    assert endpoint.requests == []


@pytest.mark.parametrize(
    "values",
    [
        {"endpoint": "https://login.example.com/token", "client_id": "w"},
        {"endpoint": "https://login.example.com/token", "client_secret_file": "/s"},
        {"endpoint": "ftp://login.example.com/token", "client_id": "w", "client_secret_file": "/s"},
        {"renew_fraction": 1.0},
        {"renew_fraction": 0},
        {"timeout_seconds": 0},
    ],
)
def test_incomplete_or_impossible_settings_are_refused(values: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ServiceTokenSettings(**values)


def test_no_endpoint_means_no_service_token() -> None:
    assert ServiceTokens.from_settings(ServiceTokenSettings()) is None
