"""Exact refusals: out-of-range token times, unstorable values and the runtime's own reasons."""

from __future__ import annotations

import pytest

from runtime.engine.run.error_mapping import map_fault
from runtime.errors import AuthenticationError
from runtime.mcp.http_checks import duplicate_credential_fault, is_json_content_type
from runtime.security import KeySet, TokenKind, TokenVerifier
from runtime.security.devtools import DevIdentity

YEAR_10000 = 253_402_300_800


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> DevIdentity:
    return DevIdentity(tmp_path_factory.mktemp("dev-es"))


def verifier(dev: DevIdentity) -> TokenVerifier:
    settings = dev.settings()
    return TokenVerifier(settings, KeySet.from_settings(settings))


@pytest.mark.parametrize(
    "claims",
    [{"exp": YEAR_10000}, {"nbf": YEAR_10000}, {"iat": YEAR_10000}, {"exp": 10**30}],
)
def test_a_time_claim_past_the_year_9999_is_an_authentication_failure(
    dev: DevIdentity, claims: dict[str, int]
) -> None:
    token = dev.user_token(extra_claims=claims)
    with pytest.raises(AuthenticationError) as caught:
        verifier(dev).verify(token, TokenKind.USER)
    assert "out-of-range" in caught.value.message or "not yet valid" in caught.value.message


def test_an_ordinary_token_still_verifies(dev: DevIdentity) -> None:
    assert verifier(dev).verify(dev.user_token(), TokenKind.USER)["sub"]


def test_a_repeated_credential_header_is_refused_by_name() -> None:
    raw = [(b"Authorization", b"Bearer a"), (b"x-scope-token", b"s"), (b"authorization", b"b")]
    fault = duplicate_credential_fault(raw)
    assert fault is not None and fault.http_status == 400
    assert "authorization" in fault.message
    assert duplicate_credential_fault([(b"authorization", b"a"), (b"x-scope-token", b"s")]) is None


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ('application/json; charset="UTF-8"', True),
        ("application/json; charset=latin-1", False),
        ("application/json;charset=utf-16", False),
        ("text/plain", False),
        ("application/x-www-form-urlencoded", False),
        (None, False),
    ],
)
def test_only_json_is_a_json_content_type(value: str | None, accepted: bool) -> None:
    assert is_json_content_type(value) is accepted


@pytest.mark.parametrize(
    "reason",
    [
        "response larger than 1048576 bytes",
        "response is not valid JSON",
        "too many redirects",
        "redirect refused: the call does not follow redirects (HTTP status 302)",
    ],
)
def test_the_stored_error_keeps_the_runtimes_own_outbound_reason(reason: str) -> None:
    problem = {
        "type": "https://serverlessworkflow.io/spec/1.0.0/errors/communication",
        "status": 500,
        "instance": "/do/0/call",
        "detail": reason,
    }
    error = map_fault(problem, "none")
    assert error.message.endswith(f": {reason}")


def test_a_detail_that_is_not_a_runtime_reason_is_not_copied() -> None:
    problem = {
        "type": "https://serverlessworkflow.io/spec/1.0.0/errors/communication",
        "status": 500,
        "instance": "/do/0/call",
        "detail": "response larger than 10 bytes: {secret response body}",
    }
    assert "secret" not in map_fault(problem, "none").message
