"""How a session reaches its server: a stdio child with only the listed env, or guarded HTTP.

stdio: the SDK's `stdio_client` merges a few of the parent's variables (``PATH``,
``HOME``, ...) into the child's environment. The operator's rule is "only the
variables listed", so the child is started through ``env -u NAME ...``, which
unsets each inherited variable the operator did not list before it executes
the server (only names are on that command line, never values).

HTTP: the SDK's streamable-HTTP client takes an ``httpx2`` client. Its
connection pool gets a network backend that asks toolbox-http's `AddressGuard`
for every connection (resolve once, check every address, connect to the
checked one), so the SSRF rules of toolbox-http hold for MCP traffic too.
Credentials are default headers of that client: the SDK follows a redirect
only within the endpoint's origin, so they reach only the configured host.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpcore2
import httpx2
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolbox.errors import ToolConnectionError
from toolbox_http import AddressGuard
from toolbox_mcp._config import ServerConfig

__all__ = ["Opener", "child_environment", "http_opener", "stdio_opener", "stdio_parameters"]

Streams = Any  # the SDK's TransportStreams pair (read stream, write stream)
Opener = Callable[[], AbstractAsyncContextManager[Streams]]


def child_environment(server: ServerConfig, parent: Mapping[str, str]) -> dict[str, str]:
    """The child's whole environment: ``env``, plus the ``pass_env`` names set in ``parent``."""
    found = {name: parent[name] for name in server.pass_env if name in parent}
    found.update(server.env)
    return found


def stdio_parameters(server: ServerConfig, parent: Mapping[str, str]) -> StdioServerParameters:
    """The SDK parameters that start ``server`` with exactly `child_environment`.

    Raises:
        ValueError: the command is not found (looked up on the child's ``PATH`` if it has one).
    """
    assert server.command is not None  # a stdio server
    environment = child_environment(server, parent)
    command = shutil.which(server.command, path=environment.get("PATH", parent.get("PATH")))
    env_program = shutil.which("env", path=os.defpath) or "/usr/bin/env"
    if command is None:
        raise ValueError(f"command {server.command!r} of the MCP server was not found")
    unset = [arg for name in DEFAULT_INHERITED_ENV_VARS if name not in environment for arg in ("-u", name)]
    return StdioServerParameters(
        command=env_program,
        args=[*unset, "--", command, *server.args],
        env=environment,
        cwd=server.cwd,
    )


def stdio_opener(server: ServerConfig, parent: Mapping[str, str]) -> Opener:
    """Opens the SDK's stdio transport; the child's stderr goes to this process's stderr.

    The command is looked up when a session opens, so a missing one fails that call
    (`toolbox.errors.ToolConnectionError`, nothing sent) rather than the tool's construction.
    """

    def open_stdio() -> AbstractAsyncContextManager[Streams]:
        try:
            parameters = stdio_parameters(server, parent)
        except ValueError as exc:
            raise ToolConnectionError(str(exc), request_sent=False) from None
        return stdio_client(parameters, errlog=sys.__stderr__ or sys.stderr)

    return open_stdio


class _GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Connects only to addresses toolbox-http's guard checked for the host."""

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        # Resolution may block: keep it off the session's event loop.
        addresses = await asyncio.to_thread(self._guard.addresses, host, port)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, OSError) as exc:
                error = exc
        raise httpcore2.ConnectError(str(error) if error else "no address")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:  # pragma: no cover - the pool is never given a socket path
        raise httpcore2.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - httpcore retries are 0
        await self._inner.sleep(seconds)


def guarded_client(server: ServerConfig, headers: Mapping[str, str], *, tool: str) -> httpx2.AsyncClient:
    """An ``httpx2`` client whose connections pass toolbox-http's address guard."""
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    # httpx2 builds its pool without a backend parameter (like httpx): the pool is replaced by an
    # identical one with the guard, as toolbox-http does for its own client.
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=httpx2.create_ssl_context(trust_env=False),
        network_backend=_GuardedBackend(AddressGuard(server.egress, tool=tool)),
    )
    timeout = httpx2.Timeout(server.connect_timeout, read=server.timeout)
    return httpx2.AsyncClient(
        transport=transport, headers=dict(headers), timeout=timeout, trust_env=False, follow_redirects=False
    )


def http_opener(server: ServerConfig, headers: Callable[[], Mapping[str, str]], *, tool: str) -> Opener:
    """Opens the SDK's streamable-HTTP transport over a guarded client carrying ``headers()``.

    The headers (the upstream credential) are read when a session opens, so a missing
    secret fails that call (`toolbox_http.CredentialError`, nothing sent).
    """
    assert server.url is not None  # an HTTP server
    url = server.url

    @asynccontextmanager
    async def open_http() -> AsyncIterator[Streams]:
        async with (
            guarded_client(server, headers(), tool=tool) as client,
            streamable_http_client(url, http_client=client) as streams,
        ):
            yield streams

    return open_http


def read_secret_file(path: Path) -> str:
    """The secret in ``path``, without its trailing newline.

    Raises:
        OSError: the file cannot be read.
    """
    return path.read_text(encoding="utf-8").rstrip("\r\n")
