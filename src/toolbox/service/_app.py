"""`create_app`: the governance service as a FastAPI app (mount it, or run it under any ASGI server).

``toolbox serve`` builds it from a policy file (`toolbox.service._startup`). Every route but ``/healthz``
and ``/readyz`` needs a credential, ``/openapi.json`` included: there is no anonymous mode.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolbox.auth import Authenticator
from toolbox.errors import ConfigurationError
from toolbox.governance import Governance
from toolbox.pipeline._state_ports import ApprovalStore
from toolbox.registry._policy import ToolPolicy
from toolbox.service import _routes_approvals as routes_approvals
from toolbox.service import _routes_audit as routes_audit
from toolbox.service import _routes_health as routes_health
from toolbox.service import _routes_kill as routes_kill
from toolbox.service import _routes_tools as routes_tools
from toolbox.service import _routes_turns as routes_turns
from toolbox.service._access import AnyCaller
from toolbox.service._approvals import ApprovalDesk
from toolbox.service._audit_log import ServiceAudit
from toolbox.service._problems import install_problem_handlers
from toolbox.service._service import Service
from toolbox.service._serving import ServedGateway
from toolbox.service._settings import ServiceSettings

__all__ = ["create_app", "read_secret"]

LOGGER = logging.getLogger("toolbox.service")


def _derived(secret: bytes, purpose: bytes) -> bytes:
    return hmac.new(secret, b"toolbox service " + purpose, hashlib.sha256).digest()


def create_app(
    *,
    policy: ToolPolicy,
    authenticator: Authenticator,
    providers: Iterable[object] = (),
    discover: bool = True,
    env: Mapping[str, str] | None = None,
    governance: Governance | None = None,
    approvals: ApprovalStore | None = None,
    settings: ServiceSettings | None = None,
    console: bool = True,
    mcp_options: Mapping[str, Any] | None = None,
    turn_model: object | None = None,
) -> FastAPI:
    """The service over the tools ``policy`` allows, for callers ``authenticator`` accepts.

    Args:
        policy: decides every call; its ``[audit]`` builds the audit trail.
        authenticator: turns a bearer credential into an identity (`toolbox.auth`).
        providers: explicit providers, besides the installed ones when ``discover``.
        discover: load the ``toolbox.providers`` entry points.
        env: environment for acknowledgements and the kill-switch variable (default ``os.environ``).
        governance: the chain's configuration from code; its ``state`` (else the policy file's
            ``[state]``, else this process's memory) holds the kill switches and approvals.
        approvals: where approval requests are kept, overriding the state's.
        settings: the service's knobs; see `ServiceSettings`.
        console: serve the operator console under ``/console``.
        mcp_options: options of the MCP endpoint mounted at ``/mcp`` when `toolbox.mcp` is
            installed (e.g. ``host`` and ``allowed_hosts`` for its Host/Origin checks).
        turn_model: a pydantic-ai model (or model name) for ``POST /v1/turns``; None: no turns.
    """
    if authenticator is None or not callable(getattr(authenticator, "authenticate", None)):
        raise ConfigurationError("the service needs an authenticator: there is no anonymous mode")
    chosen = settings or ServiceSettings()
    served = ServedGateway(
        policy=policy,
        providers=tuple(providers),
        discover=discover,
        env=os.environ if env is None else env,
        governance=governance,
        approvals=approvals,
    )
    audit = ServiceAudit(served.audit)
    desk = ApprovalDesk(served.approvals, audit)
    service = Service(served, authenticator, chosen, desk, audit)

    mcp = _mcp_endpoint(served, authenticator, mcp_options or {})

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            if mcp is not None:
                async with mcp.lifespan():  # a routed app's own lifespan is not run by Starlette
                    yield
            else:
                yield
        finally:
            served.close()

    app = FastAPI(
        title="toolbox governance service",
        version="1",
        lifespan=lifespan,
        docs_url=None,  # the Swagger page loads its assets from a CDN
        redoc_url=None,
        openapi_url=None,  # served below, to authenticated callers only
    )

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_caller: AnyCaller) -> JSONResponse:
        """The OpenAPI document, for any authenticated caller: it maps every route and parameter."""
        return JSONResponse(app.openapi())

    app.state.service = service
    app.state.turns = None
    if turn_model is not None:
        from toolbox.service._turns import TurnRunner

        app.state.turns = TurnRunner(served.gateway, turn_model)
    install_problem_handlers(app)
    for module in (routes_tools, routes_turns, routes_audit, routes_approvals, routes_kill, routes_health):
        app.include_router(module.router)
    if console:
        from toolbox.service._console import mount_console

        mount_console(app, _derived(chosen.secret, b"console"))
    if mcp is not None:
        app.router.routes.append(Route("/mcp", endpoint=mcp))
    return app


def _mcp_endpoint(served: ServedGateway, authenticator: Authenticator, options: Mapping[str, Any]) -> Any:
    """The MCP endpoint (`toolbox.mcp.McpHttpApp` over the same gateway), or None without the extra.

    `toolbox.mcp` needs the MCP SDK (``toolbox-registry[mcp]``); it is imported by name, so the
    service neither needs that extra nor breaks without it.
    """
    try:
        spec = importlib.util.find_spec("toolbox.mcp")
    except ImportError:  # the room exists but its SDK is not installed
        return None
    if spec is None:
        return None
    try:
        module: Any = importlib.import_module("toolbox.mcp")
    except ImportError:
        LOGGER.info("toolbox.mcp is present but its extra is not installed; /mcp is not served")
        return None
    factory = getattr(module, "McpHttpApp", None)
    if factory is None:
        LOGGER.info("toolbox.mcp has no McpHttpApp; /mcp is not served")
        return None
    return factory(served.gateway, authenticator, **options)


def read_secret(path: str | os.PathLike[str]) -> bytes:
    """The service secret from a file (at least 16 bytes; surrounding whitespace is dropped)."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the service secret file {str(path)!r}: {exc.strerror}"
        ) from None
    if len(secret) < 16:
        raise ConfigurationError(f"the service secret file {str(path)!r} must hold at least 16 bytes")
    return secret
