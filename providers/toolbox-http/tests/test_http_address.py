"""Literal-IP normalisation and the address check, table-driven (pure functions, no network)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from toolbox_http._address import (
    address_problem,
    is_localhost_name,
    literal_address,
    parse_legacy_ipv4,
)

LOOPBACK_NETS = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0X7F.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("169.254.43518", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0", "0.0.0.0"),
        ("8.8.8.8", "8.8.8.8"),
    ],
)
def test_legacy_ipv4_forms_read_like_inet_aton(text, expected):
    """Every inet_aton form is read as the address the C library would connect to."""
    assert str(parse_legacy_ipv4(text)) == expected
    assert socket.inet_ntoa(socket.inet_aton(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0x",
        "1.2.3.4.5",
        "256.1.1.1",
        "1.2.3.256",
        "127.16777216",
        "4294967296",
        "08",
        "0x1g",
        "1..2",
        "a.b",
        "-1",
    ],
)
def test_not_legacy_ipv4(text):
    """Names and out-of-range numbers are not literals (the resolver sees names only)."""
    assert parse_legacy_ipv4(text) is None


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("[::1]", "::1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0x7F.0.0.1", "127.0.0.1"),
        ("api.example.com", None),
        ("localhost", None),
    ],
)
def test_literal_address(host, expected):
    """Brackets, case and a trailing dot do not hide a literal."""
    found = literal_address(host)
    assert (None if found is None else str(found)) == expected


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "db.localhost", "x.localhost."])
def test_localhost_names(host):
    """localhost and names under it are loopback whatever the resolver says."""
    assert is_localhost_name(host)


@pytest.mark.parametrize(
    ("address", "category"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "non-public"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fd12:3456::1", "unique-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("::7f00:1", "loopback"),
        ("192.0.2.1", "private"),
    ],
)
def test_non_public_addresses_are_refused(address, category):
    """Loopback, private, link-local, unique-local, multicast, unspecified and wrapped forms are refused."""
    problem = address_problem(ipaddress.ip_address(address), ())
    assert problem is not None
    assert f"is a {category} address" in problem


@pytest.mark.parametrize(
    "address",
    ["169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "::ffff:169.254.169.254"],
)
def test_metadata_needs_its_own_entry(address):
    """A metadata address stays refused when its whole network is allowed; only a /32 or /128 opens it."""
    ip = ipaddress.ip_address(address)
    wide = (
        ipaddress.ip_network("169.254.0.0/16"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("100.64.0.0/10"),
    )
    problem = address_problem(ip, wide)
    assert problem is not None and "metadata" in problem
    embedded = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip
    exact = ipaddress.ip_network(f"{embedded}/{embedded.max_prefixlen}")
    assert address_problem(ip, (*wide, exact)) is None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "2002:5db8:d822::"])
def test_public_addresses_pass(address):
    """Globally routable unicast addresses (including 6to4 of a public one) are allowed."""
    assert address_problem(ipaddress.ip_address(address), ()) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"])
def test_allow_networks_opens_loopback(address):
    """Listing 127.0.0.0/8 and ::1/128 allows loopback in any of its forms, and nothing else."""
    assert address_problem(ipaddress.ip_address(address), LOOPBACK_NETS) is None
    assert address_problem(ipaddress.ip_address("10.0.0.1"), LOOPBACK_NETS) is not None
