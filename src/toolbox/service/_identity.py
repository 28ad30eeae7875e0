"""Who is calling: the bearer credential turned into a trusted `Identity`, and the 401 problem.

The service never trusts a tenant, principal or role from a request body, a
query or a header other than ``Authorization``: the `Authenticator`
(`toolbox.auth`) turns the credential into an identity, and the identity
builds the `ExecutionContext` every call runs in.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from toolbox.audit._events import new_event_id
from toolbox.auth import AuthenticationError, Authenticator, Identity, bearer_token
from toolbox.service._problems import Problem

__all__ = ["ROLES", "Authenticator", "Identity", "new_trace_id", "unauthorized"]

#: The roles the service knows: ``caller`` invokes tools, ``approver`` decides approvals,
#: ``auditor`` reads the audit trail, ``admin`` works the kill switch.
ROLES = ("caller", "approver", "auditor", "admin")
_REASONS = frozenset(
    {"MISSING_CREDENTIALS", "INVALID_CREDENTIALS", "EXPIRED", "WRONG_AUDIENCE", "WRONG_ISSUER"}
)
_DETAILS = {
    "MISSING_CREDENTIALS": "send Authorization: Bearer <API key or token>",
    "INVALID_CREDENTIALS": "the credential is not valid",
    "EXPIRED": "the credential has expired",
    "WRONG_AUDIENCE": "the token is not meant for this service",
    "WRONG_ISSUER": "the token's issuer is not trusted",
}


def new_trace_id() -> str:
    """A fresh run id (what the service calls a trace id): a version-7 UUID as 32 hex digits.

    Time-ordered like the audit's event ids (48 bits of milliseconds, 74 random bits): a
    durable audit store keys each trace's head by it, so a commit's new heads land in the
    last page of that index instead of one random page each, every one of them written and
    flushed again (a quarter of a SQLite group commit's CPU with random ids).
    """
    return new_event_id()


def token_of(connection: HTTPConnection) -> str:
    """The bearer token of the request (`AuthenticationError` when there is none or it is malformed)."""
    return bearer_token(connection.headers.get("authorization"))


def unauthorized(reason_code: str, trace_id: str) -> Problem:
    """The 401 problem of a refused credential, with the ``WWW-Authenticate`` challenge."""
    reason = reason_code if reason_code in _REASONS else "INVALID_CREDENTIALS"
    return Problem(
        401,
        reason,
        _DETAILS[reason],
        rule=AuthenticationError.rule,  # "auth", as every refused credential says (docs/auth.md)
        trace_id=trace_id,
        headers={"WWW-Authenticate": 'Bearer realm="toolbox"'},
    )
