"""Security review of `toolbox.auth`: JWT header tricks and key selection."""

from __future__ import annotations

import json

import pytest

from toolbox.auth._config import JwtSettings
from toolbox.auth._jwt import JwtAuthenticator
from toolbox.errors import AuthenticationError
from toolbox.testing.credentials import jwt_keypair, mint_jwt, write_jwks

ISSUER, AUDIENCE = "https://idp.test", "toolbox"


def _kidless_jwks(tmp_path, public: str):
    path = tmp_path / "jwks.json"
    write_jwks(path, {"only": public})
    document = json.loads(path.read_text())
    del document["keys"][0]["kid"]
    path.write_text(json.dumps(document))
    return JwtAuthenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=path))


def test_a_jwks_of_one_key_without_kid_verifies_tokens_without_kid(tmp_path):
    """A one-key JWKS needs no kid (only several keys do); its tokens were all refused."""
    private, public = jwt_keypair("ES256")
    authenticator = _kidless_jwks(tmp_path, public)
    token = mint_jwt(private, issuer=ISSUER, audience=AUDIENCE, subject="bob", tenant="acme")
    assert authenticator.authenticate(token).principal == "bob"


@pytest.mark.parametrize("kid", ["only", "../../etc/passwd", "x' OR '1'='1"])
def test_a_kid_never_selects_the_kidless_key_nor_reaches_a_path(tmp_path, kid):
    """A token naming any kid is refused by a JWKS whose one key has none."""
    private, public = jwt_keypair("ES256")
    authenticator = _kidless_jwks(tmp_path, public)
    token = mint_jwt(private, issuer=ISSUER, audience=AUDIENCE, subject="bob", tenant="acme", kid=kid)
    with pytest.raises(AuthenticationError) as caught:
        authenticator.authenticate(token)
    assert caught.value.reason_code == "INVALID_CREDENTIALS"
    assert token not in str(caught.value)


def test_an_embedded_jwk_or_jku_never_replaces_the_configured_key(tmp_path):
    """``jwk``/``jku``/``x5u`` headers naming the attacker's own key are ignored: the signature fails."""
    import jwt
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    _, public = jwt_keypair("ES256")
    path = tmp_path / "public.pem"
    path.write_text(public)
    authenticator = JwtAuthenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=path))
    attacker, attacker_public = jwt_keypair("ES256")
    embedded = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(load_pem_public_key(attacker_public.encode())))
    for header in ({"jwk": embedded}, {"jku": "http://127.0.0.1:1/jwks"}, {"x5u": "http://127.0.0.1:1/c"}):
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "eve", "tenant": "acme", "exp": 4_000_000_000}
        token = jwt.encode(claims, attacker, algorithm="ES256", headers=header)
        with pytest.raises(AuthenticationError) as caught:
            authenticator.authenticate(token)
        assert caught.value.reason_code == "INVALID_CREDENTIALS"
