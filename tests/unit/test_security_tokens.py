"""Bearer verification rules: algorithms, keys, time claims, issuer, audience."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from runtime.errors import AuthenticationError
from runtime.security import KeySet, TokenKind, TokenVerifier
from runtime.security.devtools import DEV_AUDIENCE, DEV_ISSUER, DevIdentity

requirement = pytest.mark.requirement


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> DevIdentity:
    return DevIdentity(tmp_path_factory.mktemp("dev-es"))


@pytest.fixture(scope="module")
def rsa_dev(tmp_path_factory: pytest.TempPathFactory) -> DevIdentity:
    return DevIdentity(tmp_path_factory.mktemp("dev-rsa"), algorithm="RS256")


def verifier_for(dev: DevIdentity, **overrides: Any) -> TokenVerifier:
    settings = dev.settings(**overrides)
    return TokenVerifier(settings, KeySet.from_settings(settings))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unsigned_claims(dev: DevIdentity) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": DEV_ISSUER,
        "aud": DEV_AUDIENCE,
        "sub": "dev-user",
        "uid": "dev-user",
        "host": "7d1a6c2e-3b4f-4e8a-9c1d-2f5e6a7b8c9d",
        "roles": ["admin"],
        "iat": now,
        "exp": now + 600,
    }


def refused(verifier: TokenVerifier, token: str, kind: TokenKind = TokenKind.USER) -> str:
    with pytest.raises(AuthenticationError) as caught:
        verifier.verify(token, kind)
    message = str(caught.value)
    for segment in token.split("."):
        if len(segment) >= 8:  # shorter pieces could match ordinary words
            assert segment not in message
            assert segment not in repr(caught.value)
    assert caught.value.__cause__ is None
    return message


@requirement("000:Identity and user token")
def test_a_user_token_signed_by_the_dev_key_verifies(dev: DevIdentity) -> None:
    claims = verifier_for(dev).verify(dev.user_token(), TokenKind.USER)
    assert claims["uid"] == "dev-user"


@requirement("000:Identity and user token")
def test_a_token_expired_beyond_the_clock_skew_is_refused(dev: DevIdentity) -> None:
    token = dev.user_token(expires_at=int(time.time()) - 600)
    assert "expired" in refused(verifier_for(dev, clock_skew_seconds=60), token)


@requirement("000:Identity and user token")
def test_a_token_expired_within_the_clock_skew_is_accepted(dev: DevIdentity) -> None:
    token = dev.user_token(expires_at=int(time.time()) - 20)
    claims = verifier_for(dev, clock_skew_seconds=600).verify(token, TokenKind.USER)
    assert claims["sub"] == "dev-user"


@requirement("000:Identity and user token")
def test_a_token_without_exp_is_refused(dev: DevIdentity) -> None:
    claims = unsigned_claims(dev)
    del claims["exp"]
    refused(verifier_for(dev), dev.sign(claims))


@requirement("000:Identity and user token")
def test_a_token_whose_nbf_is_in_the_future_is_refused(dev: DevIdentity) -> None:
    token = dev.user_token(not_before=int(time.time()) + 3600)
    assert "not yet valid" in refused(verifier_for(dev), token)


@requirement("000:Identity and user token")
@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_an_unsigned_alg_none_token_is_refused(dev: DevIdentity, alg: str) -> None:
    header = b64url(json.dumps({"alg": alg, "typ": "JWT", "kid": dev.kid}).encode())
    payload = b64url(json.dumps(unsigned_claims(dev)).encode())
    for signature in ("", b64url(b"anything")):
        message = refused(verifier_for(dev), f"{header}.{payload}.{signature}")
        assert "algorithm" in message


@requirement("000:Identity and user token")
def test_an_hs256_token_keyed_with_the_public_key_is_refused(rsa_dev: DevIdentity) -> None:
    public_pem = Path(rsa_dev.paths.public_key).read_bytes()
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": rsa_dev.kid}).encode())
    payload = b64url(json.dumps(unsigned_claims(rsa_dev)).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = b64url(hmac.new(public_pem, signing_input, hashlib.sha256).digest())
    message = refused(verifier_for(rsa_dev), f"{header}.{payload}.{signature}")
    assert "algorithm" in message


@requirement("000:Identity and user token")
def test_an_rs256_token_verifies_against_an_rsa_jwks(rsa_dev: DevIdentity) -> None:
    claims = verifier_for(rsa_dev).verify(rsa_dev.user_token(), TokenKind.USER)
    assert claims["sub"] == "dev-user"


@requirement("000:Identity and user token")
def test_an_algorithm_that_is_not_pinned_is_refused(rsa_dev: DevIdentity) -> None:
    token = rsa_dev.sign(unsigned_claims(rsa_dev), headers={"alg": "PS256"})
    assert "algorithm" in refused(verifier_for(rsa_dev), token)
    # The JWKS entry declares RS256, so only a bare PEM key may also verify PS256.
    assert "could not be verified" in refused(verifier_for(rsa_dev, algorithms=["PS256"]), token)
    pem_only = {"jwks_file": None, "public_key_files": [str(rsa_dev.paths.public_key)]}
    pinned = verifier_for(rsa_dev, algorithms=["PS256"], **pem_only)
    assert pinned.verify(token, TokenKind.USER)["sub"] == "dev-user"


@requirement("000:Identity and user token")
def test_a_token_from_the_wrong_issuer_is_refused(dev: DevIdentity) -> None:
    token = dev.user_token(issuer="https://evil.example")
    assert "issuer" in refused(verifier_for(dev), token)


@requirement("000:Identity and user token")
def test_a_token_for_the_wrong_audience_is_refused(dev: DevIdentity) -> None:
    token = dev.user_token(audience="another-service")
    assert "not meant for this service" in refused(verifier_for(dev), token)


@requirement("000:Identity and user token")
def test_a_token_with_an_unknown_kid_is_refused(dev: DevIdentity) -> None:
    token = dev.sign(unsigned_claims(dev), headers={"kid": "unknown-key"})
    assert "could not be verified" in refused(verifier_for(dev), token)


@requirement("000:Identity and user token")
def test_a_token_signed_by_an_untrusted_key_is_refused(dev: DevIdentity, tmp_path: Path) -> None:
    stranger = DevIdentity(tmp_path / "stranger")
    without_kid = stranger.sign(unsigned_claims(stranger), headers={"kid": None})
    refused(verifier_for(dev), stranger.user_token())
    refused(verifier_for(dev), without_kid)


@requirement("000:Identity and user token")
def test_a_token_with_a_forged_signature_is_refused(dev: DevIdentity) -> None:
    header, payload, _ = dev.user_token().split(".")
    other_signature = dev.user_token(user_id="someone-else").split(".")[2]
    refused(verifier_for(dev), f"{header}.{payload}.{other_signature}")


@requirement("000:Identity and user token")
def test_pem_public_keys_are_trusted_with_or_without_a_kid(dev: DevIdentity) -> None:
    verifier = verifier_for(dev, jwks_file=None, public_key_files=[str(dev.paths.public_key)])
    assert verifier.verify(dev.user_token(), TokenKind.USER)["sub"] == "dev-user"
    without_kid = dev.sign(unsigned_claims(dev), headers={"kid": None})
    assert verifier.verify(without_kid, TokenKind.USER)["sub"] == "dev-user"


@requirement("000:Identity and user token")
def test_tokens_of_a_rotated_out_key_still_verify_while_both_keys_are_trusted(
    dev: DevIdentity, rsa_dev: DevIdentity
) -> None:
    verifier = verifier_for(
        dev, public_key_files=[str(rsa_dev.paths.public_key)], algorithms=["ES256", "RS256"]
    )
    assert verifier.verify(dev.user_token(), TokenKind.USER)["sub"] == "dev-user"
    assert verifier.verify(rsa_dev.user_token(), TokenKind.USER)["sub"] == "dev-user"


@requirement("000:Identity and user token")
def test_no_configured_issuer_refuses_every_token(dev: DevIdentity) -> None:
    from runtime.security import TokenTrust

    verifier = verifier_for(dev, user_token=TokenTrust())
    refused(verifier, dev.user_token())


@requirement("000:Identity and user token")
def test_no_trusted_keys_refuses_every_token(dev: DevIdentity) -> None:
    verifier = verifier_for(dev, jwks_file=None)
    refused(verifier, dev.user_token())


@requirement("000:Operator setup")
def test_an_application_token_is_refused_where_a_user_token_is_expected(
    dev: DevIdentity,
) -> None:
    token = dev.app_token(extra_claims={"uid": "dev-user", "roles": ["admin"]})
    message = refused(verifier_for(dev), token, TokenKind.USER)
    assert "application token" in message


@requirement("000:Gateway assertion")
def test_a_user_token_is_refused_where_an_application_token_is_expected(
    dev: DevIdentity,
) -> None:
    message = refused(verifier_for(dev), dev.user_token(), TokenKind.APP)
    assert "not an application token" in message


@requirement("000:Identity and user token")
@pytest.mark.parametrize(
    "token",
    [
        "",
        "notajwtatall",
        "headerpart.payloadpart",
        "headerpart.payloadpart.signature.extrapart",
        "héaderpart.payloadpart.signature",
        "x" * 20_000 + ".payloadpart.signature",
        "eyJhbGciOiJFUzI1NiJ9.payloadpart.sig!nature",
        "bm90anNvbmF0YWxs.bm90anNvbmF0YWxs.c2lnbmF0dXJl",
    ],
)
def test_malformed_tokens_are_refused_without_echoing_them(dev: DevIdentity, token: str) -> None:
    refused(verifier_for(dev), token)


class _Clock:
    """A settable clock for the verifier's memory of verified tokens."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _counting_decode(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = jwt.decode

    def counted(token: str, *args: Any, **kwargs: Any) -> Any:
        calls.append("decode")
        return real(token, *args, **kwargs)

    monkeypatch.setattr(jwt, "decode", counted)
    return calls


@requirement("000:Identity and user token")
def test_a_bearer_verified_once_is_not_verified_again_on_the_next_call(
    dev: DevIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_decode(monkeypatch)
    verifier = verifier_for(dev)
    token = dev.user_token()
    first = verifier.verify(token, TokenKind.USER)
    first["roles"] = ["tampered"]  # a caller's copy never changes what is remembered
    again = verifier.verify(token, TokenKind.USER)
    assert calls == ["decode"]
    assert again["uid"] == "dev-user" and again["roles"] != ["tampered"]


@requirement("000:Identity and user token")
def test_a_remembered_bearer_is_verified_afresh_once_it_expires(
    dev: DevIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_decode(monkeypatch)
    clock = _Clock()
    settings = dev.settings(clock_skew_seconds=5)
    verifier = TokenVerifier(settings, KeySet.from_settings(settings), clock=clock)
    token = dev.user_token(expires_at=int(clock.now) + 30)
    verifier.verify(token, TokenKind.USER)
    clock.now += 30 + 5 - 1  # still within exp plus the skew: remembered
    verifier.verify(token, TokenKind.USER)
    assert calls == ["decode"]
    clock.now += 2  # past exp plus the skew: verified again (and refused by real time later)
    verifier.verify(token, TokenKind.USER)
    assert calls == ["decode", "decode"]


@requirement("000:Gateway assertion")
def test_a_remembered_application_token_is_still_refused_as_a_user_token(
    dev: DevIdentity,
) -> None:
    verifier = verifier_for(dev)
    token = dev.app_token()
    verifier.verify(token, TokenKind.APP)
    assert "application token" in refused(verifier, token, TokenKind.USER)
