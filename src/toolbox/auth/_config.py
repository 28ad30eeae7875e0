"""The ``[auth]`` section of a policy file: where credentials are checked.

Read and validated when the policy file loads (a bad section fails at load, not
on the first request); `toolbox.auth` builds the authenticators from it.
Paths are resolved against the policy file's directory. The section names
files and settings only: keys and token secrets never sit in the policy file.

    [auth]
    api_keys = "keys.toml"            # a file of SHA-256 hashes of API keys
    [auth.jwt]
    issuer = "https://idp.example"
    audience = "toolbox"
    jwks_file = "jwks.json"           # or key_file = "public.pem"
    algorithms = ["RS256"]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import final

from toolbox.foundations._table_reader import TableReader

__all__ = ["ASYMMETRIC_ALGORITHMS", "AuthSettings", "JwtSettings", "read_auth_section"]

# Only public-key algorithms: the service never holds a token-signing secret, and refusing the
# HMAC family rules out the classic key-confusion attack (a public key used as an HMAC secret).
ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
#: The most clock skew a token's expiry may be given (``leeway_seconds``).
MAX_LEEWAY_SECONDS = 300
_CLAIM = r"^[A-Za-z_][A-Za-z0-9_.:/-]{0,63}$"


@final
@dataclass(frozen=True)
class JwtSettings:
    """How JWT bearer tokens are verified (see `toolbox.auth.JwtAuthenticator`)."""

    issuer: str
    audience: str
    key_file: Path | None = None
    jwks_file: Path | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256", "EdDSA")
    leeway_seconds: int = 0
    tenant_claim: str = "tenant"
    roles_claim: str = "roles"
    toolset_claim: str = "toolset"


@final
@dataclass(frozen=True)
class AuthSettings:
    """The validated ``[auth]`` section: an API key file, JWT settings, or both."""

    api_keys: Path | None = None
    jwt: JwtSettings | None = None


def read_auth_section(table: TableReader, directory: Path) -> AuthSettings:
    """Validate ``[auth]``; relative paths are taken from ``directory``.

    Raises:
        PolicyFileError: an unknown key, a wrong type, an empty section, or both or
            neither of ``key_file`` / ``jwks_file``.
    """
    table.only(("api_keys", "jwt"))
    api_keys = table.optional_string("api_keys")
    if api_keys is not None and not api_keys:
        raise table.error("api_keys", "must not be empty")
    jwt = _jwt(table.table("jwt"), directory) if "jwt" in table else None
    if api_keys is None and jwt is None:
        raise table.error("", "names no credentials: set api_keys, [auth.jwt], or both")
    return AuthSettings(api_keys=directory / api_keys if api_keys else None, jwt=jwt)


def _jwt(table: TableReader, directory: Path) -> JwtSettings:
    table.only(
        (
            "issuer",
            "audience",
            "key_file",
            "jwks_file",
            "algorithms",
            "leeway_seconds",
            "tenant_claim",
            "roles_claim",
            "toolset_claim",
        )
    )
    issuer = table.string("issuer")
    audience = table.string("audience")
    for name, text in (("issuer", issuer), ("audience", audience)):
        if not text.strip():
            raise table.error(name, "must not be empty")
    key_file = table.optional_string("key_file")
    jwks_file = table.optional_string("jwks_file")
    if (key_file is None) == (jwks_file is None):
        raise table.error("", "needs exactly one of key_file (a PEM public key) or jwks_file")
    for name, path in (("key_file", key_file), ("jwks_file", jwks_file)):
        if path is not None and not path:
            raise table.error(name, "must not be empty")
    algorithms = table.strings("algorithms", choices=ASYMMETRIC_ALGORITHMS, what="algorithm")
    claims = {
        key: table.string(key, default, pattern=_CLAIM, what="claim name")
        for key, default in (
            ("tenant_claim", "tenant"),
            ("roles_claim", "roles"),
            ("toolset_claim", "toolset"),
        )
    }
    leeway = table.integer("leeway_seconds", 0, minimum=0)
    if leeway > MAX_LEEWAY_SECONDS:
        # Clock skew is seconds; a leeway of hours would quietly make expiry meaningless.
        raise table.error(
            "leeway_seconds", f"must be at most {MAX_LEEWAY_SECONDS} (clock skew, not a lifetime)"
        )
    return JwtSettings(
        issuer=issuer,
        audience=audience,
        key_file=directory / key_file if key_file else None,
        jwks_file=directory / jwks_file if jwks_file else None,
        algorithms=tuple(algorithms) or ("RS256", "ES256", "EdDSA"),
        leeway_seconds=leeway,
        **claims,
    )
