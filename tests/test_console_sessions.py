"""A console session never outlives its credential: capped at its expiry, re-checked on every request.

Before, a JWT expiring in 3 s gave a 30-minute session with its roles (admin included), and a
revoked or rotated API key kept every session it had opened.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from service_support import PLAIN_HTTP, USERS, Deployment, deployment, write_keys_again
from toolbox.auth import ApiKeyFile, Identity
from toolbox.service._console_session import SESSION_COOKIE, Sessions
from toolbox.testing.credentials import jwt_keypair, write_api_keys

SCOPE = {"type": "http", "scheme": "http", "headers": [], "server": ("x", 80), "path": "/"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, console=True) as deployed:
        yield deployed


@contextmanager
def sign_in(service: Deployment, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=30, verify=PLAIN_HTTP) as client:
        login = client.get("/console/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert csrf is not None
        signed = client.post("/console/login", data={"csrf": csrf.group(1), "token": token})
        assert signed.status_code == 303, signed.text
        yield client


def session_payload(client: httpx.Client) -> dict[str, Any]:
    value = client.cookies[SESSION_COOKIE]
    payload = value.split(".")[0]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


def signed_in(client: httpx.Client) -> bool:
    page = client.get("/console/tools")
    if page.status_code == 303:
        assert page.headers["location"] == "/console/login"
        return False
    assert page.status_code == 200, page.text
    return True


def test_a_session_ends_when_its_jwt_does(service: Deployment) -> None:
    """A token expiring in a few seconds gives a session of a few seconds, not the 30-minute TTL."""
    token = service.jwt(roles=["admin", "auditor", "caller"], expires_in=3)
    exp = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))["exp"]
    with sign_in(service, token) as client:
        assert signed_in(client)
        cookie = next(c for c in client.cookies.jar if c.name == SESSION_COOKIE)
        assert cookie.expires is not None and cookie.expires <= exp + 1
        assert session_payload(client)["e"] <= exp


def test_a_session_whose_credential_has_expired_is_refused() -> None:
    """Decided on the credential's expiry: no waiting needed (a session started on a spent credential)."""
    identity = Identity("acme", "bob", frozenset({"admin"}), None, "jwt:x", expires_at=time.time() - 1)
    response = Response()
    sessions = Sessions(b"k" * 32, ttl=1800, force_secure=False)
    sessions.start(response, Request(SCOPE), identity)
    value = response.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    with_cookie = {**SCOPE, "headers": [(b"cookie", f"{SESSION_COOKIE}={value}".encode())]}
    assert sessions.read(Request(with_cookie)) is None
    assert "Max-Age=1" in response.headers["set-cookie"]


def test_a_revoked_api_key_ends_its_sessions(service: Deployment) -> None:
    with sign_in(service, service.keys["bob"]) as client:
        assert signed_in(client)
        users = {name: entry for name, entry in USERS.items() if name != "bob"}
        time.sleep(0.01)  # a distinct modification time on coarse file systems
        write_api_keys(service.key_file, users)  # bob's key is revoked
        assert not signed_in(client)


def test_a_rotated_api_key_ends_the_sessions_of_the_old_one(service: Deployment) -> None:
    with sign_in(service, service.keys["bob"]) as client:
        assert signed_in(client)
        write_keys_again(service)  # every key replaced under the same ids
        assert not signed_in(client)
        with sign_in(service, service.keys["bob"]) as fresh:
            assert signed_in(fresh)


def test_a_key_given_other_roles_ends_its_sessions(service: Deployment) -> None:
    """The same key, demoted from admin: the session made with its old roles ends."""
    with sign_in(service, service.keys["carol"]) as client:
        assert client.get("/console/kill-switch").status_code == 200
        text = service.key_file.read_text(encoding="utf-8")
        carol = text.index("[keys.carol]")
        roles = text.index("roles = ", carol)
        line_end = text.index("\n", roles)
        time.sleep(0.01)
        demoted = service.key_file.with_name("keys.toml.new")
        demoted.write_text(text[:roles] + 'roles = ["auditor"]' + text[line_end:], encoding="utf-8")
        demoted.replace(service.key_file)
        assert not signed_in(client)
        with sign_in(service, service.keys["carol"]) as again:  # the same key signs in, as an auditor
            assert again.get("/console/kill-switch").status_code == 403


def test_removing_a_jwt_signing_key_ends_the_sessions_it_signed(service: Deployment, tmp_path: Path) -> None:
    with sign_in(service, service.jwt(roles=["auditor"])) as client:
        assert signed_in(client)
        time.sleep(0.01)
        (tmp_path / "jwt.pem").write_text(jwt_keypair()[1], encoding="utf-8")  # the key is replaced
        assert not signed_in(client)


def test_api_key_identities_are_checked_again(tmp_path: Path) -> None:
    """`ApiKeyFile.still_valid`: the same key and entry hold; anything changed does not."""
    path = tmp_path / "keys.toml"
    keys = write_api_keys(path, {"ci": {"tenant": "acme", "roles": ["caller"]}})
    authenticator = ApiKeyFile(path)
    identity = authenticator.authenticate(keys["ci"])
    assert identity.key_ref and authenticator.still_valid(identity)
    forged = Identity(
        "acme",
        identity.principal,
        frozenset({"caller", "admin"}),
        None,
        "api-key:ci",
        key_ref=identity.key_ref,
    )
    assert not authenticator.still_valid(forged)
    assert not authenticator.still_valid(
        Identity("acme", identity.principal, frozenset({"caller"}), None, "api-key:ci")
    )
