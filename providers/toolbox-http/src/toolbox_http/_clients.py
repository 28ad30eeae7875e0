"""The httpx clients of one `HttpTool`: TLS verified, no environment, no cookies, no redirects.

`Clients.sync_transport` and `Clients.async_transport` are the single place a
transport is chosen: unless the options pass one (tests), it is the guarded
transport of `toolbox_http._guard`, which checks every address it connects to.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import weakref
from collections.abc import AsyncGenerator
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import Any, final

import httpx

from toolbox.provider import require_dispatch
from toolbox_http._guard import AddressGuard, guarded_async_transport, guarded_transport
from toolbox_http._options import HttpOptions

__all__ = ["Clients", "load_ssl_context"]


_bundled_lock = threading.Lock()
_bundled: ssl.SSLContext | None = None


def _bundled_context() -> ssl.SSLContext:
    """The verifying context trusting the bundled CAs, built once per process.

    Loading the bundle costs ~25 ms of CPU, which every new `HttpTool` (a `Toolbox` per
    request or tenant) paid before its first request. One context serves every tool: it is never
    changed after it is built, Python's `ssl` keeps no session between the sockets it wraps
    unless asked, and the bundled CAs cannot change while the process runs.
    """
    global _bundled  # noqa: PLW0603 - one per process, built on first use
    with _bundled_lock:
        if _bundled is None:
            # trust_env=False: SSL_CERT_FILE in the environment must not change whom we trust.
            _bundled = httpx.create_ssl_context(trust_env=False)
        return _bundled


def load_ssl_context(ca_bundle: Path | None) -> ssl.SSLContext:
    """A verifying TLS context trusting ``ca_bundle``, or the bundled CAs (one shared context).

    A configured bundle is read on every call: the file may be replaced between deployments'
    tools, and a bad one must fail where it is configured.

    Raises:
        ValueError: ``ca_bundle`` is not a loadable PEM file of CA certificates.
    """
    if ca_bundle is None:
        return _bundled_context()
    try:
        return ssl.create_default_context(cafile=str(ca_bundle))
    except OSError:  # ssl.SSLError included
        raise ValueError(f"ca_bundle {str(ca_bundle)!r} is not a PEM file of CA certificates") from None


def insecure_ssl_context() -> ssl.SSLContext:
    """A context that checks neither the certificate nor the host name (acknowledged use only)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _client_settings(options: HttpOptions) -> dict[str, Any]:
    connect = min(options.connect_timeout, options.total_timeout)
    read = min(options.read_timeout, options.total_timeout)
    return {
        "timeout": httpx.Timeout(connect=connect, read=read, write=read, pool=connect),
        "follow_redirects": False,
        # No proxies, netrc or CA paths from the environment: only options decide.
        "trust_env": False,
        # A cookie set by one call must never ride along on another (maybe another tenant's).
        "cookies": httpx.Cookies(CookieJar(DefaultCookiePolicy(allowed_domains=[]))),
    }


def _dispatch_hooks(tool: str) -> tuple[Any, Any]:
    """httpx request hooks: every request of these clients, redirects included, must be
    sent by the governed chain's dispatch of ``tool`` (else `toolbox.errors.GovernanceBypassError`).
    """

    def check(request: httpx.Request) -> None:
        require_dispatch(tool)

    async def acheck(request: httpx.Request) -> None:
        require_dispatch(tool)

    return check, acheck


async def _keep_until_shutdown(client: httpx.AsyncClient, *, closes: bool) -> AsyncGenerator[None, None]:
    """Suspended for the life of the loop; its ``finally`` closes ``client`` at loop shutdown."""
    try:
        yield  # never resumed: only aclose() (from shutdown_asyncgens) gets past here
    finally:
        if closes:
            await client.aclose()


@final
class Clients:
    """Builds transports and clients; owns the shared sync client and the TLS context."""

    __slots__ = ("_async", "_client", "_guard", "_hooks", "_lock", "_options", "_ssl")

    def __init__(self, options: HttpOptions, *, tool: str) -> None:
        self._options = options
        self._hooks = _dispatch_hooks(tool)
        self._guard = AddressGuard(options.egress)
        self._lock = threading.RLock()
        self._client: httpx.Client | None = None
        self._async: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        # A configured bundle is loaded now so a bad file fails at tools.get(), not mid-call.
        self._ssl = load_ssl_context(options.ca_bundle) if options.ca_bundle is not None else None

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context, built once (loading the CA bundle costs milliseconds)."""
        with self._lock:
            if self._ssl is None:
                insecure = self._options.insecure_skip_verify
                self._ssl = insecure_ssl_context() if insecure else load_ssl_context(None)
            return self._ssl

    def sync_transport(self) -> httpx.BaseTransport:
        """The configured sync transport, else a new verifying one."""
        if self._options.transport is not None:
            return self._options.transport
        return guarded_transport(self.ssl_context(), self._guard)

    def async_transport(self) -> httpx.AsyncBaseTransport:
        """The configured async transport, else a new verifying one."""
        if self._options.async_transport is not None:
            return self._options.async_transport
        return guarded_async_transport(self.ssl_context(), self._guard)

    def sync_client(self) -> httpx.Client:
        """The shared sync client, created on first use."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    transport = self.sync_transport()
                    self._client = httpx.Client(
                        transport=transport,
                        event_hooks={"request": [self._hooks[0]]},
                        **_client_settings(self._options),
                    )
                client = self._client
        return client

    async def async_client(self) -> httpx.AsyncClient:
        """The async client of the running event loop, created on first use there.

        Async clients are bound to one loop, so each loop gets its own pool. It is
        closed when the loop shuts down its async generators (``asyncio.run`` does),
        through a keeper generator registered with that loop.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            held = self._async.get(loop)
        if held is not None and not held[0].is_closed:
            return held[0]
        client = httpx.AsyncClient(
            transport=self.async_transport(),
            event_hooks={"request": [self._hooks[1]]},
            **_client_settings(self._options),
        )
        keeper = _keep_until_shutdown(client, closes=self._options.async_transport is None)
        await keeper.__anext__()  # registers the generator with the loop's shutdown_asyncgens()
        with self._lock:
            self._async[loop] = (client, keeper)
        return client

    def close(self) -> None:
        """Close the shared sync client; a transport passed in options stays open (it is the caller's).

        Async clients are closed by their event loop's shutdown (see `async_client`).
        """
        with self._lock:
            client, self._client = self._client, None
        if client is not None and self._options.transport is None:
            client.close()
