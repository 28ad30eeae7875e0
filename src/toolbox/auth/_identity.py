"""Who an authenticated caller is: the `Identity` a credential maps to.

An identity is what a service or an MCP endpoint turns into the trusted
`ExecutionContext` of each call. It comes only from a verified credential
(`toolbox.auth`), never from a request body or model output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, final

from toolbox.errors import AuthenticationError
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._line_text import breaks_line

__all__ = ["Authenticator", "CredentialCheck", "Identity", "check_reference"]

#: The longest tenant, principal, role or toolset a credential may name (as `ExecutionContext`).
MAX_REFERENCE = 256


def check_reference(value: object, what: str) -> str:
    """``value`` if it can stand in a context, else an `AuthenticationError` naming ``what`` only."""
    if not isinstance(value, str) or not value or len(value) > MAX_REFERENCE or breaks_line(value):
        raise AuthenticationError(
            f"the credential's {what} is not a usable reference", reason_code="INVALID_CREDENTIALS"
        )
    return value


@final
@dataclass(frozen=True, slots=True)
class Identity:
    """The tenant, principal and roles a verified credential stands for.

    Attributes:
        tenant: the tenant the caller acts for.
        principal: the authenticated user or service.
        roles: the caller's roles (for the service: ``caller``, ``approver``, ``auditor``, ``admin``).
        toolset: a named subset of tools the credential is limited to, or None for no limit.
        credential: a label safe to log and audit (``api-key:<id>``, ``jwt:<issuer>``); never
            the secret itself.
        expires_at: when the credential stops being valid (Unix time: a JWT's ``exp``, an API
            key's ``expires``), or None when it does not expire. Anything kept on the strength
            of it, such as a console session, ends then.
        key_ref: a fingerprint of the key the credential was checked against (a hash of the
            stored key hash, of the JWT verification key), never a secret: `CredentialCheck`
            compares it to tell a revoked or replaced key. Neither it nor ``expires_at`` makes
            two identities differ: a renewed token is the same caller.
    """

    tenant: str
    principal: str
    roles: frozenset[str]
    toolset: str | None
    credential: str
    expires_at: float | None = field(default=None, compare=False)
    key_ref: str | None = field(default=None, compare=False)

    def context(self, **fields: Any) -> ExecutionContext:
        """The trusted context of a call by this caller; ``fields`` (``run_id``, ...) pass on.

        The context names the credential's label, so the audit trail records which key or
        token issuer each call came with.
        """
        return ExecutionContext(
            tenant=self.tenant,
            principal=self.principal,
            roles=self.roles,
            credential=self.credential,
            **fields,
        )


class CredentialCheck(Protocol):
    """An authenticator that can tell later whether an identity's credential still holds."""

    def still_valid(self, identity: Identity, /) -> bool:
        """Whether the credential behind ``identity`` is still good now: unexpired, and its key
        still configured, unchanged, for the same tenant, principal, roles and toolset."""


class Authenticator(Protocol):
    """Turns a presented token (an API key or a JWT) into an `Identity`."""

    def authenticate(self, token: str, /) -> Identity:
        """The identity ``token`` proves.

        Raises:
            AuthenticationError: the token is missing, malformed, unknown, expired or for
                another audience or issuer; the message never contains the token.
        """
