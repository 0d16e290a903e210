"""The Gateway's own bearer: configured, from a file (rotated), or minted in development."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest

from gateway.credentials import (
    REMINT_MARGIN_S,
    DevMintedToken,
    FileToken,
    GatewayConfigurationError,
    StaticToken,
    app_token_source,
)
from gateway.settings import GatewayConfig, GatewaySettings
from runtime.composition.config import load_settings
from runtime.security.devtools import DEV_HOST_ID, DevIdentity

OTHER_HOST = "01964b05-552a-7c4b-9184-6857e7f3dc5f"


class Clock:
    """A wall clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def claims(token: str) -> dict[str, object]:
    """The unverified claims of a minted token."""
    return dict(jwt.decode(token, options={"verify_signature": False}))


@pytest.mark.requirement("000:Gateway assertion")
def test_development_tokens_name_the_callers_host_and_are_minted_again_before_expiry(
    tmp_path: Path,
) -> None:
    identity = DevIdentity(tmp_path / "dev")
    first = claims(DevMintedToken(identity).token_for(OTHER_HOST).reveal())
    clock = Clock(float(first["iat"]))  # type: ignore[arg-type]
    source = DevMintedToken(identity, clock=clock)
    token = source.token_for(OTHER_HOST)
    assert claims(token.reveal())["host"] == OTHER_HOST
    assert claims(source.token_for(None).reveal())["host"] == DEV_HOST_ID
    assert source.token_for(OTHER_HOST) == token  # reused while fresh
    clock.now = float(claims(token.reveal())["exp"]) - REMINT_MARGIN_S + 1  # type: ignore[arg-type]
    assert source.token_for(OTHER_HOST) != token
    assert "eyJ" not in repr(token) and "eyJ" not in str(token)


def test_a_configured_token_wins_and_a_file_token_is_read_again_when_it_changes(
    tmp_path: Path,
) -> None:
    identity = DevIdentity(tmp_path / "dev")
    static = app_token_source(GatewaySettings(app_token="a.b.c"), identity)
    assert isinstance(static, StaticToken) and static.token_for(None).reveal() == "a.b.c"
    path = tmp_path / "token"
    path.write_text("one.two.three\n", encoding="ascii")
    source = app_token_source(GatewaySettings(app_token_file=str(path)), None)
    assert isinstance(source, FileToken) and source.token_for(None).reveal() == "one.two.three"
    path.write_text("four.five.six.seven", encoding="ascii")
    assert source.token_for(None).reveal() == "four.five.six.seven"
    with pytest.raises(GatewayConfigurationError, match="app_token"):
        app_token_source(GatewaySettings(), None)


def test_the_environment_sets_the_token_and_the_settings_never_show_it() -> None:
    settings = load_settings(None, {"WORKFLOW_GATEWAY_APP_TOKEN": "x.y.z"}, document=GatewayConfig)
    assert settings.gateway.app_token == "x.y.z"
    assert "x.y.z" not in repr(settings.gateway)
