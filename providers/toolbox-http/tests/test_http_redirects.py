"""Redirects: off by default; when on, every hop is checked and secrets stay with their origin."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from toolbox_http import EgressDeniedError, HttpTool, TooManyRedirectsError

A = "https://api.example.com"
B = "https://cdn.example.net"


def _redirect(location: str, status: int = 302) -> httpx.Response:
    return httpx.Response(status, headers={"Location": location})


def test_redirects_are_not_followed_by_default(respx_mock, http_tools):
    """A 302 is returned as it is; its Location is not requested."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect(f"{A}/new"))
    target = respx_mock.get(f"{A}/new").mock(return_value=httpx.Response(200))
    response = http_tools().get(HttpTool).get(f"{A}/old").purpose("Read").execute()
    assert response.status_code == 302
    assert response.redirects == 0
    assert target.call_count == 0


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_followed_when_enabled(respx_mock, http_tools, status):
    """With follow_redirects, the final response is returned with the hop count and final URL."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect("/new?token=t0k", status))
    respx_mock.get(f"{A}/new").mock(return_value=httpx.Response(200, json={"ok": True}))
    ready = http_tools(follow_redirects=True).get(HttpTool).get(f"{A}/old").purpose("Read")
    response = ready.execute()
    assert response.json() == {"ok": True}
    assert response.redirects == 1
    assert response.url == f"{A}/new?token=[REDACTED]"
    assert "t0k" not in repr(ready.record.as_dict())


def test_followed_async(respx_mock, http_tools):
    """The async path follows redirects the same way."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect(f"{B}/new"))
    respx_mock.get(f"{B}/new").mock(return_value=httpx.Response(200, json={"ok": True}))
    tool = http_tools(follow_redirects=True).get(HttpTool)
    response = asyncio.run(tool.get(f"{A}/old").purpose("Read").aexecute())
    assert response.json() == {"ok": True}


def test_hop_limit(respx_mock, http_tools):
    """More hops than max_redirects is an error; no hop beyond the limit is requested."""
    route = respx_mock.get(url__startswith=f"{A}/loop").mock(side_effect=lambda r: _redirect(f"{r.url}x"))
    ready = http_tools(follow_redirects=True, max_redirects=3).get(HttpTool).get(f"{A}/loop").purpose("Read")
    with pytest.raises(TooManyRedirectsError, match=r"max_redirects \(3\)"):
        ready.execute()
    assert route.call_count == 4
    assert ready.record.status == "ERROR"


@pytest.mark.parametrize(
    "location",
    [
        "https://evil.example.org/steal",
        "http://api.example.com/plain",
        "https://api.example.com:8443/x",
        "ftp://x/",
    ],
)
def test_hop_outside_egress_is_denied(respx_mock, http_tools, location):
    """A hop to a host, scheme or port outside the policy is DENIED/EGRESS_DENIED and not requested."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect(location))
    elsewhere = respx_mock.route(url__regex=r"^(?!https://api\.example\.com/old).*").mock(
        return_value=httpx.Response(200)
    )
    egress = {"hosts": ["api.example.com"], "schemes": ["https"], "ports": [443]}
    ready = http_tools(follow_redirects=True, egress=egress).get(HttpTool).get(f"{A}/old").purpose("Read")
    with pytest.raises(EgressDeniedError) as info:
        ready.execute()
    assert info.value.reason_code == "EGRESS_DENIED"
    assert info.value.rule == "http:egress:redirect"
    assert ready.record.status == "DENIED"
    assert elsewhere.call_count == 0


def test_report_mode_still_enforces_redirect_hops(respx_mock, http_tools):
    """REPORT mode only relaxes the first request; hops stay enforced."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect("https://evil.example.org/"))
    egress = {"hosts": ["api.example.com"], "mode": "REPORT"}
    tool = http_tools(follow_redirects=True, egress=egress).get(HttpTool)
    with pytest.raises(EgressDeniedError):
        tool.get(f"{A}/old").purpose("Read").execute()


def test_credentials_not_forwarded_to_another_host(respx_mock, http_tools, toolbox_env):
    """Caller Authorization/Cookie and configured secrets are dropped on a cross-host hop."""
    toolbox_env["API_TOKEN"] = "cfg-secret-1"
    respx_mock.get(f"{A}/old").mock(return_value=_redirect(f"{B}/new"))
    final = respx_mock.get(f"{B}/new").mock(return_value=httpx.Response(200))
    credentials = [{"hosts": ["api.example.com"], "header": "X-Api-Key", "env": "API_TOKEN"}]
    tool = http_tools(follow_redirects=True, credentials=credentials).get(HttpTool)
    headers = {"Authorization": "Bearer caller-2", "Cookie": "sid=3", "X-Trace": "keep"}
    tool.get(f"{A}/old", headers=headers).purpose("Read").execute()
    first = respx_mock.calls[0].request
    assert first.headers["x-api-key"] == "cfg-secret-1"
    sent = final.calls.last.request
    for name in ("authorization", "cookie", "x-api-key"):
        assert name not in sent.headers
    assert sent.headers["x-trace"] == "keep"
    assert sent.headers["host"] == "cdn.example.net"


def test_credentials_kept_on_same_origin(respx_mock, http_tools):
    """A hop on the same scheme, host and port keeps the caller's Authorization."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect("/new"))
    final = respx_mock.get(f"{A}/new").mock(return_value=httpx.Response(200))
    tool = http_tools(follow_redirects=True).get(HttpTool)
    tool.get(f"{A}/old", headers={"Authorization": "Bearer same"}).purpose("Read").execute()
    assert final.calls.last.request.headers["authorization"] == "Bearer same"


def test_location_userinfo_is_dropped(respx_mock, http_tools):
    """Credentials in a Location header are never used."""
    respx_mock.get(f"{A}/old").mock(return_value=_redirect("https://bob:pw@cdn.example.net/new"))
    final = respx_mock.get(f"{B}/new").mock(return_value=httpx.Response(200))
    http_tools(follow_redirects=True).get(HttpTool).get(f"{A}/old").purpose("Read").execute()
    assert "authorization" not in final.calls.last.request.headers


@pytest.mark.parametrize(
    ("status", "method", "body"), [(303, "GET", b""), (302, "GET", b""), (307, "POST", b"{}")]
)
def test_method_after_post(respx_mock, http_tools, status, method, body):
    """303 (and 301/302 after POST) become GET without a body; 307/308 repeat the POST."""
    respx_mock.post(f"{A}/submit").mock(return_value=_redirect("/result", status))
    final = respx_mock.route(url=f"{A}/result").mock(return_value=httpx.Response(200))
    tool = http_tools(follow_redirects=True).get(HttpTool)
    tool.post(f"{A}/submit", json={}).audit_as("Submit").execute()
    sent = final.calls.last.request
    assert sent.method == method
    assert sent.content == body
