"""Console sessions and CSRF tokens: signed, short-lived, never holding the credential.

After a login with an API key or token, the console keeps the resulting
identity (tenant, principal, roles, the credential's label, its expiry and
key fingerprint) in a cookie signed with HMAC-SHA256 under the service
secret: ``HttpOnly``, ``SameSite=Strict``, ``Path=/console`` and ``Secure`` on
TLS. The key or token itself is never stored. A session never outlives its
credential: it ends at the session TTL or the credential's own expiry,
whichever comes first, and every request asks the authenticator whether the
credential still holds (`toolbox.auth.CredentialCheck`: the key not revoked,
replaced or changed). Every form carries a CSRF token bound to the session id
(or, on the login form, to a pre-login nonce cookie).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from starlette.requests import HTTPConnection
from starlette.responses import Response

from toolbox.auth import Identity
from toolbox.auth._identity import check_reference
from toolbox.errors import AuthenticationError

__all__ = ["LOGIN_COOKIE", "SESSION_COOKIE", "ConsoleSession", "Sessions"]

SESSION_COOKIE = "toolbox_session"
LOGIN_COOKIE = "toolbox_login"
_PATH = "/console"
_MAX_COOKIE = 4096


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@final
@dataclass(frozen=True)
class ConsoleSession:
    """A signed-in operator: who, and the session id their CSRF tokens are bound to."""

    identity: Identity
    session_id: str
    expires_at: float


@final
class Sessions:
    """Issues and reads session cookies and CSRF tokens under one key."""

    __slots__ = ("_force_secure", "_key", "_still_valid", "_ttl")

    def __init__(
        self,
        key: bytes,
        *,
        ttl: float,
        force_secure: bool,
        still_valid: Callable[[Identity], bool] | None = None,
    ) -> None:
        self._key = key
        self._ttl = ttl
        self._force_secure = force_secure
        #: Asked on every request: does the session's credential still hold? (None: cannot tell.)
        self._still_valid = still_valid

    def _sign(self, purpose: str, payload: str) -> str:
        return _b64(hmac.new(self._key, f"{purpose}\n{payload}".encode(), hashlib.sha256).digest())

    def _secure(self, connection: HTTPConnection) -> bool:
        return self._force_secure or connection.url.scheme == "https"

    def _set(
        self, response: Response, connection: HTTPConnection, name: str, value: str, max_age: int
    ) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=_PATH,
            httponly=True,
            samesite="strict",
            secure=self._secure(connection),
        )

    # -- sessions -------------------------------------------------------------------------

    def start(self, response: Response, connection: HTTPConnection, identity: Identity) -> None:
        """Sign ``identity`` in: set the session cookie, drop the login nonce.

        The session ends at the TTL or when the credential expires, whichever is first.
        """
        now = time.time()
        ends = now + self._ttl
        if identity.expires_at is not None:
            ends = min(ends, identity.expires_at)
        payload = _b64(
            json.dumps(
                {
                    "t": identity.tenant,
                    "p": identity.principal,
                    "r": sorted(identity.roles),
                    "s": identity.toolset,
                    "c": identity.credential,
                    "x": identity.expires_at,
                    "k": identity.key_ref,
                    "i": secrets.token_hex(16),
                    "e": ends,
                },
                separators=(",", ":"),
            ).encode()
        )
        self._set(
            response,
            connection,
            SESSION_COOKIE,
            f"{payload}.{self._sign('session', payload)}",
            max(1, math.ceil(ends - now)),
        )
        self._set(response, connection, LOGIN_COOKIE, "", 0)

    def end(self, response: Response, connection: HTTPConnection) -> None:
        """Sign out: expire the session cookie."""
        self._set(response, connection, SESSION_COOKIE, "", 0)

    def read(self, connection: HTTPConnection) -> ConsoleSession | None:
        """The valid, unexpired session of the request, or None."""
        cookie = connection.cookies.get(SESSION_COOKIE)
        if not cookie or len(cookie) > _MAX_COOKIE or cookie.count(".") != 1:
            return None
        payload, signature = cookie.split(".")
        if not hmac.compare_digest(signature, self._sign("session", payload)):
            return None
        try:
            data = json.loads(_unb64(payload))
            roles = frozenset(check_reference(role, "role") for role in data["r"])
            identity = Identity(
                tenant=check_reference(data["t"], "tenant"),
                principal=check_reference(data["p"], "principal"),
                roles=roles,
                toolset=None if data["s"] is None else check_reference(data["s"], "toolset"),
                credential=check_reference(data["c"], "credential"),
                expires_at=None if data["x"] is None else float(data["x"]),
                key_ref=None if data["k"] is None else str(data["k"]),
            )
            session_id, expires_at = str(data["i"]), float(data["e"])
        except (ValueError, KeyError, TypeError, binascii.Error, AuthenticationError):
            return None
        if expires_at <= time.time():
            return None
        if self._still_valid is not None and not self._still_valid(identity):
            return None  # the key was revoked, replaced or changed since the login
        return ConsoleSession(identity, session_id, expires_at)

    # -- CSRF -----------------------------------------------------------------------------

    def csrf_token(self, session: ConsoleSession) -> str:
        """The CSRF token every form of ``session`` carries."""
        return self._sign("csrf", session.session_id)

    def csrf_ok(self, session: ConsoleSession, token: object) -> bool:
        """Whether ``token`` is this session's CSRF token."""
        return isinstance(token, str) and hmac.compare_digest(token, self.csrf_token(session))

    def login_nonce(self) -> tuple[str, str]:
        """A fresh pre-login nonce and the login form's CSRF token for it."""
        nonce = secrets.token_hex(16)
        return nonce, self._sign("login", nonce)

    def set_login_nonce(self, response: Response, connection: HTTPConnection, nonce: str) -> None:
        """Set the pre-login nonce cookie the login form's token is bound to."""
        self._set(response, connection, LOGIN_COOKIE, nonce, 900)

    def login_csrf_ok(self, connection: HTTPConnection, token: object) -> bool:
        """Whether ``token`` matches the request's login nonce cookie."""
        nonce = connection.cookies.get(LOGIN_COOKIE)
        return (
            bool(nonce)
            and isinstance(token, str)
            and len(nonce or "") <= 64
            and hmac.compare_digest(token, self._sign("login", nonce or ""))
        )
