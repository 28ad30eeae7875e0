"""Credentials travel only over https unless the operator opts a host in to plain http.

Plain http hands a secret to anyone on the path, and an https -> http redirect would
downgrade it silently. Real loopback servers record the Authorization header they got.
"""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import httpx
import pytest

import toolbox_http.plugin
from toolbox import ToolPolicy
from toolbox_http import HttpOptions, HttpTool

TOKEN = "tok-scheme-5a4b3c"
LOCAL = {"hosts": ["127.0.0.1"], "header": "Authorization", "prefix": "Bearer ", "env": "LOCAL_TOKEN"}


@pytest.fixture
def token_env(toolbox_env):
    toolbox_env["LOCAL_TOKEN"] = TOKEN
    return toolbox_env


def test_not_sent_over_plain_http_by_default(loopback, http_tools, token_env):
    """A credential bound to 127.0.0.1 stays off an http:// request to it, sync and async."""
    tool = http_tools(credentials=[LOCAL]).get(HttpTool)
    assert tool.get(f"{loopback.url}/json").purpose("Read").execute().is_success
    asyncio.run(tool.get(f"{loopback.url}/json").purpose("Read").aexecute())
    assert loopback.authorizations == [None, None]


def test_sent_over_plain_http_to_an_opted_in_host(loopback, http_tools, token_env):
    """http_hosts opts a bound host in to plain http explicitly."""
    tool = http_tools(credentials=[{**LOCAL, "http_hosts": ["127.0.0.1"]}]).get(HttpTool)
    tool.get(f"{loopback.url}/json").purpose("Read").execute()
    assert loopback.authorizations == [f"Bearer {TOKEN}"]


def test_sent_over_https(tls_loopback, self_signed_cert, http_tools, token_env):
    """Over https the bound host gets its secret as before."""
    tool = http_tools(credentials=[LOCAL], ca_bundle=str(self_signed_cert[0])).get(HttpTool)
    tool.get(f"{tls_loopback.url}/json").purpose("Read").execute()
    assert tls_loopback.authorizations == [f"Bearer {TOKEN}"]


@pytest.mark.parametrize(("http_hosts", "expected"), [([], None), (["127.0.0.1"], f"Bearer {TOKEN}")])
def test_https_to_http_redirect_drops_the_secret(
    tls_loopback, loopback, self_signed_cert, http_tools, token_env, http_hosts, expected
):
    """After an https -> http redirect the secret is not sent again, unless the host is opted in."""
    credential = {**LOCAL, "http_hosts": http_hosts}
    options = {"credentials": [credential], "ca_bundle": str(self_signed_cert[0]), "follow_redirects": True}
    tool = http_tools(**options).get(HttpTool)
    target = f"{loopback.url}/json"
    response = tool.get(f"{tls_loopback.url}/redirect?to={quote(target)}").purpose("Read").execute()
    assert (response.status_code, response.redirects) == (200, 1)
    assert tls_loopback.authorizations == [f"Bearer {TOKEN}"]
    assert loopback.authorizations == [expected]


def test_scheme_decides_for_any_host(respx_mock, http_tools, token_env):
    """Unit view: same host, https gets the header, http does not; a wildcard opt-in works too."""
    respx_mock.route().mock(return_value=httpx.Response(200))
    creds = [
        {**LOCAL, "hosts": ["api.example.com"]},
        {**LOCAL, "hosts": ["*.lan.example"], "http_hosts": ["*.lan.example"], "header": "X-Key"},
    ]
    tool = http_tools(credentials=creds).get(HttpTool)
    for url in ("https://api.example.com/", "http://api.example.com/", "http://nas.lan.example/"):
        tool.get(url).purpose("Read").execute()
    sent = [call.request.headers for call in respx_mock.calls]
    assert sent[0]["authorization"] == f"Bearer {TOKEN}"
    assert "authorization" not in sent[1]
    assert sent[2]["x-key"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("http_hosts", [["other.example.com"], ["*.example.com"]])
def test_http_hosts_must_be_bound_hosts(http_hosts):
    """Opting in a host the secret is not bound to is a configuration error naming it."""
    credential = {**LOCAL, "hosts": ["api.example.com"], "http_hosts": http_hosts}
    with pytest.raises(ValueError, match=r"http_hosts .* not in hosts"):
        HttpOptions.from_runtime({"credentials": [credential]})


def test_opt_in_from_the_policy_file(tmp_path, respx_mock, make_tools, token_env):
    """[[tools.http.credentials]] takes http_hosts like any other credential field."""
    path = tmp_path / "policy.toml"
    path.write_text(
        """
version = 1
[allow]
tools = ["http"]

[[tools.http.credentials]]
hosts = ["nas.lan.example", "api.example.com"]
http_hosts = ["nas.lan.example"]
prefix = "Bearer "
env = "LOCAL_TOKEN"
""",
        encoding="utf-8",
    )
    respx_mock.route().mock(return_value=httpx.Response(200))
    with make_tools(toolbox_http.plugin, policy=ToolPolicy.from_file(path)) as tools:
        tool = tools.get(HttpTool)
        tool.get("http://nas.lan.example/").purpose("Read").execute()
        tool.get("http://api.example.com/").purpose("Read").execute()
    sent = [call.request.headers.get("authorization") for call in respx_mock.calls]
    assert sent == [f"Bearer {TOKEN}", None]
