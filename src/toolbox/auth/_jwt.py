"""JWT bearer tokens, verified with PyJWT against a public key or a JWKS file.

Only asymmetric algorithms are accepted (`toolbox.auth._config.ASYMMETRIC_ALGORITHMS`),
so the verifier never holds a signing secret and the HMAC key-confusion attack
(a public key used as an HMAC secret) has nothing to work with. A token must
carry ``exp``, ``iss``, ``aud`` and ``sub``; ``sub`` is the principal, the
tenant, roles and toolset come from the configured claims. The key or JWKS
file is read again when it changes, so keys rotate without a restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from toolbox.auth._config import ASYMMETRIC_ALGORITHMS, JwtSettings
from toolbox.auth._identity import Identity, check_reference
from toolbox.errors import AuthenticationError, PolicyFileError

try:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key
except ImportError as _import_error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        'JWT verification needs PyJWT: pip install "toolbox-registry[service]" (or [mcp])'
    ) from _import_error

__all__ = ["MAX_TOKEN_LENGTH", "JwtAuthenticator"]

#: Longer tokens are refused before any parsing.
MAX_TOKEN_LENGTH = 16_384
_MAX_ROLES = 64
_MAX_KEY_FILE = 1_048_576


def _invalid(message: str) -> AuthenticationError:
    return AuthenticationError(message, reason_code="INVALID_CREDENTIALS")


def _read_text(path: Path, what: str) -> str:
    try:
        if path.stat().st_size > _MAX_KEY_FILE:
            raise PolicyFileError(f"{what} {str(path)!r} is larger than {_MAX_KEY_FILE} bytes")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyFileError(f"{what} {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read {what} {str(path)!r}: {exc.__class__.__name__}") from None


@final
@dataclass(frozen=True, slots=True)
class _Key:
    key: Any
    #: The algorithm the JWK names for itself (RFC 7517 "alg"), if any: then it is used for that one only.
    algorithm: str | None
    #: `Identity.key_ref` of the tokens this key verifies: a hash of the public key.
    ref: str = ""


def _key(key: Any, algorithm: str | None) -> _Key:
    spki = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return _Key(key, algorithm, hashlib.sha256(b"toolbox jwt key\n" + spki).hexdigest()[:32])


def _load_keys(settings: JwtSettings) -> dict[str | None, _Key]:
    """Verification keys by ``kid`` (None: the key of a ``key_file``, used for any token)."""
    if settings.key_file is not None:
        text = _read_text(settings.key_file, "JWT key file")
        try:
            return {None: _key(load_pem_public_key(text.encode("ascii")), None)}
        except (ValueError, TypeError, UnicodeEncodeError, AttributeError):
            raise PolicyFileError(
                f"JWT key file {str(settings.key_file)!r} must hold one PEM public key"
            ) from None
    assert settings.jwks_file is not None  # read_auth_section requires one of the two
    text = _read_text(settings.jwks_file, "JWKS file")
    where = f"JWKS file {str(settings.jwks_file)!r}"
    try:
        entries = json.loads(text).get("keys")
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise ValueError
        keys = [jwt.PyJWK(entry) for entry in entries]
    except (ValueError, AttributeError, jwt.PyJWTError):
        raise PolicyFileError(f"{where} is not a usable JWK set") from None
    found: dict[str | None, _Key] = {}
    for entry, key in zip(entries, keys, strict=True):
        if key.algorithm_name not in ASYMMETRIC_ALGORITHMS or "d" in entry or "k" in entry:
            raise PolicyFileError(f"{where}: only public keys of asymmetric algorithms are accepted")
        if key.key_id is None and len(keys) > 1:
            raise PolicyFileError(f"{where}: with several keys, each needs a kid")
        found[key.key_id] = _key(key.key, entry.get("alg"))
    return found


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _fits(key: object, algorithm: str) -> bool:
    """Whether ``key`` is of the family ``algorithm`` verifies with (RSA, elliptic curve, EdDSA)."""
    if algorithm.startswith(("RS", "PS")):
        return isinstance(key, rsa.RSAPublicKey)
    if algorithm.startswith("ES"):
        return isinstance(key, ec.EllipticCurvePublicKey)
    return isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey))


def _roles(value: object) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):  # an OAuth-style space-separated scope string
        value = value.split()
    if not isinstance(value, list) or len(value) > _MAX_ROLES:
        raise _invalid("the token's roles claim must be a list of strings")
    return frozenset(check_reference(role, "role") for role in value)


@final
class JwtAuthenticator:
    """An `Authenticator` for JWT bearer tokens (module docs: what is checked).

    Raises:
        PolicyFileError: at construction, when the key or JWKS file is missing or unusable.
    """

    __slots__ = ("_keys", "_lock", "_path", "_settings", "_stamp")

    def __init__(self, settings: JwtSettings) -> None:
        self._settings = settings
        path = settings.key_file or settings.jwks_file
        assert path is not None  # read_auth_section requires one of the two
        self._path: Path = path
        self._lock = threading.Lock()
        self._stamp = _stamp(self._path)
        self._keys: dict[str | None, _Key] | None = _load_keys(settings)

    def _current_keys(self) -> dict[str | None, _Key] | None:
        stamp = _stamp(self._path)
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    try:
                        self._keys = _load_keys(self._settings)
                    except PolicyFileError:
                        self._keys = None  # fail closed until the file is usable again
                    self._stamp = stamp
        return self._keys

    def _key_for(self, header: Mapping[str, Any]) -> _Key:
        keys = self._current_keys()
        if not keys:
            raise _invalid("no usable verification key is configured")
        if self._settings.key_file is not None:  # one PEM key, used for any token
            return keys[None]
        kid = header.get("kid")
        if kid is None and len(keys) == 1:
            kid = next(iter(keys))
        # None stays a valid lookup: a JWKS of one key without a kid keys it by None.
        if not (kid is None or isinstance(kid, str)) or kid not in keys:
            raise _invalid("the token is signed with an unknown key")
        key = keys[kid]
        if key.algorithm is not None and key.algorithm != header.get("alg"):
            raise _invalid("the token's algorithm does not match its key")
        return key

    def authenticate(self, token: str, /) -> Identity:
        """The identity a valid token proves; `AuthenticationError` otherwise, whatever the token.

        No token, however malformed (its ``alg`` naming another family than its key's, a
        header or claims of unexpected types), raises anything else: an error the verifier
        did not foresee is a refusal too (``INVALID_CREDENTIALS``), never a crash of the
        request (a 500 that nobody audits).
        """
        try:
            return self._verify(token)
        except AuthenticationError:
            raise
        except Exception:  # noqa: BLE001 - any other failure on a presented token is a refusal
            raise _invalid("the token is not valid") from None

    def _verify(self, token: str) -> Identity:
        settings = self._settings
        if not token:
            raise AuthenticationError("no token was presented", reason_code="MISSING_CREDENTIALS")
        if len(token) > MAX_TOKEN_LENGTH:
            raise _invalid("the token is too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _invalid("the token is not a well-formed JWT") from None
        algorithm = header.get("alg")
        if algorithm not in settings.algorithms:
            raise _invalid("the token's signing algorithm is not accepted")
        key = self._key_for(header)
        if not _fits(key.key, algorithm):
            # PyJWT raises TypeError when asked to verify, say, RS256 with an EC key.
            raise _invalid("the token's algorithm does not match its key")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_seconds,
                options={"require": ["exp", "iss", "aud", "sub"], "strict_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise AuthenticationError("the token has expired", reason_code="EXPIRED") from None
        except jwt.InvalidAudienceError:
            raise AuthenticationError(
                "the token is for another audience", reason_code="WRONG_AUDIENCE"
            ) from None
        except jwt.InvalidIssuerError:
            raise AuthenticationError(
                "the token is from another issuer", reason_code="WRONG_ISSUER"
            ) from None
        except jwt.PyJWTError:
            raise _invalid("the token is not valid") from None
        toolset = claims.get(settings.toolset_claim)
        return Identity(
            tenant=check_reference(claims.get(settings.tenant_claim), "tenant"),
            principal=check_reference(claims.get("sub"), "subject"),
            roles=_roles(claims.get(settings.roles_claim)),
            toolset=None if toolset is None else check_reference(toolset, "toolset"),
            credential=f"jwt:{settings.issuer}",
            expires_at=float(claims["exp"]) + settings.leeway_seconds,  # as long as it is accepted
            key_ref=key.ref,
        )

    def still_valid(self, identity: Identity, /) -> bool:
        """Whether ``identity``'s token is unexpired and its key still configured (`CredentialCheck`).

        A token cannot be revoked on its own: removing its signing key from the key or JWKS
        file (or replacing the key file) is how a key, and everything it signed, is revoked.
        """
        keys = self._current_keys()
        return (
            keys is not None
            and identity.credential == f"jwt:{self._settings.issuer}"
            and identity.expires_at is not None
            and identity.expires_at > time.time()
            and identity.key_ref is not None
            and any(key.ref == identity.key_ref for key in keys.values())
        )
