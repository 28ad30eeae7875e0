"""TLS is always verified; ca_bundle chooses whom to trust (real HTTPS server on 127.0.0.1)."""

from __future__ import annotations

import asyncio

import pytest

from toolbox import ToolConnectionError
from toolbox_http import HttpTool


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
