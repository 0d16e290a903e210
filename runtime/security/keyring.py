"""The sealing keyring: AES-256-GCM for the stored run credential, with key rotation."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runtime.errors import WorkflowError
from runtime.security.settings import SecuritySettings

KEY_BYTES = 32
NONCE_BYTES = 12
# The Compose stack's secrets init service points Workflow at the keyring through this variable.
KEYRING_ENV = "WORKFLOW_LONG_KEYRING_FILE"


class KeyringError(Exception):
    """A keyring file is invalid, or a sealed secret cannot be opened; never shows key material."""


class SealedSecret(msgspec.Struct, frozen=True, kw_only=True):
    """A secret sealed with one keyring key: store all three fields together."""

    key_id: str
    nonce: bytes
    ciphertext: bytes  # includes the 16-byte GCM tag

    def __repr__(self) -> str:
        return f"SealedSecret(key_id={self.key_id!r}, ciphertext_bytes={len(self.ciphertext)})"


class Keyring:
    """Named AES-256 keys with one active key for sealing; every key can still open."""

    def __init__(self, keys: dict[str, bytes], active_key_id: str | None) -> None:
        if active_key_id is not None and active_key_id not in keys:
            raise KeyringError("the active key id is not among the keys")
        for key_id, key in keys.items():
            if not key_id or len(key) != KEY_BYTES:
                raise KeyringError(f"key {key_id!r} must be {KEY_BYTES} bytes with a non-empty id")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._keys = dict(keys)
        self._active_key_id = active_key_id

    @classmethod
    def empty(cls) -> Keyring:
        """A keyring with no keys: sealing is refused."""
        return cls({}, None)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keyring:
        """Read and validate a keyring JSON file ({"activeKeyId", "keys": [{"id", "key"}]})."""
        try:
            document = json.loads(Path(path).read_bytes())
        except OSError:
            raise KeyringError(f"keyring file {str(path)!r} cannot be read") from None
        except ValueError:
            raise KeyringError(f"keyring file {str(path)!r} is not JSON") from None
        return cls.from_document(document)

    @classmethod
    def from_document(cls, document: Any) -> Keyring:
        """Validate a parsed keyring document."""
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise KeyringError("keyring must be an object with a keys list")
        active = document.get("activeKeyId")
        if not isinstance(active, str) or not active:
            raise KeyringError("keyring must name its activeKeyId")
        keys: dict[str, bytes] = {}
        for entry in document["keys"]:
            key_id, key = _parse_entry(entry)
            if key_id in keys:
                raise KeyringError(f"keyring key id {key_id!r} appears twice")
            keys[key_id] = key
        return cls(keys, active)

    @property
    def has_usable_key(self) -> bool:
        """True when an active key exists to seal with."""
        return self._active_key_id is not None

    @property
    def active_key_id(self) -> str | None:
        """The id of the key new secrets are sealed with."""
        return self._active_key_id

    def require_usable_key(self) -> None:
        """Refuse admission with WORKFLOW_START_REJECTED when nothing can be sealed."""
        if not self.has_usable_key:
            raise _no_sealing_key()

    def seal(self, plaintext: bytes, associated_data: bytes) -> SealedSecret:
        """Encrypt plaintext with the active key and a fresh 96-bit nonce, bound to the AAD."""
        key_id = self._active_key_id
        if key_id is None:
            raise _no_sealing_key()
        nonce = secrets.token_bytes(NONCE_BYTES)
        ciphertext = self._ciphers[key_id].encrypt(nonce, plaintext, associated_data)
        return SealedSecret(key_id=key_id, nonce=nonce, ciphertext=ciphertext)

    def open(self, sealed: SealedSecret, associated_data: bytes) -> bytes:
        """Decrypt with the key the secret names; tampering or a wrong AAD raises KeyringError."""
        cipher = self._ciphers.get(sealed.key_id)
        if cipher is None:
            raise KeyringError(f"sealed secret uses unknown key id {sealed.key_id!r}")
        if len(sealed.nonce) != NONCE_BYTES:
            raise KeyringError("sealed secret has an invalid nonce")
        try:
            return cipher.decrypt(sealed.nonce, sealed.ciphertext, associated_data)
        except InvalidTag:
            raise KeyringError("sealed secret failed authentication") from None

    def keyed_digest(self, purpose: str, data: bytes) -> str:
        """An HMAC-SHA256 of data under a key derived from the active key for one purpose.

        For comparing a secret without keeping it: a plain digest of a low-entropy value can
        be reversed by guessing, this one not without the keyring. Names the key it used.
        """
        key_id = self._active_key_id
        if key_id is None:
            raise _no_sealing_key()
        derived = hmac.new(self._keys[key_id], purpose.encode("utf-8"), hashlib.sha256).digest()
        mac = hmac.new(derived, data, hashlib.sha256).hexdigest()
        return f"hmac-sha256:{key_id}:{mac}"

    def __repr__(self) -> str:
        return f"Keyring(active_key_id={self._active_key_id!r}, key_ids={sorted(self._ciphers)!r})"


def _no_sealing_key() -> WorkflowError:
    # START_REJECTED: admission refuses the run and nothing was changed; retrying cannot help
    # until an operator provisions a key, so neither a retryable nor a transport code fits.
    return WorkflowError(
        "WORKFLOW_START_REJECTED",
        "no sealing key is configured for the run credential; the run was not started",
    )


def _parse_entry(entry: Any) -> tuple[str, bytes]:
    if not isinstance(entry, dict):
        raise KeyringError("each keyring key must be an object")
    key_id, encoded = entry.get("id"), entry.get("key")
    if not isinstance(key_id, str) or not key_id:
        raise KeyringError("each keyring key needs a non-empty id")
    if not isinstance(encoded, str):
        raise KeyringError(f"keyring key {key_id!r} has no base64 key")
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise KeyringError(f"keyring key {key_id!r} is not valid base64") from None
    if len(key) != KEY_BYTES:
        raise KeyringError(f"keyring key {key_id!r} must decode to {KEY_BYTES} bytes")
    return key_id, key


def new_keyring_document(key_id: str) -> dict[str, Any]:
    """A keyring document with one freshly generated active key."""
    key = base64.b64encode(AESGCM.generate_key(bit_length=KEY_BYTES * 8)).decode("ascii")
    return {"activeKeyId": key_id, "keys": [{"id": key_id, "key": key}]}


def configured_keyring_path(settings: SecuritySettings) -> str | None:
    """The keyring file from settings, else from $WORKFLOW_LONG_KEYRING_FILE."""
    return settings.keyring_file or os.environ.get(KEYRING_ENV) or None


def load_configured_keyring(settings: SecuritySettings) -> Keyring:
    """The configured keyring; empty when none is configured or the file does not exist yet.

    An absent keyring is not a startup failure: invoke admission refuses instead. A file that
    exists but is invalid raises KeyringError so a broken secret is noticed at once.
    """
    path = configured_keyring_path(settings)
    if path is None or not Path(path).exists():
        return Keyring.empty()
    return Keyring.load(path)
