"""Identity settings: trusted keys, issuers, audiences, caller services, role lists."""

from __future__ import annotations

import msgspec


class SecuritySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How bearers are verified and which callers are accepted (extended by runtime/security)."""

    allowed_caller_service_ids: list[str] = msgspec.field(default_factory=lambda: ["gateway"])
