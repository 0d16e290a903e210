"""Identity: both bearers, the invocation context, role checks, the sealing keyring."""

from __future__ import annotations

from runtime.security.authenticator import Authenticator, bearer_token, normalize_host_id
from runtime.security.context import InvocationContext, SecretToken
from runtime.security.keyring import (
    Keyring,
    KeyringError,
    SealedSecret,
    configured_keyring_path,
    load_configured_keyring,
)
from runtime.security.keys import KeySet, KeySetError, TrustedKey
from runtime.security.policy import authorize_roles, check_host_assertion, is_position_holder
from runtime.security.settings import (
    DEFAULT_TOOL_ROLES,
    ClaimNames,
    RunCredentialSettings,
    SecuritySettings,
    TokenExchangeSettings,
    TokenTrust,
)
from runtime.security.verify import TokenKind, TokenVerifier, is_application_token

__all__ = [
    "DEFAULT_TOOL_ROLES",
    "Authenticator",
    "ClaimNames",
    "InvocationContext",
    "KeySet",
    "KeySetError",
    "Keyring",
    "KeyringError",
    "RunCredentialSettings",
    "SealedSecret",
    "SecretToken",
    "SecuritySettings",
    "TokenExchangeSettings",
    "TokenKind",
    "TokenTrust",
    "TokenVerifier",
    "TrustedKey",
    "authorize_roles",
    "bearer_token",
    "check_host_assertion",
    "configured_keyring_path",
    "is_application_token",
    "is_position_holder",
    "load_configured_keyring",
    "normalize_host_id",
]
