"""Settings of publication: the destination policy for endpoint targets, receipt retention,
definition size limits."""

from __future__ import annotations

import ipaddress

import msgspec

from runtime.addresses import AddressPolicy
from runtime.publication.definition_limits import DefinitionLimits


class DestinationSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Workflow's own policy for endpoint targets a binding may reach (None: any)."""

    allowed_schemes: list[str] = msgspec.field(default_factory=lambda: ["https"])
    allowed_hosts: list[str] | None = None
    allowed_ports: list[int] | None = None
    # Internal networks (CIDR) endpoint targets and outbound connections may reach; all other
    # loopback, private, link-local, CGNAT, multicast and unspecified addresses are refused.
    allowed_networks: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        for cidr in self.allowed_networks:
            try:
                ipaddress.ip_network(cidr.strip(), strict=False)
            except ValueError:
                raise ValueError(f"allowed_networks: {cidr!r} is not a CIDR network") from None

    def address_policy(self) -> AddressPolicy:
        """The internal networks allowed, for publication and for every outbound connection."""
        return AddressPolicy.from_cidrs(self.allowed_networks)


class PublicationSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """publication: the destination policy, the receipt retention sweep, definition limits."""

    destinations: DestinationSettings = msgspec.field(default_factory=DestinationSettings)
    receipt_sweep_interval_s: float = 3600.0
    limits: DefinitionLimits = msgspec.field(default_factory=DefinitionLimits)
