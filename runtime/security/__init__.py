"""Identity: both bearers, the invocation context, role checks, the sealing keyring."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runtime.security.authenticator import (
    Authenticator,
    bearer_token,
    claim_set,
    normalize_host_id,
)
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

if TYPE_CHECKING:
    from runtime.security.devtools import DEV_HOST_ID, DevIdentity

# The development identity is imported on first use, so that `python -m runtime.security.devtools`
# does not import its own module a second time through this package.
_LAZY = {"DEV_HOST_ID": "runtime.security.devtools", "DevIdentity": "runtime.security.devtools"}

__all__ = [
    "DEFAULT_TOOL_ROLES",
    "DEV_HOST_ID",
    "Authenticator",
    "ClaimNames",
    "DevIdentity",
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
    "claim_set",
    "configured_keyring_path",
    "is_application_token",
    "is_position_holder",
    "load_configured_keyring",
    "normalize_host_id",
]


def __getattr__(name: str) -> Any:
    """Import the development identity's names on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime.security' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
