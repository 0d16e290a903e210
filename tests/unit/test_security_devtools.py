"""Development identity: idempotent init, private file modes, minted tokens, the CLI."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.errors import AuthenticationError
from runtime.security import Authenticator, KeySet, TokenKind, TokenVerifier
from runtime.security.devtools import DEV_HOST_ID, DevIdentity, init_dev_dir, main


def test_init_is_idempotent_and_keeps_the_keys(tmp_path: Path) -> None:
    first = init_dev_dir(tmp_path / "dev")
    key, keyring, jwks = (
        first.signing_key.read_bytes(),
        first.keyring.read_bytes(),
        first.jwks.read_bytes(),
    )
    second = init_dev_dir(tmp_path / "dev", algorithm="RS256")
    assert second.signing_key.read_bytes() == key
    assert second.keyring.read_bytes() == keyring
    assert second.jwks.read_bytes() == jwks


def test_private_files_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    paths = init_dev_dir(tmp_path / "dev")
    for private in (paths.signing_key, paths.keyring):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.directory.stat().st_mode) == 0o700


def test_the_jwks_holds_only_public_key_material(tmp_path: Path) -> None:
    paths = init_dev_dir(tmp_path / "dev")
    [key] = json.loads(paths.jwks.read_text(encoding="utf-8"))["keys"]
    assert "d" not in key
    assert key["use"] == "sig"


def test_init_prints_nothing_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--dir", str(tmp_path / "dev")]) == 0
    printed = capsys.readouterr().out
    keyring = json.loads((tmp_path / "dev" / "keyring.json").read_text(encoding="utf-8"))
    assert "PRIVATE KEY" not in printed
    assert keyring["keys"][0]["key"] not in printed
    assert DEV_HOST_ID in printed


def test_minted_cli_tokens_authenticate_with_the_dev_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = str(tmp_path / "dev")
    main(["mint", "--dir", directory, "--kind", "user", "--roles", "workflow-admin,viewer"])
    main(["mint", "--dir", directory, "--kind", "app", "--service", "gateway"])
    user, app = capsys.readouterr().out.split()
    settings = DevIdentity(directory).settings()
    ctx = Authenticator(settings, KeySet.from_settings(settings)).authenticate(
        f"Bearer {user}", f"Bearer {app}"
    )
    assert ctx.roles == {"workflow-admin", "viewer"}
    assert ctx.host_id == DEV_HOST_ID


def test_an_expired_cli_token_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = str(tmp_path / "dev")
    main(["mint", "--dir", directory, "--kind", "user", "--expired"])
    main(["mint", "--dir", directory, "--kind", "app"])
    user, app = capsys.readouterr().out.split()
    settings = DevIdentity(directory).settings()
    with pytest.raises(AuthenticationError):
        Authenticator(settings, KeySet.from_settings(settings)).authenticate(
            f"Bearer {user}", f"Bearer {app}"
        )


def test_the_dev_keyring_can_seal(tmp_path: Path) -> None:
    keyring = DevIdentity(tmp_path / "dev").keyring()
    sealed = keyring.seal(b"token", b"aad")
    assert keyring.open(sealed, b"aad") == b"token"


async def _grant(endpoint: Any, **request: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=endpoint)
    async with httpx.AsyncClient(transport=transport, base_url="http://dev") as client:
        return await client.post("/dev/client-credentials", **request)


async def test_the_client_credentials_endpoint_issues_application_tokens(tmp_path: Path) -> None:
    identity = DevIdentity(tmp_path / "dev")
    secret = identity.service_secret_file().read_text("ascii").strip()
    assert stat.S_IMODE(identity.service_secret_file().stat().st_mode) == 0o600
    endpoint = identity.client_credentials(secret, ttl=60)
    form = {"grant_type": "client_credentials", "scope": "mcp"}
    basic = await _grant(endpoint, data=form, auth=("workflow", secret))
    posted = await _grant(endpoint, data=form | {"client_id": "workflow", "client_secret": secret})
    for answer in (basic, posted):
        assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
        body = answer.json()
        assert body["token_type"] == "Bearer" and body["expires_in"] == 60
        verifier = TokenVerifier(identity.settings(), KeySet.from_settings(identity.settings()))
        claims = verifier.verify(body["access_token"], TokenKind.APP)
        assert claims["sub"] == claims["client_id"] == claims["sid"] == "workflow"
        assert claims["scope"] == "mcp" and "host" not in claims
    assert endpoint.grants == 2


async def test_the_client_credentials_endpoint_refuses_a_wrong_client_or_grant(
    tmp_path: Path,
) -> None:
    identity = DevIdentity(tmp_path / "dev")
    endpoint = identity.client_credentials("right")
    grant = {"grant_type": "client_credentials"}
    wrong = await _grant(endpoint, data=grant, auth=("workflow", "wrong"))
    assert wrong.status_code == 401 and "www-authenticate" in wrong.headers
    unnamed = await _grant(endpoint, data=grant)
    assert unnamed.status_code == 401
    other = await _grant(endpoint, data={"grant_type": "password"}, auth=("workflow", "right"))
    assert other.status_code == 400 and other.json() == {"error": "unsupported_grant_type"}
    assert endpoint.grants == 0
