"""The run-credential keyring: AES-GCM sealing, tamper detection, rotation, file validation."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import WorkflowError
from runtime.security import Keyring, KeyringError, SealedSecret, SecuritySettings
from runtime.security.keyring import KEYRING_ENV, load_configured_keyring

requirement = pytest.mark.requirement
AAD = b"host:7d1a6c2e-3b4f-4e8a-9c1d-2f5e6a7b8c9d|run:42"
TOKEN = b"eyJhbGciOiJFUzI1NiJ9.user-token-payload.signature"


def key_b64(fill: int) -> str:
    return base64.b64encode(bytes([fill]) * 32).decode("ascii")


def write_keyring(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def keyring_with(active: str, *ids: str) -> Keyring:
    keys = [{"id": key_id, "key": key_b64(index + 1)} for index, key_id in enumerate(ids)]
    return Keyring.from_document({"activeKeyId": active, "keys": keys})


@requirement("000:Run credential selection")
def test_a_sealed_secret_opens_to_the_same_plaintext() -> None:
    keyring = keyring_with("k1", "k1")
    sealed = keyring.seal(TOKEN, AAD)
    assert sealed.key_id == "k1"
    assert len(sealed.nonce) == 12
    assert TOKEN not in sealed.ciphertext
    assert keyring.open(sealed, AAD) == TOKEN


def test_every_seal_uses_a_fresh_nonce() -> None:
    keyring = keyring_with("k1", "k1")
    first, second = keyring.seal(TOKEN, AAD), keyring.seal(TOKEN, AAD)
    assert first.nonce != second.nonce
    assert first.ciphertext != second.ciphertext


@requirement("000:Run credential selection")
def test_a_tampered_ciphertext_is_detected() -> None:
    keyring = keyring_with("k1", "k1")
    sealed = keyring.seal(TOKEN, AAD)
    flipped = bytes([sealed.ciphertext[0] ^ 1]) + sealed.ciphertext[1:]
    with pytest.raises(KeyringError):
        keyring.open(SealedSecret(key_id="k1", nonce=sealed.nonce, ciphertext=flipped), AAD)
    other_nonce = bytes([sealed.nonce[0] ^ 1]) + sealed.nonce[1:]
    with pytest.raises(KeyringError):
        keyring.open(
            SealedSecret(key_id="k1", nonce=other_nonce, ciphertext=sealed.ciphertext), AAD
        )


@requirement("000:Run credential selection")
def test_a_secret_opened_with_other_associated_data_is_refused() -> None:
    keyring = keyring_with("k1", "k1")
    sealed = keyring.seal(TOKEN, AAD)
    with pytest.raises(KeyringError) as caught:
        keyring.open(sealed, AAD + b"-other-run")
    assert TOKEN.decode() not in str(caught.value)


@requirement("000:Run credential selection")
def test_a_secret_sealed_under_a_rotated_out_key_still_opens() -> None:
    before = keyring_with("k1", "k1")
    sealed = before.seal(TOKEN, AAD)
    after = keyring_with("k2", "k1", "k2")
    assert after.open(sealed, AAD) == TOKEN
    assert after.seal(TOKEN, AAD).key_id == "k2"


def test_a_secret_under_an_unknown_key_id_is_refused() -> None:
    sealed = keyring_with("k1", "k1").seal(TOKEN, AAD)
    with pytest.raises(KeyringError):
        keyring_with("k9", "k9").open(sealed, AAD)


@requirement("000:Operator setup")
def test_without_a_usable_key_admission_is_refused() -> None:
    keyring = Keyring.empty()
    assert not keyring.has_usable_key
    with pytest.raises(WorkflowError) as caught:
        keyring.require_usable_key()
    assert caught.value.code == "WORKFLOW_START_REJECTED"
    assert caught.value.retryable is False
    with pytest.raises(WorkflowError):
        keyring.seal(TOKEN, AAD)


def test_a_usable_keyring_passes_the_admission_check() -> None:
    keyring = keyring_with("k1", "k1")
    assert keyring.has_usable_key
    keyring.require_usable_key()


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"keys": [{"id": "k1", "key": key_b64(1)}]},
        {"activeKeyId": "k2", "keys": [{"id": "k1", "key": key_b64(1)}]},
        {"activeKeyId": "", "keys": []},
        {"activeKeyId": "k1", "keys": "k1"},
        {
            "activeKeyId": "k1",
            "keys": [{"id": "k1", "key": key_b64(1)}, {"id": "k1", "key": key_b64(2)}],
        },
        {"activeKeyId": "k1", "keys": [{"id": "k1", "key": base64.b64encode(b"x" * 16).decode()}]},
        {"activeKeyId": "k1", "keys": [{"id": "k1", "key": "not base64!"}]},
        {"activeKeyId": "k1", "keys": [{"id": "", "key": key_b64(1)}]},
        {"activeKeyId": "k1", "keys": [{"id": "k1"}]},
        {"activeKeyId": "k1", "keys": ["k1"]},
    ],
)
def test_invalid_keyring_files_are_refused(tmp_path: Path, document: Any) -> None:
    path = write_keyring(tmp_path / "keyring.json", document)
    with pytest.raises(KeyringError) as caught:
        Keyring.load(path)
    for key in (key_b64(1), key_b64(2)):
        assert key not in str(caught.value)


def test_unreadable_or_non_json_keyring_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyringError):
        Keyring.load(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(KeyringError):
        Keyring.load(tmp_path / "broken.json")


def test_a_valid_keyring_file_loads(tmp_path: Path) -> None:
    document = {
        "activeKeyId": "k2",
        "keys": [{"id": "k1", "key": key_b64(1)}, {"id": "k2", "key": key_b64(2)}],
    }
    keyring = Keyring.load(write_keyring(tmp_path / "keyring.json", document))
    assert keyring.active_key_id == "k2"
    assert key_b64(1) not in repr(keyring)
    assert "k1" in repr(keyring)


def test_the_configured_keyring_comes_from_settings_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = {"activeKeyId": "k1", "keys": [{"id": "k1", "key": key_b64(1)}]}
    path = write_keyring(tmp_path / "keyring.json", document)
    monkeypatch.delenv(KEYRING_ENV, raising=False)
    assert not load_configured_keyring(SecuritySettings()).has_usable_key
    assert load_configured_keyring(SecuritySettings(keyring_file=str(path))).has_usable_key
    monkeypatch.setenv(KEYRING_ENV, os.fspath(path))
    assert load_configured_keyring(SecuritySettings()).has_usable_key


def test_a_configured_keyring_that_does_not_exist_yet_refuses_admission(tmp_path: Path) -> None:
    settings = SecuritySettings(keyring_file=str(tmp_path / "absent.json"))
    assert not load_configured_keyring(settings).has_usable_key


def test_a_configured_keyring_that_is_invalid_fails_loudly(tmp_path: Path) -> None:
    path = write_keyring(tmp_path / "keyring.json", {"activeKeyId": "k1", "keys": []})
    with pytest.raises(KeyringError):
        load_configured_keyring(SecuritySettings(keyring_file=str(path)))
