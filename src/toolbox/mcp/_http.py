"""The streamable-HTTP endpoint: authenticated callers, one run per MCP session.

A request reaches the MCP server only through the SDK's bearer-token hook:
Starlette's ``AuthenticationMiddleware`` with the SDK's ``BearerAuthBackend``
asks `IdentityVerifier` (a ``TokenVerifier`` over a `toolbox.auth`
`Authenticator`), and the SDK's ``RequireAuthMiddleware`` answers 401 to
anything else, before any listing or tool code. The SDK's session manager then
refuses bodies over the argument guards' limit (413, before parsing), checks
Host and Origin (DNS rebinding) and binds each session to the credential that
opened it. Each call's `ExecutionContext` is built from the credential's
`Identity`, never from the request body; each session gets its own run id.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, final
from urllib.parse import quote

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ConfigDict, Field
from starlette.applications import Starlette
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from toolbox.auth import Authenticator, Identity
from toolbox.doors._gateway import Gateway
from toolbox.doors._toolsets import Toolsets
from toolbox.errors import ConfigurationError
from toolbox.mcp._server import Caller, build_server
from toolbox.pipeline.checks._arguments import ArgumentLimits, ArgumentValidation

__all__ = ["IdentityToken", "IdentityVerifier", "McpHttpApp", "http_app"]

logger = logging.getLogger("toolbox.mcp")

#: Room for the JSON-RPC envelope around the arguments (method, ids, name, ``_meta``).
ENVELOPE_BYTES = 16 * 1024
_MAX_RUNS = 10_000
_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class IdentityToken(AccessToken):
    """The SDK's access token, carrying the verified `Identity` (and never the token itself)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    identity: Identity = Field(exclude=True, repr=False)


@final
class IdentityVerifier:
    """The SDK's ``TokenVerifier`` hook over a `toolbox.auth` `Authenticator`."""

    __slots__ = ("_authenticator",)

    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    async def verify_token(self, token: str) -> AccessToken | None:
        """The verified identity as an access token, or None (the SDK then answers 401)."""
        try:
            identity = self._authenticator.authenticate(token)
        except Exception as exc:  # noqa: BLE001 - any failure is "not authenticated"; fail closed
            # The reason code only: a message could echo what was presented.
            logger.info("MCP HTTP credentials refused: %s", getattr(exc, "reason_code", type(exc).__name__))
            return None
        return IdentityToken(
            token=identity.credential,  # a label: the SDK keeps this object for the session's life
            client_id=identity.credential,
            scopes=[],
            # The SDK binds a session to (client_id, subject): each part encoded, so tenant
            # "a/b" + principal "c" and tenant "a" + principal "b/c" are two owners, not one.
            subject=f"{quote(identity.tenant, safe='')}/{quote(identity.principal, safe='')}",
            identity=identity,
        )


@final
class _Callers:
    """`CallerSource` of the HTTP endpoint: the request's identity; one run per session and identity."""

    __slots__ = ("_allowed", "_runs", "_toolset", "_toolsets")

    def __init__(self, toolsets: Toolsets, toolset: str | None) -> None:
        self._toolsets = toolsets
        self._toolset = toolset
        self._allowed = toolsets.get(toolset) if toolset is not None else None
        self._runs: OrderedDict[tuple[object, ...], Caller] = OrderedDict()

    def caller(self, request: ServerRequestContext[Any, Any]) -> Caller | None:
        http = request.request
        scope = getattr(http, "scope", None)
        user = scope.get("user") if isinstance(scope, Mapping) else None
        if not isinstance(user, AuthenticatedUser) or not isinstance(user.access_token, IdentityToken):
            return None  # unreachable behind RequireAuthMiddleware; refused all the same
        identity = user.access_token.identity
        headers = getattr(http, "headers", None)
        # 2026-07-28 clients have no sessions: their calls share one run per identity.
        session = headers.get(MCP_SESSION_ID_HEADER) if headers is not None else None
        key = (session, identity)
        found = self._runs.get(key)
        if found is not None:
            self._runs.move_to_end(key)
            return found
        allowed, name = self._allowed, self._toolset
        if identity.toolset is not None:
            # A credential's toolset narrows the endpoint's; an unknown one allows nothing.
            own = self._toolsets.find(identity.toolset)
            allowed = own if allowed is None else allowed & own
            name = identity.toolset if name is None else f"{name}+{identity.toolset}"
        made = Caller(identity.context(), allowed, name)
        self._runs[key] = made
        if len(self._runs) > _MAX_RUNS:
            self._runs.popitem(last=False)
        return made


def _body_limit(gateway: Gateway) -> int:
    limits = next(
        (c.limits for c in gateway.catalog.pipeline.interceptors if isinstance(c, ArgumentValidation)),
        ArgumentLimits(),
    )
    return limits.max_bytes + ENVELOPE_BYTES


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security(host: str, allowed_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection for a server bound to ``host``.

    Loopback needs nothing more; any other address must name the Host headers it answers
    to (``allowed_hosts``, e.g. ``mcp.example.com`` or ``10.0.0.5:8080``). A name without a
    port is allowed with no port (the scheme's default) or any port, in ``Host`` and in a
    browser's ``Origin`` (``http://mcp.example.com:8765``); a name with one, on that port only.

    Raises:
        ConfigurationError: a non-loopback ``host`` without ``allowed_hosts``.
    """
    hosts, origins = list(_LOOPBACK_HOSTS), list(_LOOPBACK_ORIGINS)
    if not _is_loopback(host) and not allowed_hosts:
        raise ConfigurationError(
            f"serving on {host} (not loopback) needs the host names clients use: "
            "pass allowed_hosts (--allowed-host)"
        )
    for name in allowed_hosts:
        host, port = _host_and_port(name)
        if port is not None:  # exactly this port
            hosts.append(f"{host}:{port}")
            origins += [f"https://{host}:{port}", f"http://{host}:{port}"]
        else:  # the default port (a Host header without one) or any other
            hosts += [host, f"{host}:*"]
            origins += [f"https://{host}", f"http://{host}", f"https://{host}:*", f"http://{host}:*"]
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins)


def _host_and_port(name: str) -> tuple[str, str | None]:
    """``mcp.example.com`` -> (it, None); ``10.0.0.5:8080`` -> (``10.0.0.5``, ``8080``); an IPv6
    address, bare or in brackets, in brackets as Host headers write it."""
    if name.startswith("["):
        host, _, rest = name.partition("]")
        return f"{host}]", rest[1:] if rest.startswith(":") and rest[1:] else None
    if name.count(":") > 1:  # a bare IPv6 address
        return f"[{name}]", None
    host, _, port = name.partition(":")
    return host, port or None


@final
class McpHttpApp:
    """The governed MCP endpoint as an ASGI app, for uvicorn or a Starlette/FastAPI app.

    Serve it alone with `starlette`, or mount it in your own app: route it
    (``Route("/mcp", endpoint=app)``) and enter `lifespan` in your app's
    lifespan (a mounted app's own lifespan is not run by Starlette).
    """

    __slots__ = ("_endpoint", "_manager")

    def __init__(
        self,
        gateway: Gateway,
        authenticator: Authenticator,
        *,
        toolset: str | None = None,
        toolsets: Mapping[str, Iterable[str]] | None = None,
        host: str = "127.0.0.1",
        allowed_hosts: Sequence[str] = (),
        json_response: bool = False,
        name: str = "toolbox",
        instructions: str | None = None,
    ) -> None:
        """Args:
        gateway: the governed tools; its audit trail records every call.
        authenticator: turns each request's bearer token into an `Identity`
            (`toolbox.auth.authenticator_from_policy`).
        toolset: limit the endpoint to this toolset; a credential's own toolset narrows it further.
        toolsets: toolsets defined in code instead of the policy file's ``[mcp.toolsets]``.
        host: the address the server is bound to (for the Host/Origin checks).
        allowed_hosts: with a non-loopback ``host``, the host names clients connect with.
        json_response: answer with JSON instead of an SSE stream.
        name: the server name clients show.
        instructions: the server's instructions for the model.

        Raises:
            ConfigurationError: an unknown toolset, or a non-loopback host without allowed hosts.
        """
        security = transport_security(host, allowed_hosts)
        callers = _Callers(Toolsets(gateway.catalog, toolsets), toolset)
        mcp_server = build_server(gateway, callers, name=name, instructions=instructions)
        self._manager = StreamableHTTPSessionManager(
            app=mcp_server,
            json_response=json_response,
            security_settings=security,
            max_request_body_size=_body_limit(gateway),
        )
        required = RequireAuthMiddleware(StreamableHTTPASGIApp(self._manager), required_scopes=[])
        self._endpoint = AuthenticationMiddleware(
            AuthContextMiddleware(required), backend=BearerAuthBackend(IdentityVerifier(authenticator))
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The endpoint (any path): 401 without valid credentials, else the SDK's streamable HTTP."""
        await self._endpoint(scope, receive, send)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the session manager; enter once, in the lifespan of the app that serves this one."""
        async with self._manager.run():
            yield

    def starlette(self, path: str = "/mcp") -> Starlette:
        """A Starlette app serving the endpoint at ``path``, with the lifespan wired."""

        @asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            async with self.lifespan():
                yield

        return Starlette(routes=[Route(path, endpoint=self)], lifespan=lifespan)


def http_app(
    gateway: Gateway, authenticator: Authenticator, *, path: str = "/mcp", **options: Any
) -> Starlette:
    """A Starlette app serving ``gateway`` at ``path``; ``options`` as `McpHttpApp`."""
    return McpHttpApp(gateway, authenticator, **options).starlette(path)
