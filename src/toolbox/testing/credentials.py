"""Test credentials: a key file with known keys, a key pair, JWKS files and minted JWTs.

For tests of code behind `toolbox.auth` (the service, the MCP HTTP endpoint)::

    keys = write_api_keys(tmp_path / "keys.toml", {"alice": {"tenant": "acme", "roles": ["caller"]}})
    private_pem, public_pem = jwt_keypair()
    token = mint_jwt(private_pem, issuer="https://idp.test", audience="toolbox", subject="bob",
                     tenant="acme", roles=["auditor"])

PyJWT and cryptography (the ``[service]`` / ``[mcp]`` extras) are imported only
by the JWT helpers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolbox.auth._keys import new_api_key

__all__ = ["jwt_keypair", "mint_jwt", "write_api_keys", "write_jwks"]


def _toml(value: object) -> str:
    if isinstance(value, (list, tuple, frozenset, set)):
        return "[" + ", ".join(_toml(v) for v in sorted(value)) + "]"
    return json.dumps(value)


def write_api_keys(path: Path, entries: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Write a key file with one fresh key per id; return each id's plaintext key.

    Each entry gives ``tenant`` and optionally ``principal`` (default: the id), ``roles``,
    ``toolset`` and ``expires`` (a TOML date-time literal, e.g. ``"2020-01-01T00:00:00Z"``).
    """
    keys: dict[str, str] = {}
    lines: list[str] = []
    for key_id, entry in entries.items():
        key, digest = new_api_key()
        keys[key_id] = key
        lines += [f"[keys.{key_id}]", f'sha256 = "{digest}"']
        lines.append(f"tenant = {_toml(entry['tenant'])}")
        lines.append(f"principal = {_toml(entry.get('principal', key_id))}")
        lines.append(f"roles = {_toml(list(entry.get('roles', ())))}")
        if "toolset" in entry:
            lines.append(f"toolset = {_toml(entry['toolset'])}")
        if "expires" in entry:
            lines.append(f"expires = {entry['expires']}")
        lines.append("")
    # Written to a new file and renamed over the old one, as an operator rotates keys.
    staging = path.with_name(path.name + ".new")
    staging.write_text("\n".join(lines), encoding="utf-8")
    staging.replace(path)
    return keys


def jwt_keypair(algorithm: str = "ES256") -> tuple[str, str]:
    """A fresh (private PEM, public PEM) pair for ``ES256`` or ``RS256``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    private: Any
    if algorithm == "ES256":
        private = ec.generate_private_key(ec.SECP256R1())
    elif algorithm == "RS256":
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        raise ValueError("jwt_keypair makes ES256 or RS256 keys")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )
    return private_pem, public_pem


def write_jwks(path: Path, public_pems: Mapping[str, str], *, algorithm: str | None = None) -> None:
    """Write a JWKS file holding ``public_pems`` by kid (each JWK names ``algorithm`` when given)."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    keys = []
    for kid, pem in public_pems.items():
        public: Any = load_pem_public_key(pem.encode("ascii"))
        if isinstance(public, ec.EllipticCurvePublicKey):
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(public))
        else:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))
        jwk["kid"] = kid
        if algorithm is not None:
            jwk["alg"] = algorithm
        keys.append(jwk)
    path.write_text(json.dumps({"keys": keys}), encoding="utf-8")


def mint_jwt(
    private_pem: str,
    *,
    issuer: str,
    audience: str,
    subject: str,
    tenant: str | None = None,
    roles: Iterable[str] = (),
    expires_in: float = 300.0,
    algorithm: str = "ES256",
    kid: str | None = None,
    **claims: Any,
) -> str:
    """A signed JWT with ``iss``, ``aud``, ``sub``, ``exp`` (``expires_in`` from now; negative: expired)."""
    import jwt

    now = int(time.time())
    payload: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "iat": now,
        "exp": now + int(expires_in),
        "roles": list(roles),
        **claims,
    }
    if tenant is not None:
        payload["tenant"] = tenant
    headers = {"kid": kid} if kid is not None else None
    key = _private_key(private_pem) if private_pem.lstrip().startswith("-----BEGIN") else private_pem
    return jwt.encode(payload, key, algorithm=algorithm, headers=headers)


@lru_cache(maxsize=32)
def _private_key(private_pem: str) -> Any:
    """The loaded key of a PEM, once: PyJWT would re-read (and check) the text at every
    signature, about 30 ms for an RSA key."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    return load_pem_private_key(private_pem.encode("ascii"), password=None)
