"""toolbox.auth: API keys and JWTs to trusted identities, attacked as a caller would."""

from __future__ import annotations

import base64
import io
import json
import os
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import jwt
import pytest

from toolbox import ExecutionContext, ToolPolicy
from toolbox.auth import (
    ApiKeyFile,
    CredentialAuthenticator,
    Identity,
    authenticator_from_policy,
    bearer_token,
    hash_api_key,
)
from toolbox.auth._config import JwtSettings
from toolbox.auth._jwt import JwtAuthenticator
from toolbox.cli import main
from toolbox.errors import AuthenticationError, PolicyFileError
from toolbox.testing.credentials import jwt_keypair, mint_jwt, write_api_keys, write_jwks

ISSUER = "https://idp.test"
AUDIENCE = "toolbox"


def _refused(call, reason_code: str, *secrets: str) -> AuthenticationError:
    with pytest.raises(AuthenticationError) as info:
        call()
    error = info.value
    assert error.reason_code == reason_code
    assert error.rule == "auth"
    assert isinstance(error, PermissionError)
    for secret in secrets:
        assert secret not in str(error)
        assert secret[:12] not in str(error)
    return error


# -- API keys ------------------------------------------------------------------------------


@pytest.fixture
def key_file(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "keys.toml"
    keys = write_api_keys(
        path,
        {
            "alice": {"tenant": "acme", "roles": ["caller", "approver"], "toolset": "support"},
            "bob": {"tenant": "globex", "principal": "bob@globex", "roles": ["auditor"]},
            "old": {"tenant": "acme", "roles": ["caller"], "expires": "2020-01-01T00:00:00Z"},
        },
    )
    return path, keys


def test_a_valid_key_is_its_identity(key_file):
    path, keys = key_file
    identity = ApiKeyFile(path).authenticate(keys["alice"])
    assert identity == Identity(
        tenant="acme",
        principal="alice",
        roles=frozenset({"caller", "approver"}),
        toolset="support",
        credential="api-key:alice",
    )
    context = identity.context(run_id="run-1")
    assert isinstance(context, ExecutionContext)
    assert (context.tenant, context.principal, context.roles, context.run_id) == (
        "acme",
        "alice",
        frozenset({"caller", "approver"}),
        "run-1",
    )
    assert ApiKeyFile(path).authenticate(keys["bob"]).principal == "bob@globex"


def test_the_key_file_holds_only_hashes(key_file):
    path, keys = key_file
    text = path.read_text()
    for key in keys.values():
        assert key not in text
        assert hash_api_key(key) in text


@pytest.mark.parametrize(
    "token",
    [
        "tbx_" + "A" * 43,  # well-formed, unknown
        "x",
        "tbx_ spaced",
        "tbx_\nnewline",
        "tbx_é",
        "tbx_" + "A" * 600,  # longer than any key
        "\x00",
    ],
)
def test_unknown_or_malformed_keys_are_refused(key_file, token):
    path, _ = key_file
    _refused(lambda: ApiKeyFile(path).authenticate(token), "INVALID_CREDENTIALS", token)


def test_a_hash_presented_as_a_key_is_refused(key_file):
    """Someone who read the key file still has no key."""
    path, keys = key_file
    _refused(lambda: ApiKeyFile(path).authenticate(hash_api_key(keys["alice"])), "INVALID_CREDENTIALS")


def test_no_key_is_missing_credentials(key_file):
    path, _ = key_file
    _refused(lambda: ApiKeyFile(path).authenticate(""), "MISSING_CREDENTIALS")


def test_an_expired_key_is_refused(key_file):
    path, keys = key_file
    _refused(lambda: ApiKeyFile(path).authenticate(keys["old"]), "EXPIRED", keys["old"])


def test_rotation_takes_effect_without_a_restart(key_file):
    path, keys = key_file
    authenticator = ApiKeyFile(path)
    assert authenticator.authenticate(keys["alice"]).principal == "alice"
    new_keys = write_api_keys(path, {"carol": {"tenant": "acme", "roles": ["caller"]}})
    assert authenticator.authenticate(new_keys["carol"]).principal == "carol"
    _refused(lambda: authenticator.authenticate(keys["alice"]), "INVALID_CREDENTIALS", keys["alice"])


def test_a_broken_key_file_fails_closed_until_fixed(key_file, caplog):
    path, keys = key_file
    authenticator = ApiKeyFile(path)
    assert authenticator.authenticate(keys["bob"])
    good = path.read_text()
    path.write_text(good + "\n[keys.bad\n")  # a typo in an edit must not undo a revocation
    _refused(lambda: authenticator.authenticate(keys["bob"]), "INVALID_CREDENTIALS")
    assert "refusing every key" in caplog.text
    assert keys["bob"] not in caplog.text
    path.write_text(good + "\n")
    assert authenticator.authenticate(keys["bob"]).tenant == "globex"


def test_a_deleted_key_file_refuses_every_key(key_file):
    path, keys = key_file
    authenticator = ApiKeyFile(path)
    path.unlink()
    _refused(lambda: authenticator.authenticate(keys["alice"]), "INVALID_CREDENTIALS")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[keys.a]\ntenant = 'acme'\nprincipal = 'a'\n", "keys.a.sha256: missing"),
        ("[keys.a]\nsha256 = 'ABC'\ntenant = 'acme'\nprincipal = 'a'\n", "keys.a.sha256: not a valid"),
        (f"[keys.a]\nsha256 = '{'0' * 64}'\ntenant = 'acme'\nprincipal = 'a'\nsecret = 1\n", "keys.a"),
        (f"[keys.'a b']\nsha256 = '{'0' * 64}'\ntenant = 'acme'\nprincipal = 'a'\n", "not a valid key id"),
        (f"[keys.a]\nsha256 = '{'0' * 64}'\ntenant = \"ac\\u0000me\"\nprincipal = 'a'\n", "keys.a"),
        (
            f"[keys.a]\nsha256 = '{'0' * 64}'\ntenant = 'a'\nprincipal = 'a'\nexpires = 2020-01-01\n",
            "expires",
        ),
        (f"[keys.a]\nsha256 = '{'0' * 64}'\ntenant = 'a'\nprincipal = 'a'\nroles = 'admin'\n", "roles"),
        (
            f"[keys.a]\nsha256 = '{'0' * 64}'\ntenant = 'a'\nprincipal = 'a'\n"
            f"[keys.b]\nsha256 = '{'0' * 64}'\ntenant = 'a'\nprincipal = 'b'\n",
            "listed twice",
        ),
        ("[keys.a\n", "not valid TOML"),
        ("other = 1\n", "other"),
    ],
)
def test_a_malformed_key_file_is_refused_at_load_naming_the_key(tmp_path, text, where):
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as info:
        ApiKeyFile(path)
    assert where in str(info.value)


def test_a_missing_key_file_is_refused_at_load(tmp_path):
    with pytest.raises(PolicyFileError, match="does not exist"):
        ApiKeyFile(tmp_path / "nope.toml")


def test_keys_hold_under_concurrent_rotation(key_file):
    """Threads authenticating while the file is rotated see a key either accepted or refused."""
    path, keys = key_file
    authenticator = ApiKeyFile(path)
    errors: list[BaseException] = []
    stop = threading.Event()

    def caller() -> None:
        while not stop.is_set():
            try:
                authenticator.authenticate(keys["bob"])
            except AuthenticationError:
                pass
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(20):
        write_api_keys(path, {"bob": {"tenant": "globex"}})
    stop.set()
    for thread in threads:
        thread.join()
    assert errors == []


# -- JWT -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def es_keys() -> tuple[str, str]:
    return jwt_keypair("ES256")


@pytest.fixture
def jwt_auth(tmp_path, es_keys) -> JwtAuthenticator:
    public = tmp_path / "public.pem"
    public.write_text(es_keys[1])
    return JwtAuthenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=public))


def _token(private: str, **overrides) -> str:
    fields = {
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "subject": "bob",
        "tenant": "acme",
        "roles": ["auditor"],
    }
    fields.update(overrides)
    return mint_jwt(private, **fields)


def test_a_valid_jwt_is_its_identity(jwt_auth, es_keys):
    identity = jwt_auth.authenticate(_token(es_keys[0], toolset="support"))
    assert identity == Identity(
        tenant="acme",
        principal="bob",
        roles=frozenset({"auditor"}),
        toolset="support",
        credential=f"jwt:{ISSUER}",
    )


@pytest.mark.parametrize("algorithm", ["ES256", "RS256"])
def test_mint_jwt_signs_with_each_key_loaded_once(algorithm):
    """The helper loads a PEM once (PyJWT re-read it per signature); every token still verifies."""
    from toolbox.testing import credentials

    private, public = jwt_keypair(algorithm)
    credentials._private_key.cache_clear()
    tokens = [
        mint_jwt(private, issuer=ISSUER, audience=AUDIENCE, subject=f"s{i}", algorithm=algorithm)
        for i in range(3)
    ]
    assert credentials._private_key.cache_info().misses == 1
    subjects = [jwt.decode(t, public, algorithms=[algorithm], audience=AUDIENCE)["sub"] for t in tokens]
    assert subjects == ["s0", "s1", "s2"]


def test_mint_jwt_passes_a_secret_that_is_not_a_pem_to_pyjwt():
    """An HMAC secret is no PEM: signed with it as before, not refused by the key loader."""
    secret = "s" * 32
    token = mint_jwt(secret, issuer=ISSUER, audience=AUDIENCE, subject="b", algorithm="HS256")
    assert jwt.decode(token, secret, algorithms=["HS256"], audience=AUDIENCE)["sub"] == "b"


def test_space_separated_roles_are_accepted(jwt_auth, es_keys):
    token = mint_jwt(es_keys[0], issuer=ISSUER, audience=AUDIENCE, subject="b", tenant="t")
    claims = jwt.decode(token, options={"verify_signature": False})
    claims["roles"] = "caller auditor"
    token = jwt.encode(claims, es_keys[0], algorithm="ES256")
    assert jwt_auth.authenticate(token).roles == {"caller", "auditor"}


def test_an_expired_jwt_is_refused(jwt_auth, es_keys):
    token = _token(es_keys[0], expires_in=-60)
    _refused(lambda: jwt_auth.authenticate(token), "EXPIRED", token)


def test_a_jwt_for_another_audience_is_refused(jwt_auth, es_keys):
    token = _token(es_keys[0], audience="another-service")
    _refused(lambda: jwt_auth.authenticate(token), "WRONG_AUDIENCE", token)


def test_a_jwt_from_another_issuer_is_refused(jwt_auth, es_keys):
    token = _token(es_keys[0], issuer="https://evil.test")
    _refused(lambda: jwt_auth.authenticate(token), "WRONG_ISSUER", token)


def test_a_jwt_signed_by_another_key_is_refused(jwt_auth):
    other_private, _ = jwt_keypair("ES256")
    token = _token(other_private)
    _refused(lambda: jwt_auth.authenticate(token), "INVALID_CREDENTIALS", token)


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_alg_none_is_refused(jwt_auth):
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "root", "tenant": "acme", "exp": time.time() + 600}
    token = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."
    _refused(lambda: jwt_auth.authenticate(token), "INVALID_CREDENTIALS")


def test_hmac_with_the_public_key_as_secret_is_refused(jwt_auth, es_keys):
    """The key-confusion attack: sign HS256 with the server's public key as the secret."""
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "root", "tenant": "acme", "exp": int(time.time()) + 600}
    signing = f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64(claims)}"
    import hashlib
    import hmac

    signature = hmac.new(es_keys[1].encode(), signing.encode(), hashlib.sha256).digest()
    token = f"{signing}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"
    _refused(lambda: jwt_auth.authenticate(token), "INVALID_CREDENTIALS")


def test_a_tampered_payload_is_refused(jwt_auth, es_keys):
    header, _, signature = _token(es_keys[0]).split(".")
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bob", "tenant": "other", "exp": int(time.time()) + 600}
    token = f"{header}.{_b64(claims)}.{signature}"
    _refused(lambda: jwt_auth.authenticate(token), "INVALID_CREDENTIALS")


@pytest.mark.parametrize("missing", ["exp", "sub", "iss", "aud"])
def test_a_jwt_without_a_required_claim_is_refused(jwt_auth, es_keys, missing):
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bob", "tenant": "acme", "exp": int(time.time()) + 600}
    del claims[missing]
    token = jwt.encode(claims, es_keys[0], algorithm="ES256")
    error = _refused(lambda: jwt_auth.authenticate(token), "INVALID_CREDENTIALS")
    assert "bob" not in str(error)


@pytest.mark.parametrize(
    "claims",
    [
        {"tenant": None},
        {"tenant": ""},
        {"tenant": "ac\nme"},
        {"tenant": ["acme"]},
        {"tenant": "a" * 300},
        {"roles": ["x" * 300]},
        {"roles": [1]},
        {"roles": ["r"] * 65},
        {"subject": "x\x00"},
        {"toolset": 5},
    ],
)
def test_unusable_claims_are_refused(jwt_auth, es_keys, claims):
    fields = {"issuer": ISSUER, "audience": AUDIENCE, "subject": "bob", "tenant": "acme"}
    extra = {}
    for key, value in claims.items():
        if key in fields:
            fields[key] = value
        else:
            extra[key] = value
    token = mint_jwt(es_keys[0], **fields, **extra)
    _refused(lambda: jwt_auth.authenticate(token), "INVALID_CREDENTIALS")


@pytest.mark.parametrize("token", ["", "a.b", "not-a-jwt", "a.b.c", "." * 2, "x" * 20_000 + ".a.b"])
def test_garbage_tokens_are_refused(jwt_auth, token):
    code = "MISSING_CREDENTIALS" if not token else "INVALID_CREDENTIALS"
    _refused(lambda: jwt_auth.authenticate(token), code)


def test_jwks_selects_the_key_by_kid_and_rotates(tmp_path):
    first_private, first_public = jwt_keypair("RS256")
    second_private, second_public = jwt_keypair("ES256")
    jwks = tmp_path / "jwks.json"
    write_jwks(jwks, {"k1": first_public})
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks, algorithms=("RS256", "ES256"))
    authenticator = JwtAuthenticator(settings)
    assert authenticator.authenticate(_token(first_private, algorithm="RS256", kid="k1")).principal == "bob"
    unknown = _token(second_private, kid="k2")
    _refused(lambda: authenticator.authenticate(unknown), "INVALID_CREDENTIALS")
    write_jwks(jwks, {"k2": second_public})
    os.utime(jwks, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert authenticator.authenticate(unknown).principal == "bob"
    retired = _token(first_private, algorithm="RS256", kid="k1")
    _refused(lambda: authenticator.authenticate(retired), "INVALID_CREDENTIALS")


def test_a_jwk_that_names_its_algorithm_is_used_for_that_one_only(tmp_path):
    private, public = jwt_keypair("RS256")
    jwks = tmp_path / "jwks.json"
    write_jwks(jwks, {"k1": public}, algorithm="PS256")
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks, algorithms=("RS256", "PS256"))
    token = _token(private, algorithm="RS256", kid="k1")
    _refused(lambda: JwtAuthenticator(settings).authenticate(token), "INVALID_CREDENTIALS")


def test_an_algorithm_outside_the_configured_list_is_refused(tmp_path):
    private, public = jwt_keypair("RS256")
    path = tmp_path / "public.pem"
    path.write_text(public)
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=path, algorithms=("ES256",))
    token = _token(private, algorithm="RS256")
    _refused(lambda: JwtAuthenticator(settings).authenticate(token), "INVALID_CREDENTIALS")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}, "asymmetric"),
        ({"keys": []}, "not a usable JWK set"),
        ({"nokeys": 1}, "not a usable JWK set"),
        ([1, 2], "not a usable JWK set"),
    ],
)
def test_unusable_jwks_files_are_refused_at_load(tmp_path, document, message):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(document))
    with pytest.raises(PolicyFileError, match=message):
        JwtAuthenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks))


def test_a_private_key_in_the_jwks_file_is_refused(tmp_path):
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    with pytest.raises(PolicyFileError, match="asymmetric"):
        JwtAuthenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks))


def test_a_private_key_file_is_refused(tmp_path, es_keys):
    path = tmp_path / "key.pem"
    path.write_text(es_keys[0])
    with pytest.raises(PolicyFileError, match="PEM public key"):
        JwtAuthenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=path))


# -- the Authorization header and the combined authenticator ------------------------------------


@pytest.mark.parametrize("header", ["Bearer abc", "bearer abc", "BEARER  abc.def-ghi_~+/=="])
def test_bearer_tokens_are_read(header):
    assert bearer_token(header) == header.split()[-1]


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "MISSING_CREDENTIALS"),
        ("", "MISSING_CREDENTIALS"),
        ("Basic YWxpY2U6cHc=", "INVALID_CREDENTIALS"),
        ("Bearer", "MISSING_CREDENTIALS"),  # an empty token is no credential (docs/auth.md)
        ("Bearer   ", "MISSING_CREDENTIALS"),
        ("bearer", "MISSING_CREDENTIALS"),
        ("Bearer\t", "INVALID_CREDENTIALS"),
        ("Bearer a b", "INVALID_CREDENTIALS"),
        ("Bearer abc\r\nX-Tenant: other", "INVALID_CREDENTIALS"),
        ("Bearer ÿ", "INVALID_CREDENTIALS"),
        ("Bearer " + "a" * 20_000, "INVALID_CREDENTIALS"),
    ],
)
def test_malformed_authorization_headers_are_refused(header, code):
    _refused(lambda: bearer_token(header), code)


def test_the_combined_authenticator_tells_jwts_from_keys(key_file, jwt_auth, es_keys):
    path, keys = key_file
    both = CredentialAuthenticator(api_keys=ApiKeyFile(path), jwt=jwt_auth)
    assert both.authenticate(keys["alice"]).credential == "api-key:alice"
    assert both.authenticate(_token(es_keys[0])).credential == f"jwt:{ISSUER}"
    _refused(lambda: both.authenticate(""), "MISSING_CREDENTIALS")
    only_keys = CredentialAuthenticator(api_keys=ApiKeyFile(path))
    _refused(lambda: only_keys.authenticate(_token(es_keys[0])), "INVALID_CREDENTIALS")
    with pytest.raises(ValueError, match="configure"):
        CredentialAuthenticator()


# -- the [auth] section of a policy file ------------------------------------------------------


def test_the_auth_section_builds_the_authenticator(tmp_path, es_keys):
    keys = write_api_keys(tmp_path / "keys.toml", {"ops": {"tenant": "acme", "roles": ["admin"]}})
    (tmp_path / "public.pem").write_text(es_keys[1])
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(
        'version = 1\n[auth]\napi_keys = "keys.toml"\n'
        f'[auth.jwt]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\nkey_file = "public.pem"\n'
        'algorithms = ["ES256"]\n'
    )
    authenticator = authenticator_from_policy(ToolPolicy.from_file(policy_file))
    assert authenticator is not None
    assert authenticator.authenticate(keys["ops"]).roles == {"admin"}
    assert authenticator.authenticate(_token(es_keys[0])).principal == "bob"
    assert authenticator_from_policy(ToolPolicy.standard()) is None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("[auth]\n", "names no credentials"),
        ('[auth]\napi_keys = ""\n', "auth.api_keys: must not be empty"),
        ('[auth]\ntokens = "x"\n', "tokens"),
        ('[auth.jwt]\nissuer = "i"\naudience = "a"\n', "exactly one of key_file"),
        ('[auth.jwt]\nissuer = "i"\naudience = "a"\nkey_file = "k"\njwks_file = "j"\n', "exactly one"),
        ('[auth.jwt]\nissuer = "i"\naudience = "a"\nkey_file = "k"\nalgorithms = ["HS256"]\n', "HS256"),
        ('[auth.jwt]\nissuer = " "\naudience = "a"\nkey_file = "k"\n', "auth.jwt.issuer"),
        ('[auth.jwt]\nissuer = "i"\naudience = "a"\nkey_file = "k"\ntenant_claim = "a b"\n', "tenant_claim"),
        ('[auth.jwt]\nissuer = "i"\naudience = "a"\nkey_file = "k"\nleeway_seconds = -1\n', "leeway"),
        ('[auth.jwt]\nissuer = "i"\naudience = "a"\nkey_file = "k"\nleeway_seconds = 86400\n', "at most 300"),
    ],
)
def test_a_bad_auth_section_fails_at_load(tmp_path, section, message):
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text("version = 1\n" + section)
    with pytest.raises(PolicyFileError) as info:
        ToolPolicy.from_file(policy_file)
    assert message in str(info.value)


# -- toolbox auth ------------------------------------------------------------------------------


def _run(argv: list[str], stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    import sys

    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with redirect_stdout(out):
            status = main(argv)
    finally:
        sys.stdin = old
    return status, out.getvalue()


def test_new_key_prints_a_key_its_entry_authenticates(tmp_path):
    status, out = _run(
        ["auth", "new-key", "--id", "ci-bot", "--tenant", "acme", "--principal", "ci", "--role", "caller"]
    )
    assert status == 0
    key = out.splitlines()[0].removeprefix("key: ")
    entry = out[out.index("[keys.ci-bot]") :]
    assert key not in entry
    path = tmp_path / "keys.toml"
    path.write_text(entry)
    identity = ApiKeyFile(path).authenticate(key)
    assert (identity.tenant, identity.principal, identity.roles) == ("acme", "ci", {"caller"})


def test_new_key_json_and_expiry(tmp_path):
    status, out = _run(
        [
            "auth",
            "new-key",
            "--json",
            "--id",
            "k",
            "--tenant",
            "t",
            "--principal",
            "p",
            "--expires",
            "2020-01-01T00:00Z",
        ]
    )
    assert status == 0
    document = json.loads(out)
    lines = [f"[keys.{document['id']}]", f'sha256 = "{document["entry"]["sha256"]}"', 'tenant = "t"']
    lines += ['principal = "p"', f"expires = {document['entry']['expires']}"]
    path = tmp_path / "keys.toml"
    path.write_text("\n".join(lines) + "\n")
    _refused(lambda: ApiKeyFile(path).authenticate(document["key"]), "EXPIRED")


@pytest.mark.parametrize(
    "flags",
    [
        ["--id", "bad id", "--tenant", "t", "--principal", "p"],
        ["--id", "k", "--tenant", "t\x01", "--principal", "p"],
        ["--id", "k", "--tenant", "t", "--principal", "p", "--expires", "tomorrow"],
        ["--id", "k", "--tenant", "t", "--principal", "p", "--expires", "2030-01-01T00:00"],
    ],
)
def test_new_key_refuses_bad_flags(flags, capsys):
    assert main(["auth", "new-key", *flags]) == 2
    assert "error" in capsys.readouterr().err


def test_hash_key_reads_standard_input():
    status, out = _run(["auth", "hash-key"], stdin="tbx_secret\n")
    assert (status, out.strip()) == (0, hash_api_key("tbx_secret"))
    assert "tbx_secret" not in out
