"""Host canonicalisation (property tests): every spelling of one address maps to one key."""

from __future__ import annotations

import ipaddress

import httpx
from hypothesis import assume, given
from hypothesis import strategies as st

from toolbox_http._address import canonical_host

ipv4 = st.integers(min_value=0, max_value=2**32 - 1).map(ipaddress.IPv4Address)
# Global-unicast-looking IPv6 addresses, away from the IPv4-mapped range (tested on its own).
ipv6 = st.integers(min_value=2**125, max_value=2**128 - 1).map(ipaddress.IPv6Address)


def _number(value: int, style: str) -> str:
    """``value`` as inet_aton reads one part: decimal, 0x hex (either case) or 0 octal."""
    if style == "hex":
        return f"0x{value:x}"
    if style == "HEX":
        return f"0X{value:X}"
    if style == "octal":
        return f"0{value:o}"
    return str(value)


@st.composite
def ipv4_spellings(draw: st.DrawFn, address: ipaddress.IPv4Address) -> str:
    """``address`` as ``a.b.c.d``, ``a.b.c``, ``a.b`` or ``a``, each part in any base, maybe with a dot."""
    octets = address.packed
    parts = draw(st.sampled_from([4, 3, 2, 1]))
    # The last part carries the remaining bytes as one number, the way inet_aton reads it.
    values = [*octets[: parts - 1], int.from_bytes(octets[parts - 1 :], "big")]
    styles = st.sampled_from(["decimal", "hex", "HEX", "octal"])
    text = ".".join(_number(v, draw(styles)) for v in values)
    return text + draw(st.sampled_from(["", "."]))


@st.composite
def ipv6_spellings(draw: st.DrawFn, address: ipaddress.IPv6Address) -> str:
    """``address`` compressed or exploded, either case, zero padding dropped, bracketed or not."""
    groups = address.exploded.split(":")
    if draw(st.booleans()):
        groups = [g.lstrip("0") or "0" for g in groups]
    text = ":".join(groups) if draw(st.booleans()) else address.compressed
    text = text.upper() if draw(st.booleans()) else text
    return f"[{text}]" if draw(st.booleans()) else text


@st.composite
def mapped_spellings(draw: st.DrawFn, address: ipaddress.IPv4Address) -> str:
    """``address`` inside an IPv4-mapped IPv6 address: hex tail or dotted tail, any case."""
    high, low = int(address) >> 16, int(address) & 0xFFFF
    prefix = draw(st.sampled_from(["::ffff:", "::FFFF:", "0:0:0:0:0:ffff:", "0000:0000::ffff:"]))
    tail = f"{high:x}:{low:x}" if draw(st.booleans()) else str(address)
    return f"[{prefix}{tail}]"


@given(st.data(), ipv4)
def test_every_ipv4_spelling_is_one_key(data: st.DataObject, address: ipaddress.IPv4Address) -> None:
    """Dotted, short, hex, octal, IPv4-mapped and trailing-dot spellings all give the dotted address."""
    spelling = data.draw(st.one_of(ipv4_spellings(address), mapped_spellings(address)))
    assert canonical_host(spelling) == str(address)


@given(st.data(), ipv6)
def test_every_ipv6_spelling_is_one_key(data: st.DataObject, address: ipaddress.IPv6Address) -> None:
    """Compressed, exploded, upper-case and bracketed spellings all give the compressed address."""
    assert canonical_host(data.draw(ipv6_spellings(address))) == address.compressed


@given(st.data(), ipv4)
def test_the_key_is_the_same_through_a_url(data: st.DataObject, address: ipaddress.IPv4Address) -> None:
    """What the exchange keys on (the URL's ASCII host) is canonical however the URL spells it."""
    spelling = data.draw(st.one_of(ipv4_spellings(address), mapped_spellings(address)))
    try:
        url = httpx.URL(f"http://{spelling}:8080/path")
    except httpx.InvalidURL:
        # httpx refuses some four-part forms (0.0.0.00) outright: such a URL is never sent.
        assume(False)
    assert canonical_host(url.raw_host.decode("ascii")) == str(address)


@given(ipv4, ipv4)
def test_different_addresses_keep_different_keys(
    first: ipaddress.IPv4Address, second: ipaddress.IPv4Address
) -> None:
    """Canonicalising never merges two destinations."""
    assert (canonical_host(str(first)) == canonical_host(str(second))) == (first == second)


@given(st.sampled_from(["api.example.com", "API.Example.COM", "api.example.com.", "Api.EXAMPLE.com."]))
def test_a_name_is_keyed_without_case_or_trailing_dot(spelling: str) -> None:
    """Names are lower case without the root dot; an IDNA name is keyed by its ASCII form."""
    assert canonical_host(spelling) == "api.example.com"
    assert canonical_host(httpx.URL("http://Bücher.example/").raw_host.decode()) == "xn--bcher-kva.example"
