"""Outbound address policy: which IP addresses a workflow may connect to (default: public only).

Publication checks endpoint targets with it and execution checks every connection with it, so
it sits on the lowest layer. A host is checked in every spelling the OS resolver accepts: the
inet_aton forms of IPv4 (decimal ``2130706433``, hex ``0x7f000001``, octal ``0177.0.0.1``,
short ``127.1``), bracketed IPv6 with or without a zone, and the IPv4-mapped, -compatible,
NAT64, 6to4 and Teredo forms that carry an IPv4 address inside an IPv6 one. A name is checked by
every address it resolves to; ``localhost`` names are loopback without asking DNS (RFC 6761).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import unquote

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Why each range is internal; the first match names the refusal. Not globally reachable or
# not a unicast destination at all (RFC 6890 and its successors).
_INTERNAL_V4: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "documentation"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_INTERNAL_V6: tuple[tuple[str, str], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    # IPv4-compatible addresses (deprecated, never routed) other than the two above.
    ("::/96", "IPv4-compatible"),
    ("64:ff9b:1::/48", "private"),
    ("100::/64", "reserved"),
    ("2001:db8::/32", "documentation"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_V4_RANGES = tuple((ipaddress.IPv4Network(net), why) for net, why in _INTERNAL_V4)
_V6_RANGES = tuple((ipaddress.IPv6Network(net), why) for net, why in _INTERNAL_V6)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")

# What `make run` and the test suites allow: local backends on the loopback interface.
LOOPBACK_NETWORKS = ("127.0.0.0/8", "::1/128")


class DestinationRefused(Exception):
    """A destination host is (or resolves to) internal address space that is not allowed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _v4_part(text: str) -> int | None:
    """One dotted part as inet_aton reads it: 0x hex, leading-zero octal, else decimal."""
    lowered = text.lower()
    try:
        if lowered.startswith("0x"):
            return int(lowered[2:] or "0", 16)
        if len(lowered) > 1 and lowered.startswith("0"):
            return int(lowered[1:], 8)
        return int(lowered, 10) if lowered.isdigit() else None
    except ValueError:
        return None


def _ipv4_spelling(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address of an inet_aton spelling (1 to 4 parts, last part fills the rest)."""
    parts = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if not 1 <= len(parts) <= 4 or any(not part for part in parts):
        return None
    values = [_v4_part(part) for part in parts]
    if any(value is None for value in values):
        return None
    numbers = [value for value in values if value is not None]
    *leading, last = numbers
    if any(value > 0xFF for value in leading) or last >= 1 << (8 * (5 - len(numbers))):
        return None
    total = last
    for index, value in enumerate(leading):
        total |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(total)


def _host_text(host: str) -> str:
    """The host as a URL parser reads it: percent-decoded, NFKC, ideographic dots as dots."""
    text = unicodedata.normalize("NFKC", unquote(host)).replace("\u3002", ".")
    return text.strip().lower()


def parse_ip_literal(host: str) -> IPAddress | None:
    """The IP address a host spells (any IPv4 or bracketed/zoned IPv6 form), else None."""
    text = _host_text(host)
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    return _ipv4_spelling(text)


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo client), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def internal_reason(address: IPAddress) -> str | None:
    """Why an address is internal (loopback, private, link-local, ...), or None when public."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(int(address))  # the zone does not change the range
    ranges = _V4_RANGES if isinstance(address, ipaddress.IPv4Address) else _V6_RANGES
    for network, why in ranges:
        if address in network:
            return why
    inner = embedded_ipv4(address)
    if inner is not None:
        reason = internal_reason(inner)
        return None if reason is None else f"{reason} (IPv4 inside IPv6)"
    return None


def is_loopback_name(host: str) -> bool:
    """localhost and every name under .localhost are loopback by definition (RFC 6761)."""
    name = _host_text(host).rstrip(".")
    return name in _LOOPBACK_NAMES or name.endswith(".localhost")


def is_literal(host: str) -> bool:
    """Whether host names its address itself (an IP spelling or a localhost name)."""
    return is_loopback_name(host) or parse_ip_literal(host) is not None


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Public addresses are allowed; internal ones only inside an explicitly allowed network."""

    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str]) -> AddressPolicy:
        """A policy allowing these CIDR networks (ValueError on a malformed one)."""
        return cls(tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs))

    def _allowed(self, address: IPAddress) -> bool:
        candidates: list[IPAddress] = [address]
        inner = embedded_ipv4(address)
        if inner is not None:
            candidates.append(inner)
        return any(
            candidate.version == network.version and candidate in network
            for candidate in candidates
            for network in self.allowed_networks
        )

    def refusal(self, address: IPAddress) -> str | None:
        """Which internal space refuses address (e.g. "loopback"), or None when reachable."""
        reason = internal_reason(address)
        if reason is None or self._allowed(address):
            return None
        return reason

    def check_literal(self, host: str) -> IPAddress | None:
        """Refuse a host spelling an internal address or a localhost name; its IP, if literal."""
        address = _LOOPBACK if is_loopback_name(host) else parse_ip_literal(host)
        refused = None if address is None else self.refusal(address)
        if refused is not None:
            raise DestinationRefused(f"the destination is in internal address space ({refused})")
        return address

    def check_all(self, addresses: Sequence[IPAddress]) -> None:
        """Refuse when any of a name's addresses is refused (a name is as unsafe as its worst)."""
        for address in addresses:
            refused = self.refusal(address)
            if refused is not None:
                raise DestinationRefused(
                    f"the destination name resolves to internal address space ({refused})"
                )


class Resolver(Protocol):
    """Turns a host name into its addresses (tests drive one; production asks the OS)."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address of host (empty or OSError when the name does not resolve)."""
        ...


@dataclass(frozen=True, slots=True)
class SystemResolver:
    """The operating system's resolver (getaddrinfo on a thread), bounded in time."""

    timeout_s: float = 5.0

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every distinct address getaddrinfo gives for host, in its order."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.timeout_s):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]))
            if address not in found:
                found.append(address)
        return found


@dataclass(frozen=True, slots=True)
class CheckedHost:
    """Resolves and checks hosts once: the caller connects to exactly these addresses."""

    policy: AddressPolicy
    resolver: Resolver = field(default_factory=SystemResolver)

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """The checked addresses of host; DestinationRefused when any is internal."""
        literal = self.policy.check_literal(host)
        if literal is not None:
            return [literal]
        try:
            found = await self.resolver.resolve(host, port)
        except (OSError, TimeoutError):
            raise DestinationRefused("the destination name does not resolve") from None
        if not found:
            raise DestinationRefused("the destination name does not resolve")
        self.policy.check_all(found)
        return found
