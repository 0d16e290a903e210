"""The verified identity of one call, and a wrapper that keeps the user token out of logs."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime


class SecretToken:
    """A bearer token whose repr and str never show its value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The token text: only for the sealer and for outbound calls made for the user."""
        return self._value

    def __repr__(self) -> str:
        return "SecretToken(<redacted>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretToken):
            return NotImplemented
        return hmac.compare_digest(self._value.encode("utf-8"), other._value.encode("utf-8"))

    def __hash__(self) -> int:
        return hash(("SecretToken", self._value))

    def __copy__(self) -> SecretToken:
        return self  # immutable: copies inside the process are harmless

    def __deepcopy__(self, memo: dict[int, object]) -> SecretToken:
        return self

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling would copy the token into caches or queues unnoticed.
        raise TypeError("SecretToken cannot be pickled")


@dataclass(frozen=True, slots=True)
class InvocationContext:
    """Who is calling: taken only from the two verified bearers, never from arguments."""

    host_id: str  # lower-case UUID from the verified user token
    user_id: str  # the user id claim, else the subject
    subject: str  # the user token's "sub"
    roles: frozenset[str]
    positions: frozenset[str]
    caller_service_id: str  # from the verified application (scope) token
    client_id: str  # the application token's OAuth client id
    user_token: SecretToken
    user_token_expires_at: datetime  # timezone-aware UTC, from the user token's "exp"
    user_client_id: str | None = None  # the client the user signed in through, if stated

    def has_any_role(self, roles: frozenset[str] | set[str] | list[str]) -> bool:
        """True when the user holds at least one of roles."""
        return not self.roles.isdisjoint(roles)
