"""The SSRF guard: resolve once, check every address, connect to the address checked.

The guard is an httpcore network backend, the layer that opens sockets. httpcore
asks it for a TCP connection to ``(host, port)``; it resolves ``host`` once
(with the injectable resolver), refuses the connection when any address is not
allowed, and connects to the checked address itself. The request URL is left
alone, so the ``Host`` header and the TLS server name (SNI and certificate check)
stay the original host name, and no later resolution can swap the address
(DNS rebinding). Every stream it opens ends its operations by the call's
deadline (`toolbox_http._deadline`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable, Sequence
from typing import TypedDict, final

import httpcore
import httpx

from toolbox_http._address import IPAddress, address_problem, is_localhost_name, literal_address
from toolbox_http._deadline import AsyncDeadlineStream, DeadlineStream, time_left
from toolbox_http._egress import EgressDeniedError, EgressPolicy, Resolver

__all__ = ["AddressGuard", "guarded_async_transport", "guarded_transport", "system_resolver"]

_LOCALHOST: tuple[str, ...] = ("127.0.0.1", "::1")


def system_resolver(host: str, port: int) -> Sequence[str]:
    """The operating system's answer for ``host`` (every address, IPv4 and IPv6)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@final
class AddressGuard:
    """Turns a host into the addresses a connection may use, or refuses it."""

    __slots__ = ("_networks", "_resolver", "_tool")

    def __init__(self, egress: EgressPolicy, *, tool: str = "http") -> None:
        self._networks = egress.allow_networks
        self._resolver: Resolver = egress.resolver or system_resolver
        self._tool = tool

    @property
    def resolver(self) -> Resolver:
        return self._resolver

    def addresses(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` and check every address.

        Raises:
            EgressDeniedError: an address is not allowed (one bad address refuses them all).
            httpcore.ConnectError: the host has no address.
        """
        literal = literal_address(host)
        if literal is not None:
            return self.check(host, [str(literal)])
        if is_localhost_name(host):
            return self.check(host, list(_LOCALHOST))
        try:
            found = self._resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError("host name could not be resolved") from exc
        return self.check(host, found)

    def check(self, host: str, found: Iterable[object]) -> list[str]:
        """The addresses in ``found``, each checked; see `addresses`."""
        checked: list[IPAddress] = []
        for value in found:
            address = literal_address(value) if isinstance(value, str) else None
            if address is None:
                raise EgressDeniedError(
                    f"resolver returned a value for {host!r} that is not an IP address",
                    rule="http:egress:address",
                    tool=self._tool,
                )
            problem = address_problem(address, self._networks)
            if problem is not None:
                hint = (
                    "list that single address (/32 or /128) in egress.allow_networks to allow it"
                    if "metadata" in problem
                    else "list its network in egress.allow_networks to allow it"
                )
                raise EgressDeniedError(
                    f"connection to {host!r} refused: {problem}; {hint}",
                    rule="http:egress:address",
                    tool=self._tool,
                )
            checked.append(address)
        if not checked:
            raise httpcore.ConnectError("host name could not be resolved") from socket.gaierror(
                socket.EAI_NONAME, "no address"
            )
        return [str(a) for a in checked]


@final
class _GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        error: Exception | None = None
        for address in self._guard.addresses(host, port):
            try:
                bounded = time_left(timeout, httpcore.ConnectTimeout)
                stream = self._inner.connect_tcp(address, port, bounded, local_address, socket_options)
                return DeadlineStream(stream)
            except httpcore.ConnectError as exc:
                error = exc
        raise error if error is not None else httpcore.ConnectError("no address")

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:  # pragma: no cover - the pool is never given a socket path
        raise httpcore.ConnectError("unix sockets are not allowed")

    def sleep(self, seconds: float) -> None:  # pragma: no cover - used by httpcore retries, which are 0
        self._inner.sleep(seconds)


@final
class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        guard = self._guard
        if guard.resolver is system_resolver and literal_address(host) is None:
            # getaddrinfo blocks: keep it off the event loop.
            addresses = await asyncio.to_thread(guard.addresses, host, port)
        else:
            addresses = guard.addresses(host, port)
        error: Exception | None = None
        for address in addresses:
            try:
                bounded = time_left(timeout, httpcore.ConnectTimeout)
                stream = await self._inner.connect_tcp(address, port, bounded, local_address, socket_options)
                return AsyncDeadlineStream(stream)
            except httpcore.ConnectError as exc:
                error = exc
        raise error if error is not None else httpcore.ConnectError("no address")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - the pool is never given a socket path
        raise httpcore.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - httpcore retries are 0
        await self._inner.sleep(seconds)


class _PoolLimits(TypedDict):
    max_connections: int
    max_keepalive_connections: int
    keepalive_expiry: float


# httpx's own defaults (httpx.Limits()), kept so the replaced pool behaves like the original.
_POOL_LIMITS: _PoolLimits = {"max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0}


def guarded_transport(ssl_context: ssl.SSLContext, guard: AddressGuard) -> httpx.HTTPTransport:
    """An httpx transport whose connections go only to addresses ``guard`` checked."""
    transport = httpx.HTTPTransport(verify=ssl_context, trust_env=False)
    # httpx builds its pool without a network_backend parameter; the pool is replaced by an
    # identical one that has the guard (tests assert the guard is the one connecting).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context, network_backend=_GuardedBackend(guard), **_POOL_LIMITS
    )
    return transport


def guarded_async_transport(ssl_context: ssl.SSLContext, guard: AddressGuard) -> httpx.AsyncHTTPTransport:
    """The async twin of `guarded_transport`."""
    transport = httpx.AsyncHTTPTransport(verify=ssl_context, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context, network_backend=_AsyncGuardedBackend(guard), **_POOL_LIMITS
    )
    return transport
