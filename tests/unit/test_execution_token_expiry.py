"""token_expiry: the exp a run is scheduled by, read once per token text (bounded cache)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jwt
import pytest

from runtime.execution import credential
from runtime.execution.credential import token_expiry
from runtime.security import SecretToken


def _token(exp: Any, sub: str = "user-1") -> SecretToken:
    claims = {"sub": sub} if exp is None else {"sub": sub, "exp": exp}
    return SecretToken(jwt.encode(claims, "k" * 32, algorithm="HS256"))


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    credential._expiries.clear()


def test_each_token_answers_its_own_exp() -> None:
    first, second = _token(2_000_000_000), _token(2_000_000_500)
    assert token_expiry(first) == datetime.fromtimestamp(2_000_000_000, UTC)
    assert token_expiry(second) == datetime.fromtimestamp(2_000_000_500, UTC)
    # Asked again (now from the cache), each still answers its own.
    assert token_expiry(first) == datetime.fromtimestamp(2_000_000_000, UTC)
    assert token_expiry(second) == datetime.fromtimestamp(2_000_000_500, UTC)


def test_a_token_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    token = _token(2_000_000_000)
    calls = []
    real = credential.jwt.decode

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(credential.jwt, "decode", counting)
    for _ in range(3):
        assert token_expiry(token) == datetime.fromtimestamp(2_000_000_000, UTC)
    assert len(calls) == 1


def test_unreadable_tokens_and_missing_exp_answer_none_every_time() -> None:
    for token in (SecretToken("not-a-jwt"), _token(None), _token("tomorrow"), _token(True)):
        assert token_expiry(token) is None
        assert token_expiry(token) is None


def test_the_cache_is_bounded_and_holds_no_token_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(credential, "EXPIRY_CACHE_SIZE", 3)
    tokens = [_token(2_000_000_000 + n, sub=f"user-{n}") for n in range(5)]
    for token in tokens:
        token_expiry(token)
    assert len(credential._expiries) == 3
    texts = {token.reveal() for token in tokens}
    assert not texts & {str(key) for key in credential._expiries}
    assert all(isinstance(key, bytes) and len(key) == 32 for key in credential._expiries)
    # The oldest was dropped, and is read again (correctly) when it comes back.
    assert token_expiry(tokens[0]) == datetime.fromtimestamp(2_000_000_000, UTC)
