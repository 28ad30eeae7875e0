"""Whatever token is presented, authentication answers an `Identity` or an `AuthenticationError`.

A JWT whose ``alg`` names another key family than its ``kid``'s key (RS256 naming an EC key, or
the reverse) made `JwtAuthenticator.authenticate` raise TypeError: the service answered 500, with
a traceback in its log and no ``unauthenticated`` audit event. Property tests feed the
authenticators any text, any JOSE-shaped token and validly signed tokens with odd claims.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service_support import LiveServer
from toolbox import Effect, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.auth import ApiKeyFile, CredentialAuthenticator, Identity
from toolbox.auth._config import JwtSettings
from toolbox.auth._jwt import JwtAuthenticator
from toolbox.errors import AuthenticationError
from toolbox.service import create_app
from toolbox.service._audit_log import UNAUTHENTICATED_TRACE
from toolbox.testing.credentials import _private_key, jwt_keypair, mint_jwt, write_api_keys, write_jwks

ISSUER, AUDIENCE = "https://idp.test", "toolbox"
REASONS = {"MISSING_CREDENTIALS", "INVALID_CREDENTIALS", "EXPIRED", "WRONG_AUDIENCE", "WRONG_ISSUER"}
RSA_PRIVATE, RSA_PUBLIC = jwt_keypair("RS256")
EC_PRIVATE, EC_PUBLIC = jwt_keypair("ES256")
# The property test signs with loaded keys, as mint_jwt does (a PEM text costs PyJWS a re-read).
RSA_KEY, EC_KEY = _private_key(RSA_PRIVATE), _private_key(EC_PRIVATE)
ALGORITHMS = ("RS256", "PS256", "ES256", "ES384", "EdDSA")
RAN: list[str] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def echo(text: str) -> str:
    """Return the text."""
    RAN.append(text)
    return text


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("jwt-keys")
    write_jwks(directory / "jwks.json", {"rsa": RSA_PUBLIC, "ec": EC_PUBLIC})
    (directory / "ec.pem").write_text(EC_PUBLIC, encoding="utf-8")
    write_api_keys(directory / "keys.toml", {"ci": {"tenant": "acme", "roles": ["caller"]}})
    return directory


def jwks_auth(directory: Path) -> JwtAuthenticator:
    return JwtAuthenticator(
        JwtSettings(
            issuer=ISSUER, audience=AUDIENCE, jwks_file=directory / "jwks.json", algorithms=ALGORITHMS
        )
    )


def token(private: str, algorithm: str, kid: str | None, **claims: Any) -> str:
    return mint_jwt(
        private,
        issuer=ISSUER,
        audience=AUDIENCE,
        subject="s",
        tenant="t",
        algorithm=algorithm,
        kid=kid,
        **claims,
    )


@pytest.mark.parametrize(
    ("private", "algorithm", "kid"),
    [(RSA_PRIVATE, "RS256", "ec"), (EC_PRIVATE, "ES256", "rsa"), (RSA_PRIVATE, "PS256", "ec")],
    ids=["rs256-naming-an-ec-key", "es256-naming-an-rsa-key", "ps256-naming-an-ec-key"],
)
def test_an_algorithm_of_another_key_family_is_a_refusal(
    keys_dir: Path, private: str, algorithm: str, kid: str
):
    auth = jwks_auth(keys_dir)
    with pytest.raises(AuthenticationError) as refused:
        auth.authenticate(token(private, algorithm, kid))
    assert refused.value.reason_code == "INVALID_CREDENTIALS"
    assert "does not match its key" in str(refused.value)


def test_the_same_holds_for_a_pem_key_file(keys_dir: Path):
    auth = JwtAuthenticator(
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=keys_dir / "ec.pem", algorithms=ALGORITHMS)
    )
    with pytest.raises(AuthenticationError) as refused:
        auth.authenticate(token(RSA_PRIVATE, "RS256", None))
    assert refused.value.reason_code == "INVALID_CREDENTIALS"
    assert auth.authenticate(token(EC_PRIVATE, "ES256", None)).principal == "s"


# -- any token -------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "alg": st.sampled_from([*ALGORITHMS, "none", "HS256", "RS1", ""]) | JSON,
        "kid": st.sampled_from(["rsa", "ec", "nope", ""]) | JSON,
        "typ": JSON,
        "crit": JSON,
        "b64": JSON,
        "jku": JSON,
    },
)
PAYLOADS = st.fixed_dictionaries(
    {},
    optional={
        "iss": st.just(ISSUER) | JSON,
        "aud": st.just(AUDIENCE) | JSON,
        "sub": st.text(max_size=10) | JSON,
        "exp": st.integers() | JSON,
        "nbf": st.integers() | JSON,
        "tenant": st.text(max_size=10) | JSON,
        "roles": JSON,
        "toolset": JSON,
    },
)
SEGMENT = st.binary(max_size=64).map(_b64) | st.text(max_size=20)
JOSE = st.builds(
    lambda header, payload, signature: ".".join(
        (_b64(json.dumps(header).encode()), _b64(json.dumps(payload).encode()), signature)
    ),
    HEADERS,
    PAYLOADS,
    SEGMENT,
)
TOKENS = (
    st.text(max_size=300)
    | st.binary(max_size=300).map(lambda raw: raw.decode("latin-1"))
    | st.lists(SEGMENT, min_size=1, max_size=5).map(".".join)
    | JOSE
)


def _answers(authenticator: Any, presented: str) -> None:
    try:
        found = authenticator.authenticate(presented)
    except AuthenticationError as refused:
        assert refused.reason_code in REASONS
        assert refused.rule == "auth"
        return
    assert isinstance(found, Identity)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TOKENS)
def test_any_token_is_an_identity_or_an_authentication_error(keys_dir: Path, presented: str):
    jwt_only = jwks_auth(keys_dir)
    both = CredentialAuthenticator(api_keys=ApiKeyFile(keys_dir / "keys.toml"), jwt=jwt_only)
    _answers(jwt_only, presented)
    _answers(both, presented)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(
    st.sampled_from([(RSA_KEY, "RS256"), (RSA_KEY, "PS256"), (EC_KEY, "ES256")]),
    st.sampled_from(["rsa", "ec", "nope", None]),
    PAYLOADS,
)
def test_signed_tokens_with_any_kid_and_claims_are_answered(
    keys_dir: Path, signer: tuple[Any, str], kid: str | None, claims: dict[str, Any]
):
    private, algorithm = signer
    headers = {"kid": kid} if kid is not None else None
    # Signed as JWS over the raw claims: PyJWT's jwt.encode would refuse claims of odd types.
    signed = jwt.PyJWS().encode(json.dumps(claims).encode(), private, algorithm=algorithm, headers=headers)
    _answers(jwks_auth(keys_dir), signed)


# -- the service ----------------------------------------------------------------------------------


class Exploding:
    """An authenticator with a bug: any token makes it raise something other than a refusal."""

    def authenticate(self, token: str, /) -> Identity:
        raise RuntimeError(f"bug while reading {token}")


@pytest.fixture
def service(keys_dir: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, MemorySink]]:
    sink = MemorySink()
    authenticator = request.param(keys_dir) if callable(request.param) else request.param
    app = create_app(
        policy=ToolPolicy.standard(),
        authenticator=authenticator,
        providers=[echo],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink)),
        console=False,
    )
    server = LiveServer(app)
    RAN.clear()
    yield server.url, sink
    server.stop()


def _refused(url: str, sink: MemorySink, presented: str) -> None:
    answer = httpx.post(
        f"{url}/v1/tools/echo/invoke",
        json={"arguments": {"text": "hi"}, "purpose": "Greet"},
        headers={"Authorization": f"Bearer {presented}"},
        timeout=30,
    )
    assert answer.status_code == 401, answer.text
    body = answer.json()
    assert (body["reason_code"], body["rule"]) == ("INVALID_CREDENTIALS", "auth")
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert presented not in answer.text and RAN == []
    (event,) = [e for e in sink.read_trace(UNAUTHENTICATED_TRACE) if e.correlation_id == body["trace_id"]]
    assert (event.decision, event.reason_code) == ("DENY", "INVALID_CREDENTIALS")


@pytest.mark.parametrize("service", [jwks_auth], indirect=True)
def test_the_service_answers_a_mismatched_token_401_and_audits_it(service: tuple[str, MemorySink]):
    url, sink = service
    _refused(url, sink, token(RSA_PRIVATE, "RS256", "ec"))


@pytest.mark.parametrize("service", [Exploding()], indirect=True)
def test_an_authenticator_that_fails_is_a_401_refusal_never_a_500(service: tuple[str, MemorySink]):
    url, sink = service
    _refused(url, sink, "a-key-the-authenticator-chokes-on")
