"""Workflow's own destination policy for resolved endpoint targets (the owner may refuse one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from runtime.publication.bindings.errors import BindingRuleViolation
from runtime.publication.bindings.reach import EndpointTarget

_DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True, slots=True)
class DestinationPolicy:
    """Allowed schemes, hosts and ports of endpoint targets.

    allowed_hosts None accepts any host; an entry "*.example.com" accepts subdomains only.
    allowed_ports None accepts any port; the scheme's default port applies when none is given.
    """

    allowed_schemes: frozenset[str] = field(default_factory=lambda: frozenset({"https"}))
    allowed_hosts: frozenset[str] | None = None
    allowed_ports: frozenset[int] | None = None

    def host_allowed(self, host: str) -> bool:
        """True when host matches an allowed host exactly or a "*." suffix pattern."""
        if self.allowed_hosts is None:
            return True
        host = host.lower().rstrip(".")
        for allowed in self.allowed_hosts:
            pattern = allowed.lower()
            if pattern.startswith("*.") and host.endswith(pattern[1:]) and host != pattern[2:]:
                return True
            if host == pattern:
                return True
        return False


def check_destination(target: EndpointTarget, policy: DestinationPolicy) -> None:
    """Refuse a target whose scheme, host or port the policy does not allow."""
    parts = urlsplit(target.endpoint_uri)
    scheme = parts.scheme.lower()
    if scheme not in policy.allowed_schemes:
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: scheme {scheme} is not allowed",
            code="WORKFLOW_POLICY_DENIED",
        )
    if not policy.host_allowed(parts.hostname or ""):
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: host is not allowed by the destination policy",
            code="WORKFLOW_POLICY_DENIED",
        )
    port = parts.port or _DEFAULT_PORTS.get(scheme)
    if policy.allowed_ports is not None and port not in policy.allowed_ports:
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: port {port} is not allowed",
            code="WORKFLOW_POLICY_DENIED",
        )


def check_destinations(targets: tuple[EndpointTarget, ...], policy: DestinationPolicy) -> None:
    """Check every endpoint target against the destination policy."""
    for target in targets:
        check_destination(target, policy)
