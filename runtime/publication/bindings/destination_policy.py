"""Workflow's own destination policy for resolved endpoint targets (the owner may refuse one).

Internal address space (loopback, private, link-local, CGNAT, multicast, ...) is refused in
every spelling of an address and for every address a target's name resolves to at publication,
unless the operator allows the network (``publication.destinations.allowed_networks``). The
names are resolved before the publish transaction; a name that does not resolve then is not
refused here, because execution checks every connection again (``runtime.addresses``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from runtime.addresses import (
    AddressPolicy,
    DestinationRefused,
    IPAddress,
    Resolver,
    is_literal,
)
from runtime.binding_reach import EndpointTarget
from runtime.publication.bindings.binding_problems import BindingProblem
from runtime.publication.bindings.rejections import BindingRuleViolation

if TYPE_CHECKING:
    from runtime.publication.publication_settings import DestinationSettings

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
    # Internal networks the operator allows; everything else internal is refused.
    addresses: AddressPolicy = field(default_factory=AddressPolicy)
    # Resolves target names at publication (None: names are checked only at connect time).
    resolver: Resolver | None = None
    # The addresses each target name resolved to before the transaction (see resolve_names).
    resolved: Mapping[str, tuple[IPAddress, ...]] = field(default_factory=dict)

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


def policy_from_settings(
    settings: DestinationSettings, resolver: Resolver | None = None
) -> DestinationPolicy:
    """The policy publication.destinations configures (resolver None: no DNS lookups)."""
    return DestinationPolicy(
        allowed_schemes=frozenset(scheme.lower() for scheme in settings.allowed_schemes),
        allowed_hosts=None if settings.allowed_hosts is None else frozenset(settings.allowed_hosts),
        allowed_ports=None if settings.allowed_ports is None else frozenset(settings.allowed_ports),
        addresses=settings.address_policy(),
        resolver=resolver,
    )


def unresolved_names(targets: Iterable[EndpointTarget]) -> list[str]:
    """The target hosts that are names (not address literals): checked by DNS only online."""
    return sorted({_name(target.endpoint_uri) for target in targets} - {""})


def check_destination(target: EndpointTarget, policy: DestinationPolicy) -> None:
    """Refuse a target whose scheme, host or port the policy does not allow."""
    parts = urlsplit(target.endpoint_uri)
    scheme = parts.scheme.lower()
    if scheme not in policy.allowed_schemes:
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: scheme {scheme} is not allowed"
            " by the destination policy"
            " (allowed by publication.destinations.allowed_schemes)",
            code="WORKFLOW_POLICY_DENIED",
        )
    if not policy.host_allowed(parts.hostname or ""):
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: host is not allowed by the destination policy"
            " (allowed by publication.destinations.allowed_hosts)",
            code="WORKFLOW_POLICY_DENIED",
        )
    _check_addresses(target, parts.hostname or "", policy)
    port = parts.port or _DEFAULT_PORTS.get(scheme)
    if policy.allowed_ports is not None and port not in policy.allowed_ports:
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: port {port} is not allowed"
            " by the destination policy"
            " (allowed by publication.destinations.allowed_ports)",
            code="WORKFLOW_POLICY_DENIED",
        )


def destination_problems(
    targets: Iterable[tuple[int, EndpointTarget]], policy: DestinationPolicy
) -> list[BindingProblem]:
    """Each target (with its index in the request) the destination policy refuses."""
    found = []
    for index, target in targets:
        try:
            check_destination(target, policy)
        except BindingRuleViolation as refused:
            pointer = f"/endpointTargets/{index}/endpointUri"
            found.append(BindingProblem(pointer, "destination", refused.message, policy=True))
    return found


def _check_addresses(target: EndpointTarget, host: str, policy: DestinationPolicy) -> None:
    """Refuse a host that spells, or whose name resolved to, internal address space."""
    try:
        policy.addresses.check_literal(host)
        policy.addresses.check_all(policy.resolved.get(host.lower().rstrip("."), ()))
    except DestinationRefused as refused:
        raise BindingRuleViolation(
            f"endpoint target {target.endpoint_ref}: {refused.reason}; an operator may allow "
            "the network in publication.destinations.allowed_networks",
            code="WORKFLOW_POLICY_DENIED",
        ) from None


async def resolve_names(policy: DestinationPolicy, uris: Iterable[str]) -> DestinationPolicy:
    """The policy with the addresses of every target name (DNS outside any transaction)."""
    if policy.resolver is None:
        return policy
    names = sorted({_name(uri) for uri in uris} - {""})
    found = await asyncio.gather(*(_resolve(policy.resolver, name) for name in names))
    resolved = {name: addresses for name, addresses in zip(names, found, strict=True) if addresses}
    return dataclasses.replace(policy, resolved=resolved)


def _name(uri: str) -> str:
    """The host of uri when it is a name to resolve ("" for literals and unparsable URIs)."""
    try:
        host = (urlsplit(uri).hostname or "").rstrip(".")
    except ValueError:
        return ""
    return "" if is_literal(host) else host


async def _resolve(resolver: Resolver, name: str) -> tuple[IPAddress, ...]:
    try:
        return tuple(await resolver.resolve(name, 0))
    except (OSError, TimeoutError):
        return ()
