"""Credentials to trusted identities: API keys and JWT bearer tokens.

The service (`toolbox serve`) and the MCP HTTP endpoint (`toolbox mcp serve`)
authenticate every request with the authenticator the policy file's ``[auth]``
section configures (`toolbox.auth._config`), and build each call's
`ExecutionContext` from the resulting `Identity`, never from the request body::

    [auth]
    api_keys = "keys.toml"            # toolbox.auth._keys: SHA-256 hashes only
    [auth.jwt]                        # toolbox.auth._jwt: PyJWT, asymmetric algorithms only
    issuer = "https://idp.example"
    audience = "toolbox"
    jwks_file = "jwks.json"

With both configured, a token shaped like a JWT (three dot-separated parts) is
verified as one, anything else as an API key.
"""

from __future__ import annotations

import re
from typing import final

from toolbox.auth._config import AuthSettings
from toolbox.auth._identity import Authenticator, CredentialCheck, Identity
from toolbox.auth._keys import ApiKeyFile, hash_api_key, new_api_key
from toolbox.errors import AuthenticationError
from toolbox.registry._policy import ToolPolicy

__all__ = [
    "ApiKeyFile",
    "AuthenticationError",
    "Authenticator",
    "CredentialAuthenticator",
    "CredentialCheck",
    "Identity",
    "authenticator_from_policy",
    "authenticator_from_settings",
    "bearer_token",
    "hash_api_key",
    "new_api_key",
]

# RFC 6750 b64token; anything else in an Authorization header is refused before any lookup.
_BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*)$")
_EMPTY_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] *")
_MAX_HEADER = 16_500


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value.

    Raises:
        AuthenticationError: ``MISSING_CREDENTIALS`` without a header or with an empty token
            (``Bearer`` alone), ``INVALID_CREDENTIALS`` for any other scheme or a malformed token.
    """
    if not authorization or _EMPTY_BEARER.fullmatch(authorization):
        raise AuthenticationError("no credentials were presented", reason_code="MISSING_CREDENTIALS")
    match = _BEARER.fullmatch(authorization) if len(authorization) <= _MAX_HEADER else None
    if match is None:
        raise AuthenticationError(
            "credentials must be sent as 'Authorization: Bearer <token>'", reason_code="INVALID_CREDENTIALS"
        )
    return match.group(1)


def _looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2


@final
class CredentialAuthenticator:
    """API keys, JWTs or both: the `Authenticator` an ``[auth]`` section describes."""

    __slots__ = ("_jwt", "_keys")

    def __init__(self, *, api_keys: Authenticator | None = None, jwt: Authenticator | None = None) -> None:
        if api_keys is None and jwt is None:
            raise ValueError("configure API keys, JWT verification, or both")
        self._keys = api_keys
        self._jwt = jwt

    def authenticate(self, token: str, /) -> Identity:
        """The identity ``token`` proves (a JWT when it looks like one and JWTs are configured)."""
        if not token:
            raise AuthenticationError("no credentials were presented", reason_code="MISSING_CREDENTIALS")
        if self._jwt is not None and (self._keys is None or _looks_like_jwt(token)):
            return self._jwt.authenticate(token)
        assert self._keys is not None
        return self._keys.authenticate(token)

    def still_valid(self, identity: Identity, /) -> bool:
        """Whether ``identity``'s credential still holds (`CredentialCheck`), asked of the
        authenticator that issued it. One of your own without ``still_valid`` cannot tell:
        True, and only the identity's ``expires_at`` bounds what is kept on its strength."""
        issuer = self._jwt if identity.credential.startswith("jwt:") else self._keys
        if issuer is None:
            return False
        check = getattr(issuer, "still_valid", None)
        return bool(check(identity)) if callable(check) else True


def authenticator_from_settings(settings: AuthSettings) -> CredentialAuthenticator:
    """The authenticator for a validated ``[auth]`` section.

    Raises:
        PolicyFileError: a key, key or JWKS file is missing or malformed.
        ImportError: JWT verification is configured but PyJWT is not installed.
    """
    api_keys = ApiKeyFile(settings.api_keys) if settings.api_keys is not None else None
    verifier: Authenticator | None = None
    if settings.jwt is not None:
        from toolbox.auth._jwt import JwtAuthenticator

        verifier = JwtAuthenticator(settings.jwt)
    return CredentialAuthenticator(api_keys=api_keys, jwt=verifier)


def authenticator_from_policy(policy: ToolPolicy) -> CredentialAuthenticator | None:
    """The authenticator of the policy's ``[auth]`` section, or None when it has none."""
    settings = policy.governance.get("auth")
    if settings is None:
        return None
    assert isinstance(settings, AuthSettings)
    return authenticator_from_settings(settings)
