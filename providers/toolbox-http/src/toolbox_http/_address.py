"""Host names and IP addresses: literal-IP normalisation and the SSRF address check.

A URL host such as ``127.1``, ``2130706433``, ``0x7f.0.0.1`` or ``017700000001``
is not a name: the C resolver (``inet_aton``) reads each as ``127.0.0.1``.
`literal_address` reads them the same way, so they are checked as the address
they are, never resolved as names.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

__all__ = [
    "METADATA_ADDRESSES",
    "IPAddress",
    "IPNetwork",
    "address_problem",
    "canonical_host",
    "is_localhost_name",
    "literal_address",
    "normalise_host",
    "parse_legacy_ipv4",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Cloud metadata and instance-service addresses: denied unless listed one by one (``/32``, ``/128``).
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS VPC DNS
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS VPC DNS over IPv6
    )
)

_LEGACY_PART = re.compile(r"^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def parse_legacy_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """``text`` read as ``inet_aton`` reads it (``a``, ``a.b``, ``a.b.c``, ``a.b.c.d``; decimal,
    ``0x`` hex or ``0`` octal parts), or None when it is not such a literal.
    """
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        if not _LEGACY_PART.match(part):
            return None
        if part[:2].lower() == "0x":
            values.append(int(part[2:], 16))
        elif part.startswith("0"):
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *leading, last = values
    if any(v > 255 for v in leading) or last >= 256 ** (4 - len(leading)):
        return None
    number = 0
    for value in leading:
        number = number * 256 + value
    number = (number << (8 * (4 - len(leading)))) + last
    return ipaddress.IPv4Address(number)


def normalise_host(host: str) -> str:
    """Lower case, without brackets and without one trailing dot."""
    host = host.strip("[]").lower()
    return host[:-1] if host.endswith(".") else host


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` denotes when it is an IP literal in any accepted form, else None."""
    host = normalise_host(host)
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    return parse_legacy_ipv4(host)


def canonical_host(host: str) -> str:
    """One key per destination: every spelling of an IP literal maps to the address's standard form.

    ``127.1``, ``2130706433``, ``[::ffff:7f00:1]`` and ``127.0.0.1.`` all give ``127.0.0.1``
    (an IPv4-mapped IPv6 address reaches its IPv4 address); ``[0:0::0:1]`` gives ``::1``. A name
    is lower case without a trailing dot; pass it in its ASCII (IDNA) form, ``httpx.URL.raw_host``.
    """
    name = normalise_host(host)
    address = literal_address(name)
    if address is None:
        return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def is_localhost_name(host: str) -> bool:
    """``localhost`` and names under it always mean loopback (RFC 6761), whatever a resolver says."""
    host = normalise_host(host)
    return host == "localhost" or host.endswith(".localhost")


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, Teredo, IPv4-compatible)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in network for network in _NAT64) or (
        address in _IPV4_COMPATIBLE and int(address) > 1  # :: and ::1 are IPv6 themselves
    ):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _category(address: IPAddress) -> str:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_unspecified:
        return "unspecified"
    if isinstance(address, ipaddress.IPv6Address) and address in ipaddress.ip_network("fc00::/7"):
        return "unique-local"
    if address.is_private:
        return "private"
    return "non-public"


def address_problem(address: IPAddress, allow_networks: Iterable[IPNetwork]) -> str | None:
    """Why connecting to ``address`` is refused, or None when it is allowed.

    Public (globally routable, not multicast) addresses are allowed; any other
    is allowed only inside one of ``allow_networks``. A metadata address is
    allowed only when a network of exactly that one address is listed. An IPv6
    form carrying an IPv4 address is judged as that IPv4 address.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
    embedded = _embedded_ipv4(address)
    effective: IPAddress = embedded if embedded is not None else address
    networks = tuple(allow_networks)
    for candidate in {address, effective}:
        if candidate in METADATA_ADDRESSES and not any(
            n.num_addresses == 1 and candidate in n for n in networks
        ):
            return f"{candidate} is a cloud metadata address"
    if any(effective.version == n.version and effective in n for n in networks):
        return None
    if effective.is_global and not effective.is_multicast:
        return None
    shown = str(address) if embedded is None else f"{address} (carrying {embedded})"
    return f"{shown} is a {_category(effective)} address"
