"""What the binding handlers share: Workflow's destination policy from settings."""

from __future__ import annotations

from runtime.mcp.call import ToolCall
from runtime.publication.bindings import DestinationPolicy


def destination_policy(call: ToolCall) -> DestinationPolicy:
    """The configured policy for endpoint targets."""
    settings = call.services.settings.publication.destinations
    return DestinationPolicy(
        allowed_schemes=frozenset(scheme.lower() for scheme in settings.allowed_schemes),
        allowed_hosts=None if settings.allowed_hosts is None else frozenset(settings.allowed_hosts),
        allowed_ports=None if settings.allowed_ports is None else frozenset(settings.allowed_ports),
        addresses=settings.address_policy(),
        resolver=call.services.resolver,
    )
