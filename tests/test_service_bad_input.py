"""Bad input at the service's boundary: each gets a clear problem, nothing runs, nothing leaks.

Malformed JSON, oversized and chunked bodies (413 before parsing), the wrong
content type, unknown tools, path tricks (``..``, ``/``, ``%2F``), header
injection, nesting bombs, NaN and giant integers, replayed and concurrent input.
"""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service_support import PLAIN_HTTP, RUNS, Deployment, deployment

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployment(tmp_path_factory.mktemp("bad-input")) as deployed:
        yield deployed


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    RUNS.clear()


def refused(response: httpx.Response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["reason_code"] == reason and body["status"] == status
    return body


def raw(service: Deployment, content: bytes, content_type: str = "application/json", **headers: str):
    return service.post(
        "/v1/tools/echo/invoke", "alice", content=content, headers={"Content-Type": content_type, **headers}
    )


@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"not json",
        b'{"arguments": }',
        b"\xff\xfe",
        b"",
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"n": ' + b"9" * 5000 + b"}",
        b"[1, 2]",
        b'"text"',
        b"null",
    ],
)
def test_malformed_json_is_400_and_runs_nothing(service: Deployment, content: bytes) -> None:
    response = raw(service, content[: 64 * 1024 + 4096])
    assert response.status_code in (400, 413), response.text
    refused(
        response, response.status_code, "MALFORMED_JSON" if response.status_code == 400 else "BODY_TOO_LARGE"
    )
    assert "9999999999" not in response.text
    assert RUNS["echo"] == 0 and service.get("/healthz").status_code == 200


def test_oversized_body_is_413_before_parsing(service: Deployment) -> None:
    big = b'{"arguments": {"text": "' + b"a" * (80 * 1024) + b'"}, "purpose": "Greet"}'
    refused(raw(service, big), 413, "BODY_TOO_LARGE")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        yield b'{"arguments": {"text": "'
        for _ in range(100):
            yield b"a" * 1024
        yield b'"}}'

    response = service.post(
        "/v1/tools/echo/invoke", "alice", content=chunks(), headers={"Content-Type": "application/json"}
    )
    refused(response, 413, "BODY_TOO_LARGE")
    assert RUNS["echo"] == 0


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
        "application/json-patch+json",
        "application/jsonx",
    ],
)
def test_wrong_content_type_is_415(service: Deployment, content_type: str) -> None:
    refused(
        raw(service, b'{"arguments": {"text": "x"}, "purpose": "Greet"}', content_type),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    assert RUNS["echo"] == 0


def test_charset_parameter_is_accepted(service: Deployment) -> None:
    response = raw(
        service, b'{"arguments": {"text": "x"}, "purpose": "Greet"}', "application/json; charset=utf-8"
    )
    assert response.status_code == 200 and RUNS["echo"] == 1


@pytest.mark.parametrize(
    "path",
    [
        "/v1/tools/nope/invoke",
        "/v1/tools/..%2Fadmin/invoke",
        "/v1/tools/echo%2Fcall/invoke",
        "/v1/tools/../kill-switch/invoke",
        "/v1/tools/%2e%2e/invoke",
        "/v1/tools/echo/../../healthz/invoke",
        "/v1/tools/echo%00/invoke",
        "/v1/tools/%F0%9F%92%A3/invoke",
        "/v1/tools/echo.call.extra/invoke",
    ],
)
def test_unknown_or_tricky_tool_names_are_404_problems(service: Deployment, path: str) -> None:
    response = service.post(path, "alice", json={"arguments": {"text": "x"}, "purpose": "Greet"})
    assert response.status_code == 404, (path, response.text)
    assert response.headers["content-type"].startswith(PROBLEM)
    assert response.json()["reason_code"] in ("TOOL_UNAVAILABLE", "NOT_FOUND")
    assert RUNS["echo"] == 0


def test_an_overlong_name_is_a_bad_name(service: Deployment) -> None:
    response = service.post(
        "/v1/tools/" + "e" * 500 + "/invoke", "alice", json={"arguments": {}, "purpose": "G"}
    )
    body = refused(response, 422, "INVALID_ARGUMENTS")
    assert body["error_code"] == "bad_name" and len(response.text) < 2000


def test_header_injection_in_the_name_does_not_reach_a_header(service: Deployment) -> None:
    response = service.post(
        "/v1/tools/echo%0d%0aSet-Cookie:%20pwned=1/invoke",
        "alice",
        json={"arguments": {"text": "x"}, "purpose": "Greet"},
    )
    assert response.status_code == 404
    assert "set-cookie" not in response.headers and "pwned" not in str(response.headers)


def test_raw_header_injection_and_malformed_credentials(service: Deployment) -> None:
    """A CR/LF smuggled into a header over a raw socket is refused by the server, nothing runs."""
    host, port = service.url.removeprefix("http://").split(":")
    body = b'{"arguments": {"text": "x"}, "purpose": "Greet"}'
    request = (
        b"POST /v1/tools/echo/invoke HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + service.keys["alice"].encode() + b"\rX-Injected: 1\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 4")
    for value in (f"Bearer {service.keys['alice']} extra", "Bearer a\tb", "Bearer " + "x" * 20_000, "Bearer"):
        response = service.post(
            "/v1/tools/echo/invoke",
            json={"arguments": {"text": "x"}, "purpose": "Greet"},
            headers={"Authorization": value},
        )
        refused(response, 401, response.json()["reason_code"])
    assert RUNS["echo"] == 0


@pytest.mark.parametrize(
    ("body", "reason", "field"),
    [
        ({"arguments": [1, 2], "purpose": "Greet"}, "INVALID_ARGUMENTS", "arguments"),
        (
            {"arguments": {"text": "x"}, "purpose": "Greet", "approval_id": 7},
            "INVALID_REQUEST",
            "approval_id",
        ),
        ({"arguments": {"text": "x", "purpose": "A"}, "purpose": "B"}, "INVALID_ARGUMENTS", "purpose"),
        (
            {"arguments": {"text": {"a": {"b": {"c": [[[[[[]]]]]]}}}}, "purpose": "Greet"},
            "INVALID_ARGUMENTS",
            "text",
        ),
        ({"arguments": {"text": "x"}}, "INVALID_ARGUMENTS", None),
        ({"arguments": {"text": "x"}, "purpose": "\x00\x1b[31m"}, "INVALID_ARGUMENTS", None),
    ],
)
def test_bad_envelopes_are_422(service: Deployment, body: dict, reason: str, field: str | None) -> None:
    problem = refused(service.post("/v1/tools/echo/invoke", "alice", json=body), 422, reason)
    if field is not None:
        assert problem["field_path"] == field
    assert RUNS["echo"] == 0


def test_deep_arguments_within_the_size_limit_are_refused(service: Deployment) -> None:
    nested: object = "x"
    for _ in range(200):
        nested = {"a": nested}
    response = service.post(
        "/v1/tools/echo/invoke", "alice", json={"arguments": {"text": nested}, "purpose": "Greet"}
    )
    refused(response, 422, "INVALID_ARGUMENTS")
    assert RUNS["echo"] == 0


def test_script_in_arguments_is_json_not_markup(service: Deployment) -> None:
    text = "<script>alert(1)</script>"
    response = service.invoke("alice", "echo", {"text": text}, purpose="Greet")
    assert response.headers["content-type"] == "application/json"
    assert response.json()["content"] == text


def test_approval_ids_that_are_not_ids(service: Deployment) -> None:
    for approval_id in ("../../etc/passwd", "%2e%2e", "a" * 100, "", "x' OR '1'='1"):
        response = service.invoke(
            "alice", "transfer", {"amount": 1, "to": "x"}, audit_as="Pay", approval_id=approval_id
        )
        refused(response, 404, "UNKNOWN_REQUEST")
    response = service.post(
        "/v1/approvals/..%2F..%2Fx/decision", "bob", json={"decision": "approve", "reason": "r"}
    )
    assert response.status_code == 404
    response = service.get("/v1/approvals/" + "z" * 300, "bob")
    refused(response, 404, "UNKNOWN_REQUEST")
    assert RUNS["transfer"] == 0


def test_concurrent_redeems_of_one_grant_run_once(service: Deployment) -> None:
    pending = service.invoke("alice", "transfer", {"amount": 9, "to": "x"}, audit_as="Pay").json()["approval"]
    service.post(
        f"/v1/approvals/{pending['id']}/decision", "bob", json={"decision": "approve", "reason": "ok"}
    )

    def attempt(_: int) -> int:
        with httpx.Client(base_url=service.url, timeout=30, verify=PLAIN_HTTP) as client:
            return client.post(
                "/v1/tools/transfer/invoke",
                headers=service.headers("alice"),
                json={"arguments": {"amount": 9, "to": "x"}, "audit_as": "Pay", "approval_id": pending["id"]},
            ).status_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = sorted(pool.map(attempt, range(16)))
    # The losers are told the grant is used: 409 before the chain, 403 APPROVAL_INVALID inside it.
    assert codes.count(200) == 1 and set(codes) <= {200, 403, 409}
    assert RUNS["transfer"] == 1


def test_unknown_routes_and_methods_are_problems(service: Deployment) -> None:
    refused(service.get("/v2/anything", "alice"), 404, "NOT_FOUND")
    response = service.client.delete("/v1/kill-switch", headers=service.headers("carol"))
    refused(response, 405, "METHOD_NOT_ALLOWED")
    assert service.get("/docs").status_code == 404  # no CDN-loaded Swagger page


def test_ignored_identity_fields_in_query_and_headers(service: Deployment, tmp_path: Path) -> None:
    response = service.post(
        "/v1/tools/echo/invoke?tenant=evil&principal=root",
        "alice",
        json={"arguments": {"text": "x"}, "purpose": "Greet", "roles": ["admin"], "run_id": "chosen"},
        headers={"X-Tenant": "evil", "X-Principal": "root", "X-Forwarded-User": "root"},
    )
    body = response.json()
    assert response.status_code == 200 and body["trace_id"] != "chosen"
    assert {(e.tenant, e.principal) for e in service.events(body["trace_id"])} == {("acme", "alice")}
