"""TLS is always verified; ca_bundle chooses whom to trust (real HTTPS server on 127.0.0.1)."""

from __future__ import annotations

import asyncio

import pytest

from toolbox import AcknowledgementRequiredError
from toolbox.errors import ToolConnectionError
from toolbox_http import INSECURE_TLS_ENV, INSECURE_TLS_VALUE, HttpTool


def test_untrusted_certificate_is_rejected(tls_loopback, http_tools):
    """A self-signed certificate fails verification under the default trust store."""
    tool = http_tools().get(HttpTool)
    with pytest.raises(ToolConnectionError, match="TLS certificate verification failed"):
        tool.get(f"{tls_loopback.url}/json").purpose("Fetch rates").execute()


def test_untrusted_certificate_is_rejected_async(tls_loopback, http_tools):
    """The async path verifies certificates too."""
    tool = http_tools().get(HttpTool)
    with pytest.raises(ToolConnectionError, match="TLS certificate verification failed"):
        asyncio.run(tool.get(f"{tls_loopback.url}/json").purpose("Fetch rates").aexecute())


def test_ca_bundle_is_trusted(tls_loopback, self_signed_cert, http_tools):
    """With the certificate as ca_bundle, sync and async calls succeed."""
    tool = http_tools(ca_bundle=str(self_signed_cert[0])).get(HttpTool)
    url = f"{tls_loopback.url}/json"
    assert tool.get(url).purpose("Fetch rates").execute().json() == {"rates": {"EUR": 1.1}}
    response = asyncio.run(tool.get(url).purpose("Fetch rates").aexecute())
    assert response.json() == {"rates": {"EUR": 1.1}}


def _resolve_api_test(host, port):
    assert host == "api.test"
    return ["127.0.0.1"]


def test_tls_server_name_is_the_host_not_the_checked_address(tls_loopback, self_signed_cert, http_tools):
    """Connecting to the checked IP keeps SNI, certificate check and Host on the name (sync and async)."""
    egress = {"resolver": _resolve_api_test, "allow_networks": ["127.0.0.0/8"]}
    tool = http_tools(ca_bundle=str(self_signed_cert[0]), egress=egress).get(HttpTool)
    url = f"https://api.test:{tls_loopback.port}/json"
    assert tool.get(url).purpose("Fetch rates").execute().json() == {"rates": {"EUR": 1.1}}
    assert asyncio.run(tool.get(url).purpose("Fetch rates").aexecute()).status_code == 200
    assert [r[2] for r in tls_loopback.requests] == [f"api.test:{tls_loopback.port}"] * 2


def test_insecure_skip_verify_needs_its_acknowledgement(http_tools):
    """insecure_skip_verify without TOOLBOX_HTTP_INSECURE_TLS=i-accept-mitm-risk fails at tools.get()."""
    tools = http_tools(insecure_skip_verify=True)
    with pytest.raises(AcknowledgementRequiredError) as info:
        tools.get(HttpTool)
    assert info.value.env == INSECURE_TLS_ENV
    assert "i-accept-mitm-risk" in str(info.value)


@pytest.mark.parametrize("value", ["1", "true", "I-ACCEPT-MITM-RISK", " i-accept-mitm-risk"])
def test_insecure_ack_must_be_exact(http_tools, toolbox_env, value):
    """Only the exact value acknowledges."""
    toolbox_env[INSECURE_TLS_ENV] = value
    with pytest.raises(AcknowledgementRequiredError):
        http_tools(insecure_skip_verify=True).get(HttpTool)


def test_insecure_skip_verify_acknowledged(tls_loopback, http_tools, toolbox_env):
    """Acknowledged, an untrusted certificate is accepted (sync and async)."""
    toolbox_env[INSECURE_TLS_ENV] = INSECURE_TLS_VALUE
    tool = http_tools(insecure_skip_verify=True).get(HttpTool)
    url = f"{tls_loopback.url}/json"
    assert tool.get(url).purpose("Fetch rates").execute().status_code == 200
    assert asyncio.run(tool.get(url).purpose("Fetch rates").aexecute()).status_code == 200


def test_insecure_and_ca_bundle_conflict(http_tools, self_signed_cert, toolbox_env):
    """insecure_skip_verify with ca_bundle is a contradiction, refused as invalid options."""
    toolbox_env[INSECURE_TLS_ENV] = INSECURE_TLS_VALUE
    tools = http_tools(insecure_skip_verify=True, ca_bundle=str(self_signed_cert[0]))
    with pytest.raises(ValueError, match="ca_bundle"):
        tools.get(HttpTool)
