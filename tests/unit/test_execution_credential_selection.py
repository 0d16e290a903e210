"""select_run_token (seed 000 "Run credential selection") for runs without a LONG exchange."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime.errors import AuthenticationError
from runtime.execution.credential import select_run_token
from runtime.security import SecretToken

NOW = datetime(2030, 1, 1, tzinfo=UTC)
TOKEN = SecretToken("header.payload.signature")


def verifies_until(exp: datetime) -> Any:
    def check(token: str) -> dict[str, Any]:
        return {"exp": int(exp.timestamp())}

    return check


def refuses(token: str) -> dict[str, Any]:
    raise AuthenticationError("user token could not be verified")


def test_the_original_token_is_used_well_before_its_expiry() -> None:
    check = verifies_until(NOW + timedelta(hours=1))
    assert select_run_token(TOKEN, None, margin_seconds=300, check=check, now=NOW) is TOKEN


def test_inside_the_margin_the_original_token_is_still_used_while_it_verifies() -> None:
    check = verifies_until(NOW + timedelta(seconds=10))
    assert select_run_token(TOKEN, None, margin_seconds=300, check=check, now=NOW) is TOKEN


def test_a_token_that_does_not_verify_is_an_authentication_error() -> None:
    with pytest.raises(AuthenticationError):
        select_run_token(TOKEN, NOW + timedelta(hours=1), margin_seconds=300, check=refuses)


def test_a_token_past_its_exp_within_the_verification_leeway_is_used_while_it_verifies() -> None:
    # Seed 000 rule 3: "use the original token while it still verifies"; verification alone
    # decides (its clock-skew leeway included), no exp check of the selector's own.
    check = verifies_until(NOW - timedelta(seconds=5))  # a skew-tolerant verifier passed it
    assert select_run_token(TOKEN, None, margin_seconds=300, check=check, now=NOW) is TOKEN


def test_without_a_verifier_the_stored_expiry_still_refuses_a_dead_token() -> None:
    with pytest.raises(AuthenticationError):
        select_run_token(TOKEN, NOW - timedelta(seconds=1), margin_seconds=300, now=NOW)
