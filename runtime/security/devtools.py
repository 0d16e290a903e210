"""Development identity: a local signing key, its JWKS, a keyring, and minted tokens.

Usage: ``python -m runtime.security.devtools init --dir .data/dev`` then
``python -m runtime.security.devtools mint --dir .data/dev --kind user``. Never for production.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from runtime.security.dev_client_credentials import DEV_SERVICE_CLIENT_ID, DevClientCredentials
from runtime.security.dev_token_exchange import DevTokenExchange
from runtime.security.keyring import Keyring, new_keyring_document
from runtime.security.keys import jwk_thumbprint, public_jwk
from runtime.security.settings import SecuritySettings, TokenTrust

DEV_HOST_ID = "7d1a6c2e-3b4f-4e8a-9c1d-2f5e6a7b8c9d"
DEV_ISSUER = "https://dev.workflow.local"
DEV_AUDIENCE = "workflow-mcp"
DEV_USER_ID = "dev-user"
DEV_USER_CLIENT_ID = "dev-portal"
DEV_SERVICE_ID = "gateway"
DEV_KEYRING_KEY_ID = "dev-1"

SIGNING_KEY_FILE = "signing-key.pem"
PUBLIC_KEY_FILE = "public-key.pem"
JWKS_FILE = "jwks.json"
KEYRING_FILE = "keyring.json"
EXCHANGE_SECRET_FILE = "token-exchange-secret"
SERVICE_SECRET_FILE = "service-client-secret"

SigningKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True)
class DevPaths:
    """Where the development identity files live."""

    directory: Path
    signing_key: Path
    public_key: Path
    jwks: Path
    keyring: Path

    @classmethod
    def under(cls, directory: str | os.PathLike[str]) -> DevPaths:
        """The file layout under directory."""
        root = Path(directory)
        return cls(
            directory=root,
            signing_key=root / SIGNING_KEY_FILE,
            public_key=root / PUBLIC_KEY_FILE,
            jwks=root / JWKS_FILE,
            keyring=root / KEYRING_FILE,
        )


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the first byte: no window in which another user could read it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _write_if_changed(path: Path, data: bytes) -> None:
    # Rewriting identical content would race with a concurrent reader for nothing.
    if path.exists() and path.read_bytes() == data:
        return
    partial = path.with_name(path.name + ".tmp")
    partial.write_bytes(data)
    partial.replace(path)


def _generate_key(algorithm: str) -> SigningKey:
    if algorithm == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"development keys support RS256 or ES256, not {algorithm!r}")


def _load_or_create_key(paths: DevPaths, algorithm: str) -> SigningKey:
    if not paths.signing_key.exists():
        key = _generate_key(algorithm)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_private(paths.signing_key, pem)
        return key
    loaded = serialization.load_pem_private_key(paths.signing_key.read_bytes(), password=None)
    if not isinstance(loaded, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError(f"{paths.signing_key} is not an RSA or EC private key")
    return loaded


def key_algorithm(key: SigningKey) -> str:
    """The signing algorithm used with a development key."""
    return "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"


def init_dev_dir(directory: str | os.PathLike[str], algorithm: str = "ES256") -> DevPaths:
    """Create (or keep) the dev key pair, JWKS, public PEM and keyring under directory."""
    paths = DevPaths.under(directory)
    paths.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = _load_or_create_key(paths, algorithm)
    public = key.public_key()
    jwk = {**public_jwk(public), "kid": jwk_thumbprint(public), "use": "sig"}
    jwk["alg"] = key_algorithm(key)
    _write_if_changed(paths.jwks, (json.dumps({"keys": [jwk]}, indent=2) + "\n").encode())
    _write_if_changed(
        paths.public_key,
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    if not paths.keyring.exists():
        document = new_keyring_document(DEV_KEYRING_KEY_ID)
        _write_private(paths.keyring, json.dumps(document, indent=2).encode("utf-8"))
    return paths


def _times(
    ttl: int, expired: bool, expires_at: int | None, not_before: int | None
) -> dict[str, int]:
    now = int(time.time())
    issued = now - ttl - 7200 if expired else now
    times = {"iat": issued, "exp": expires_at if expires_at is not None else issued + ttl}
    if not_before is not None:
        times["nbf"] = not_before
    return times


class DevIdentity:
    """Signs development tokens with the key under directory (created on first use)."""

    def __init__(self, directory: str | os.PathLike[str], algorithm: str = "ES256") -> None:
        self.paths = init_dev_dir(directory, algorithm)
        self._key = _load_or_create_key(self.paths, algorithm)
        self.algorithm = key_algorithm(self._key)
        self.kid = jwk_thumbprint(self._key.public_key())

    def sign(self, claims: dict[str, Any], *, headers: dict[str, Any] | None = None) -> str:
        """Sign arbitrary claims with the dev key; a header set to None is left out."""
        merged = {"kid": self.kid, **(headers or {})}
        header = {name: value for name, value in merged.items() if value is not None}
        algorithm = header.pop("alg", self.algorithm)
        return jwt.encode(claims, self._key, algorithm=algorithm, headers=header)

    def user_token(
        self,
        *,
        host_id: str | None = DEV_HOST_ID,
        user_id: str = DEV_USER_ID,
        roles: Iterable[str] = ("admin",),
        positions: Iterable[str] = (),
        roles_as_string: bool = False,
        client_id: str | None = DEV_USER_CLIENT_ID,
        ttl: int = 3600,
        expired: bool = False,
        expires_at: int | None = None,
        not_before: int | None = None,
        issuer: str = DEV_ISSUER,
        audience: str = DEV_AUDIENCE,
        extra_claims: dict[str, Any] | None = None,
    ) -> str:
        """A signed user token (resource-owner subject, host, roles, positions)."""
        role_list = list(roles)
        claims: dict[str, Any] = {
            "iss": issuer,
            "aud": audience,
            "sub": user_id,
            "uid": user_id,
            "roles": " ".join(role_list) if roles_as_string else role_list,
            "positions": list(positions),
            "jti": str(uuid.uuid4()),
            **_times(ttl, expired, expires_at, not_before),
        }
        if host_id is not None:
            claims["host"] = host_id
        if client_id is not None:
            claims["client_id"] = client_id
        claims.update(extra_claims or {})
        return self.sign(claims)

    def app_token(
        self,
        *,
        service_id: str = DEV_SERVICE_ID,
        client_id: str | None = None,
        host_id: str | None = DEV_HOST_ID,
        environment: str | None = None,
        ttl: int = 3600,
        expired: bool = False,
        expires_at: int | None = None,
        not_before: int | None = None,
        issuer: str = DEV_ISSUER,
        audience: str = DEV_AUDIENCE,
        extra_claims: dict[str, Any] | None = None,
    ) -> str:
        """A signed RFC 9068 application token (typ at+jwt, sub equals client_id)."""
        client = client_id or service_id
        claims: dict[str, Any] = {
            "iss": issuer,
            "aud": audience,
            "sub": client,
            "client_id": client,
            "sid": service_id,
            "jti": str(uuid.uuid4()),
            **_times(ttl, expired, expires_at, not_before),
        }
        if host_id is not None:
            claims["host"] = host_id
        if environment is not None:
            claims["env"] = environment
        claims.update(extra_claims or {})
        return self.sign(claims, headers={"typ": "at+jwt"})

    def settings(self, **overrides: Any) -> SecuritySettings:
        """SecuritySettings that trust the dev keys, issuer, audience and keyring."""
        values: dict[str, Any] = {
            "jwks_file": str(self.paths.jwks),
            "user_token": TokenTrust(issuers=[DEV_ISSUER], audiences=[DEV_AUDIENCE]),
            "app_token": TokenTrust(issuers=[DEV_ISSUER], audiences=[DEV_AUDIENCE]),
            "allowed_caller_service_ids": [DEV_SERVICE_ID],
            "keyring_file": str(self.paths.keyring),
        }
        values.update(overrides)
        return SecuritySettings(**values)

    def keyring(self) -> Keyring:
        """The dev keyring."""
        return Keyring.load(self.paths.keyring)

    def exchange_secret(self) -> str:
        """The client secret of the local token exchange endpoint (created on first use)."""
        return self._secret(EXCHANGE_SECRET_FILE).read_text("ascii").strip()

    def service_secret_file(self) -> Path:
        """The file holding the client secret of Workflow's own client (created on first use)."""
        return self._secret(SERVICE_SECRET_FILE)

    def _secret(self, name: str) -> Path:
        path = self.paths.directory / name
        if not path.exists():
            # Another process of the same checkout may have created it first.
            with contextlib.suppress(FileExistsError):
                _write_private(path, secrets.token_urlsafe(32).encode("ascii"))
        return path

    def token_exchange(self, client_secret: str, *, ttl: int = 3600) -> DevTokenExchange:
        """A local RFC 8693 endpoint (ASGI) that exchanges this identity's user tokens."""
        return DevTokenExchange(
            sign=self.sign, security=self.settings(), client_secret=client_secret, ttl=ttl
        )

    def client_credentials(
        self, client_secret: str, *, ttl: int = 3600, client_id: str = DEV_SERVICE_CLIENT_ID
    ) -> DevClientCredentials:
        """A local client-credentials endpoint (ASGI) issuing Workflow's application tokens."""

        def mint(scope: str | None) -> str:
            extra: dict[str, Any] = {"gty": "client-credentials"}
            if scope is not None:
                extra["scope"] = scope
            # A service-wide token: no host claim, the client is its own service.
            return self.app_token(service_id=client_id, host_id=None, ttl=ttl, extra_claims=extra)

        return DevClientCredentials(
            mint=mint, client_secret=client_secret, client_id=client_id, ttl=ttl
        )


def _split(value: str | None) -> list[str]:
    return [item for item in (value or "").split(",") if item]


def _extra_claims(pairs: Sequence[str]) -> dict[str, Any]:
    claims: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--claim expects NAME=VALUE, got {pair!r}")
        try:
            claims[name] = json.loads(raw)
        except ValueError:
            claims[name] = raw
    return claims


def _parser(mint_prog: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runtime.security.devtools")
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="create the dev key pair, JWKS and keyring")
    init.add_argument("--dir", default=".data/dev")
    init.add_argument("--alg", choices=["ES256", "RS256"], default="ES256")
    mint = commands.add_parser(
        "mint",
        help="print one signed dev token",
        prog=mint_prog or f"{parser.prog} mint",
    )
    mint.add_argument("--dir", default=".data/dev")
    mint.add_argument("--kind", choices=["user", "app"], required=True)
    mint.add_argument("--host", default=DEV_HOST_ID)
    mint.add_argument("--no-host", action="store_true", help="omit the host claim")
    mint.add_argument("--user-id", default=DEV_USER_ID)
    mint.add_argument("--roles", default="admin", help="comma-separated")
    mint.add_argument("--positions", default="", help="comma-separated")
    mint.add_argument("--service", default=DEV_SERVICE_ID)
    mint.add_argument("--client-id", default=None)
    mint.add_argument("--env", default=None)
    mint.add_argument("--ttl", type=int, default=3600)
    mint.add_argument("--expired", action="store_true")
    mint.add_argument("--issuer", default=DEV_ISSUER)
    mint.add_argument("--audience", default=DEV_AUDIENCE)
    mint.add_argument("--claim", action="append", default=[], help="NAME=VALUE (JSON or text)")
    return parser


def _mint(args: argparse.Namespace) -> str:
    identity = DevIdentity(args.dir)
    host = None if args.no_host else args.host
    extra = _extra_claims(args.claim)
    if args.kind == "user":
        return identity.user_token(
            host_id=host,
            user_id=args.user_id,
            roles=_split(args.roles),
            positions=_split(args.positions),
            client_id=args.client_id or DEV_USER_CLIENT_ID,
            ttl=args.ttl,
            expired=args.expired,
            issuer=args.issuer,
            audience=args.audience,
            extra_claims=extra,
        )
    return identity.app_token(
        service_id=args.service,
        client_id=args.client_id,
        host_id=host,
        environment=args.env,
        ttl=args.ttl,
        expired=args.expired,
        issuer=args.issuer,
        audience=args.audience,
        extra_claims=extra,
    )


def main(argv: Sequence[str] | None = None, mint_prog: str | None = None) -> int:
    """Run the devtools CLI; mint_prog names the mint command in its help and usage lines."""
    args = _parser(mint_prog).parse_args(argv)
    if args.command == "init":
        paths = init_dev_dir(args.dir, args.alg)
        print(f"jwks: {paths.jwks}")
        print(f"public key: {paths.public_key}")
        print(f"keyring: {paths.keyring}")
        print(f"dev host id: {DEV_HOST_ID}")
        return 0
    sys.stdout.write(_mint(args) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
