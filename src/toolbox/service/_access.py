"""Authentication and role checks as FastAPI dependencies; every refusal is audited."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, final

from fastapi import Depends
from starlette.requests import HTTPConnection

from toolbox.auth import AuthenticationError, Identity
from toolbox.service._identity import new_trace_id, token_of, unauthorized
from toolbox.service._problems import Problem
from toolbox.service._service import Service, service_of

LOGGER = logging.getLogger("toolbox.service")

__all__ = [
    "AnyCaller",
    "AsAdmin",
    "AsApprover",
    "AsAuditor",
    "AsCaller",
    "Caller",
    "authenticate",
    "authenticate_token",
    "check_role",
    "require_role",
]


@final
@dataclass(frozen=True)
class Caller:
    """An authenticated request: the identity and the trace id of this request."""

    identity: Identity
    trace_id: str


def route_of(connection: HTTPConnection) -> str:
    """``METHOD /route/{template}``: what audit events name (never the raw, caller-chosen path)."""
    route = connection.scope.get("route")
    path = getattr(route, "path", None) or "unrouted"
    return f"{connection.scope.get('method', 'GET')} {path}"


async def authenticate_token(service: Service, token: str | None, route: str, trace_id: str) -> Identity:
    """The identity of ``token`` (None: none was presented), or an audited 401 problem.

    An authenticator that fails otherwise than with `AuthenticationError` (a bug, or a token
    it did not foresee) refuses too: ``INVALID_CREDENTIALS``, audited, never a 500.
    """
    try:
        if token is None:
            raise AuthenticationError("no credentials were presented", reason_code="MISSING_CREDENTIALS")
        return service.authenticator.authenticate(token)
    except AuthenticationError as exc:
        reason = exc.reason_code
    except Exception as exc:  # noqa: BLE001 - fail closed; the type only: the message may quote the token
        LOGGER.error("the authenticator failed (%s): the credential is refused", type(exc).__name__)
        reason = "INVALID_CREDENTIALS"
    await service.audit.refused(route, reason, AuthenticationError.rule, trace_id=trace_id)
    # The reason code says enough; the authenticator's message is not echoed.
    raise unauthorized(reason, trace_id) from None


async def authenticate(connection: HTTPConnection) -> Caller:
    """Dependency: the authenticated caller (any role)."""
    service = service_of(connection)
    trace_id = new_trace_id()
    try:
        token: str | None = token_of(connection)
    except AuthenticationError as exc:
        await service.audit.refused(
            route_of(connection), exc.reason_code, AuthenticationError.rule, trace_id=trace_id
        )
        raise unauthorized(exc.reason_code, trace_id) from None
    identity = await authenticate_token(service, token, route_of(connection), trace_id)
    # Which key or issuer made the request, beside its trace: what the audit events also record.
    LOGGER.info(
        "%s authenticated %s (tenant %r), trace %s",
        route_of(connection),
        identity.credential,
        identity.tenant,
        trace_id,
    )
    return Caller(identity, trace_id)


async def check_role(service: Service, caller: Caller, role: str, route: str) -> None:
    """Raise an audited 403 unless ``caller`` has ``role``."""
    if role in caller.identity.roles:
        return
    rule = f"service:role:{role}"
    await service.audit.refused(
        route, "ROLE_REQUIRED", rule, trace_id=caller.trace_id, identity=caller.identity
    )
    raise Problem(403, "ROLE_REQUIRED", f"this needs the {role} role", rule=rule, trace_id=caller.trace_id)


def require_role(role: str) -> Callable[[HTTPConnection], Awaitable[Caller]]:
    """Dependency factory: the authenticated caller, who must have ``role``."""

    async def dependency(connection: HTTPConnection) -> Caller:
        caller = await authenticate(connection)
        await check_role(service_of(connection), caller, role, route_of(connection))
        return caller

    return dependency


#: The caller of a route that authenticates in its body (the `AsCaller` dependency's own check).
as_caller = require_role("caller")

#: Route parameter types: the authenticated caller, with the role the route needs.
AnyCaller = Annotated[Caller, Depends(authenticate)]
AsCaller = Annotated[Caller, Depends(as_caller)]
AsApprover = Annotated[Caller, Depends(require_role("approver"))]
AsAuditor = Annotated[Caller, Depends(require_role("auditor"))]
AsAdmin = Annotated[Caller, Depends(require_role("admin"))]
