"""Settings of publication: the destination policy for endpoint targets, receipt retention."""

from __future__ import annotations

import msgspec

from runtime.publication.limits import DefinitionLimits


class DestinationSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Workflow's own policy for endpoint targets a binding may reach (None: any)."""

    allowed_schemes: list[str] = msgspec.field(default_factory=lambda: ["https"])
    allowed_hosts: list[str] | None = None
    allowed_ports: list[int] | None = None


class PublicationSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Binding publication: the destination policy and the receipt retention sweep."""

    destinations: DestinationSettings = msgspec.field(default_factory=DestinationSettings)
    receipt_sweep_interval_s: float = 3600.0
    limits: DefinitionLimits = msgspec.field(default_factory=DefinitionLimits)
