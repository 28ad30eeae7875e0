"""`EgressPolicy`: where an `HttpTool` may send requests, and the denials it raises.

The static part (scheme, host, port, method) is checked when the operation is
called, before any intent exists; the address part (what a host resolves to)
is checked by the guarded network backend (`toolbox_http._guard`) just before
a connection is opened.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Annotated, Any, final

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolbox.errors import ToolDeniedError
from toolbox_http._address import IPNetwork, literal_address, normalise_host

__all__ = [
    "EgressDeniedError",
    "EgressMode",
    "EgressPolicy",
    "HostPattern",
    "RateLimitedError",
    "Resolver",
    "host_matches",
]

#: ``resolver(host, port)`` returns the IP addresses (as strings) ``host`` resolves to.
Resolver = Callable[[str, int], Sequence[str]]

_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_HOST_PATTERN = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")
_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "POST", "PATCH"})


class EgressDeniedError(ToolDeniedError):
    """A request outside the egress policy, or to a refused address (``EGRESS_DENIED``).

    Attributes:
        rule: which check refused it: ``http:egress:scheme``, ``:host``, ``:port``,
            ``:method``, ``:address`` or ``:redirect``.
    """

    def __init__(self, message: str, *, rule: str, tool: str = "http") -> None:
        super().__init__(message, tool=tool, reason_code="EGRESS_DENIED", rule=rule)


class RateLimitedError(ToolDeniedError):
    """The per-host rate limit or concurrency cap refused the request (``RATE_LIMITED``)."""

    def __init__(self, message: str, *, tool: str = "http") -> None:
        super().__init__(message, tool=tool, reason_code="RATE_LIMITED", rule="http:rate_limit")


class EgressMode(str, Enum):
    """``ENFORCE`` denies requests outside the policy; ``REPORT`` lets them through with a warning."""

    ENFORCE = "ENFORCE"
    REPORT = "REPORT"


def _check_pattern(value: str) -> str:
    pattern = normalise_host(value)
    if literal_address(pattern) is not None or _HOST_PATTERN.match(pattern):
        return pattern
    raise ValueError(f"host pattern {value!r} is not a host name, an IP address or '*.' followed by a domain")


#: A host name (``api.example.com``), an IP address, or ``*.example.com`` (any name under it).
HostPattern = Annotated[str, Field(min_length=1, max_length=253)]


def host_matches(host: str, patterns: Sequence[str]) -> bool:
    """Whether ``host`` matches one of the (already normalised) ``patterns``."""
    name = normalise_host(host)
    literal = literal_address(name)
    for pattern in patterns:
        if pattern.startswith("*."):
            if literal is None and name.endswith(pattern[1:]):
                return True
        elif literal is not None:
            if literal == literal_address(pattern):
                return True
        elif name == pattern:
            return True
    return False


@final
class EgressPolicy(BaseModel):
    """Where requests may go. Given as ``HttpOptions(egress={...})`` or ``[tools.http.egress]``.

    By default any ``http``/``https`` URL on any port is allowed by the static
    checks, and the address check refuses every non-public address.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    schemes: tuple[str, ...] = ("http", "https")
    """Allowed URL schemes, a subset of ``http`` and ``https``."""
    hosts: tuple[HostPattern, ...] | None = None
    """Allowed hosts: exact names, IP addresses, or ``*.example.com``; None allows any host."""
    ports: tuple[Annotated[int, Field(ge=1, le=65535)], ...] | None = None
    """Allowed ports (the URL's port, or 80/443 by scheme); None allows any port."""
    methods: tuple[str, ...] | None = None
    """Allowed methods (``GET``, ``POST``, ...); None allows all of the tool's operations."""
    mode: EgressMode = EgressMode.ENFORCE
    """``REPORT`` records a warning instead of denying a request the static checks refuse.

    Address (SSRF) checks and redirect hops are enforced in both modes.
    """
    allow_networks: tuple[IPNetwork, ...] = ()
    """Non-public networks that may be reached, e.g. ``["127.0.0.0/8", "::1/128"]`` for a local service.

    A cloud metadata address (169.254.169.254, ...) is reachable only when listed
    as a single address (``"169.254.169.254/32"``).
    """
    resolver: Resolver | None = None
    """``resolver(host, port) -> [ip, ...]`` used instead of the system resolver (code only, for tests)."""

    @field_validator("schemes")
    @classmethod
    def _schemes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        lowered = tuple(s.lower() for s in value)
        unknown = sorted(set(lowered) - {"http", "https"})
        if unknown:
            raise ValueError(f"unsupported scheme(s) {', '.join(unknown)}: only http and https")
        return lowered

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(_check_pattern(v) for v in value)

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        upper = tuple(m.upper() for m in value)
        unknown = sorted(set(upper) - _METHODS)
        if unknown:
            raise ValueError(f"unknown method(s) {', '.join(unknown)}: use {', '.join(sorted(_METHODS))}")
        return upper

    @field_validator("allow_networks", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            try:
                return tuple(ipaddress.ip_network(v) if isinstance(v, str) else v for v in value)
            except ValueError as exc:
                raise ValueError(f"allow_networks: {exc}") from None
        return value

    def violation(self, method: str, url: httpx.URL) -> tuple[str, str] | None:
        """The rule and message of the first static check ``method url`` fails, or None."""
        if url.scheme not in self.schemes:
            return "http:egress:scheme", f"scheme {url.scheme!r} is not in egress.schemes"
        # raw_host is the ASCII (IDNA) form, the one patterns are written in.
        host = normalise_host(url.raw_host.decode("ascii"))
        if self.hosts is not None and not host_matches(host, self.hosts):
            return "http:egress:host", f"host {host!r} is not in egress.hosts"
        port = url.port or (443 if url.scheme == "https" else 80)
        if self.ports is not None and port not in self.ports:
            return "http:egress:port", f"port {port} is not in egress.ports"
        if self.methods is not None and method.upper() not in self.methods:
            return "http:egress:method", f"method {method.upper()} is not in egress.methods"
        return None
