"""Trusted verification keys: a JWKS document and/or PEM public keys, selected by kid."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from runtime.security.settings import SecuritySettings

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey

_RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


class KeySetError(ValueError):
    """A configured key source cannot be read or holds an unusable key."""


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """One public key, the algorithms it may verify, and its key id."""

    kid: str | None
    key: PublicKey
    algorithms: frozenset[str]


def algorithms_for(key: PublicKey) -> frozenset[str]:
    """The signing algorithms a key of this type and curve can verify."""
    if isinstance(key, rsa.RSAPublicKey):
        return _RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePublicKey):
        alg = _EC_ALGORITHMS.get(key.curve.name)
        return frozenset({alg}) if alg else frozenset()
    return frozenset({"EdDSA"})


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def public_jwk(key: PublicKey) -> dict[str, Any]:
    """The public JWK members of a key (without kid, use or alg)."""
    if isinstance(key, rsa.RSAPublicKey):
        return dict(RSAAlgorithm.to_jwk(key, as_dict=True))
    if isinstance(key, ec.EllipticCurvePublicKey):
        return dict(ECAlgorithm.to_jwk(key, as_dict=True))
    return dict(OKPAlgorithm.to_jwk(key, as_dict=True))


def jwk_thumbprint(key: PublicKey) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public key, used as its key id."""
    jwk = public_jwk(key)
    required = {
        "RSA": ("e", "kty", "n"),
        "EC": ("crv", "kty", "x", "y"),
        "OKP": ("crv", "kty", "x"),
    }
    members = {name: jwk[name] for name in required[jwk["kty"]]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return _b64url(hashlib.sha256(canonical).digest())


def _as_public(key: object) -> PublicKey:
    public = key.public_key() if hasattr(key, "public_key") else key
    if isinstance(public, rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey):
        return public
    raise KeySetError("unsupported key type; use RSA, EC (P-256/384/521) or Ed25519")


def _read_jwk(entry: dict[str, Any]) -> object:
    if entry["kty"] == "RSA":
        return RSAAlgorithm.from_jwk(entry)
    if entry["kty"] == "EC":
        return ECAlgorithm.from_jwk(entry)
    return OKPAlgorithm.from_jwk(entry)


def _key_from_jwk(entry: Mapping[str, Any]) -> TrustedKey | None:
    kty = entry.get("kty")
    if entry.get("use", "sig") != "sig":
        return None  # encryption keys never verify signatures
    if kty not in ("RSA", "EC", "OKP"):
        # Symmetric ("oct") keys are refused: a shared secret is not a trust anchor here.
        raise KeySetError(f"JWKS key type {kty!r} is not supported")
    try:
        key = _as_public(_read_jwk(dict(entry)))
    except KeySetError:
        raise
    except Exception:
        raise KeySetError("JWKS holds a key that cannot be read") from None
    algorithms = algorithms_for(key)
    declared = entry.get("alg")
    if declared is not None:
        if declared not in algorithms:
            raise KeySetError(f"JWKS key declares algorithm {declared!r} its key cannot verify")
        algorithms = frozenset({declared})
    kid = entry.get("kid")
    return TrustedKey(kid=kid if isinstance(kid, str) else None, key=key, algorithms=algorithms)


class KeySet:
    """The keys trusted to sign bearers; empty means every token is refused."""

    def __init__(self, keys: Iterable[TrustedKey] = ()) -> None:
        self._keys = tuple(keys)
        kids = [key.kid for key in self._keys if key.kid is not None]
        if len(kids) != len(set(kids)):
            raise KeySetError("two trusted keys share a key id")

    @classmethod
    def from_jwks(cls, document: Mapping[str, Any]) -> KeySet:
        """Keys from a parsed JWKS document ({"keys": [...]})."""
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise KeySetError("JWKS document has no keys list")
        keys = [_key_from_jwk(entry) for entry in entries if isinstance(entry, Mapping)]
        return cls(key for key in keys if key is not None)

    @classmethod
    def from_pem(cls, pem: bytes) -> KeySet:
        """One key from PEM public key text; its kid is its RFC 7638 thumbprint."""
        try:
            key = _as_public(load_pem_public_key(pem))
        except KeySetError:
            raise
        except Exception:
            raise KeySetError("PEM public key cannot be read") from None
        return cls([TrustedKey(kid=jwk_thumbprint(key), key=key, algorithms=algorithms_for(key))])

    @classmethod
    def from_settings(cls, settings: SecuritySettings) -> KeySet:
        """Load the JWKS file and PEM files named in settings; unreadable files raise."""
        keys: list[TrustedKey] = []
        if settings.jwks_file:
            keys.extend(cls.from_jwks(_read_json(Path(settings.jwks_file))).keys)
        for pem_file in settings.public_key_files:
            keys.extend(cls.from_pem(_read_bytes(Path(pem_file))).keys)
        return cls(keys)

    @property
    def keys(self) -> tuple[TrustedKey, ...]:
        """Every trusted key."""
        return self._keys

    def candidates(self, algorithm: str, kid: str | None) -> list[TrustedKey]:
        """Keys that may verify a token with this alg and kid (by kid when one is given)."""
        usable = [key for key in self._keys if algorithm in key.algorithms]
        if kid is not None:
            return [key for key in usable if key.kid == kid]
        return usable

    def __len__(self) -> int:
        return len(self._keys)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        raise KeySetError(f"trusted key file {str(path)!r} cannot be read") from None


def _read_json(path: Path) -> Mapping[str, Any]:
    try:
        document = json.loads(_read_bytes(path))
    except ValueError:
        raise KeySetError(f"JWKS file {str(path)!r} is not JSON") from None
    if not isinstance(document, Mapping):
        raise KeySetError(f"JWKS file {str(path)!r} is not a JSON object")
    return document
