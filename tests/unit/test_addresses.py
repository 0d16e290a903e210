"""The outbound address policy: internal space in every spelling, names by all their addresses."""

from __future__ import annotations

import ipaddress

import msgspec
import pytest

from runtime.addresses import (
    LOOPBACK_NETWORKS,
    AddressPolicy,
    CheckedHost,
    DestinationRefused,
    IPAddress,
    parse_ip_literal,
)
from runtime.composition.config import load_settings
from runtime.publication.publication_settings import DestinationSettings

pytestmark = pytest.mark.requirement("001:Underlying API And MCP Calls")

DEFAULT = AddressPolicy()

# (host as written in a URI, the internal space it must be refused as)
INTERNAL_SPELLINGS = [
    ("127.0.0.1", "loopback"),
    ("2130706433", "loopback"),
    ("0x7f000001", "loopback"),
    ("0X7F000001", "loopback"),
    ("017700000001", "loopback"),
    ("0177.0.0.1", "loopback"),
    ("127.1", "loopback"),
    ("127.0.1", "loopback"),
    ("0x7f.1", "loopback"),
    ("127.0.0.1.", "loopback"),
    ("localhost", "loopback"),
    ("LOCALHOST.", "loopback"),
    ("api.localhost", "loopback"),
    ("[::1]", "loopback"),
    ("[0:0:0:0:0:0:0:1]", "loopback"),
    ("[::ffff:127.0.0.1]", "loopback (IPv4 inside IPv6)"),
    ("[::ffff:7f00:1]", "loopback (IPv4 inside IPv6)"),
    ("169.254.169.254", "link-local"),
    ("[::ffff:169.254.169.254]", "link-local (IPv4 inside IPv6)"),
    ("[64:ff9b::a9fe:a9fe]", "link-local (IPv4 inside IPv6)"),
    ("[2002:a9fe:a9fe::]", "link-local (IPv4 inside IPv6)"),
    ("[fe80::1]", "link-local"),
    ("[fe80::1%eth0]", "link-local"),
    ("10.0.0.1", "private"),
    ("167772161", "private"),
    ("172.16.5.4", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("0xc0.0xa8.1.1", "private"),
    ("[fc00::1]", "private"),
    ("[fd12:3456::1]", "private"),
    ("100.64.0.1", "shared (CGNAT)"),
    ("100.127.255.254", "shared (CGNAT)"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("[ff02::1]", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("0", "unspecified"),
    ("[::]", "unspecified"),
    ("[::127.0.0.1]", "IPv4-compatible"),
    ("%31%32%37.0.0.1", "loopback"),
    ("\uff11\uff12\uff17.0.0.1", "loopback"),
    ("127\u30020\u30020\u30021", "loopback"),
    ("169\uff0e254\uff0e169\uff0e254", "link-local"),
    ("255.255.255.255", "reserved"),
]

PUBLIC_SPELLINGS = [
    ("8.8.8.8", "8.8.8.8"),
    ("134744072", "8.8.8.8"),
    ("0x08080808", "8.8.8.8"),
    ("172.32.0.1", "172.32.0.1"),
    ("100.128.0.1", "100.128.0.1"),
    ("[2606:4700:4700::1111]", "2606:4700:4700::1111"),
    ("[::ffff:8.8.8.8]", "::ffff:808:808"),
]


@pytest.mark.parametrize(("host", "reason"), INTERNAL_SPELLINGS)
def test_every_spelling_of_internal_address_space_is_refused(host: str, reason: str) -> None:
    with pytest.raises(DestinationRefused) as refused:
        DEFAULT.check_literal(host)
    assert refused.value.reason == f"the destination is in internal address space ({reason})"


@pytest.mark.parametrize(("host", "address"), PUBLIC_SPELLINGS)
def test_public_addresses_in_any_spelling_are_allowed(host: str, address: str) -> None:
    assert DEFAULT.check_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["api.example.com", "1.2.3.4.5", "0x7g.0.0.1", "256.1.1.1.1"])
def test_names_are_not_literals_and_are_left_to_resolution(host: str) -> None:
    assert parse_ip_literal(host) is None
    assert DEFAULT.check_literal(host) is None


@pytest.mark.parametrize("host", ["256.0.0.1", "1.256.0.0", "1.2.65536", "4294967296"])
def test_out_of_range_numbers_are_not_addresses(host: str) -> None:
    assert parse_ip_literal(host) is None


def test_an_allowed_network_opens_exactly_that_network_in_every_form() -> None:
    policy = AddressPolicy.from_cidrs(LOOPBACK_NETWORKS)
    assert policy.check_literal("127.0.0.1") == ipaddress.ip_address("127.0.0.1")
    assert policy.check_literal("2130706433") == ipaddress.ip_address("127.0.0.1")
    assert policy.check_literal("[::ffff:127.0.0.1]") is not None
    assert policy.check_literal("[::1]") is not None
    with pytest.raises(DestinationRefused):
        policy.check_literal("169.254.169.254")
    with pytest.raises(DestinationRefused):
        policy.check_literal("10.0.0.1")


def test_a_malformed_allowed_network_is_a_configuration_error() -> None:
    with pytest.raises(ValueError):
        AddressPolicy.from_cidrs(["10.0.0.0/33"])
    with pytest.raises(msgspec.ValidationError, match="not a CIDR network"):
        msgspec.convert({"allowed_networks": ["10.0.0.0/33"]}, DestinationSettings)


def test_the_operator_allows_networks_through_the_environment() -> None:
    variable = {"WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_NETWORKS": '["10.20.0.0/16"]'}
    policy = load_settings(None, variable).publication.destinations.address_policy()
    assert policy.check_literal("10.20.3.4") == ipaddress.ip_address("10.20.3.4")
    with pytest.raises(DestinationRefused):
        policy.check_literal("10.21.3.4")
    # Nothing configured: no internal network at all.
    with pytest.raises(DestinationRefused):
        load_settings(None, {}).publication.destinations.address_policy().check_literal("[::1]")


class TableResolver:
    """A resolver answering from a table, counting its lookups."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.lookups.append(host)
        if host not in self.table:
            raise OSError("name does not resolve")
        return [ipaddress.ip_address(address) for address in self.table[host]]


async def test_a_name_is_refused_when_any_of_its_addresses_is_internal() -> None:
    resolver = TableResolver(
        {
            "metadata.google.internal": ["169.254.169.254"],
            "mixed.example.com": ["93.184.216.34", "10.1.2.3"],
            "public.example.com": ["93.184.216.34", "2606:2800:220:1::1"],
        }
    )
    checked = CheckedHost(DEFAULT, resolver)
    with pytest.raises(DestinationRefused, match=r"resolves to internal address space \(link"):
        await checked.addresses("metadata.google.internal", 80)
    with pytest.raises(DestinationRefused, match=r"\(private\)"):
        await checked.addresses("mixed.example.com", 443)
    found = await checked.addresses("public.example.com", 443)
    assert [str(address) for address in found] == ["93.184.216.34", "2606:2800:220:1::1"]


async def test_a_name_that_does_not_resolve_is_refused_and_literals_are_never_looked_up() -> None:
    resolver = TableResolver({})
    checked = CheckedHost(DEFAULT, resolver)
    with pytest.raises(DestinationRefused, match="does not resolve"):
        await checked.addresses("nowhere.example.com", 443)
    with pytest.raises(DestinationRefused, match="loopback"):
        await checked.addresses("localhost", 80)
    assert await checked.addresses("8.8.8.8", 443) == [ipaddress.ip_address("8.8.8.8")]
    assert resolver.lookups == ["nowhere.example.com"]
