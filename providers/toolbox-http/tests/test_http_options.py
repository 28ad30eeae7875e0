"""HttpOptions: defaults, validation at tools.get() time, and what the tool builds from them."""

from __future__ import annotations

import ssl

import httpx
import pydantic
import pytest

from toolbox_http import INSECURE_TLS_ENV, INSECURE_TLS_VALUE, HttpOptions, HttpTool

MIB = 1024 * 1024


def test_defaults():
    """The defaults are the documented ones, with redirects off and no transport."""
    options = HttpOptions()
    assert (options.connect_timeout, options.read_timeout, options.total_timeout) == (5.0, 10.0, 30.0)
    assert (options.max_response_bytes, options.max_request_bytes) == (10 * MIB, 10 * MIB)
    assert options.ca_bundle is None
    assert options.transport is None
    assert options.async_transport is None


def test_options_are_frozen():
    """HttpOptions cannot be changed after validation."""
    with pytest.raises(pydantic.ValidationError):
        HttpOptions().read_timeout = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"connect_timeout": 0}, "field 'connect_timeout'"),
        ({"read_timeout": -1}, "field 'read_timeout'"),
        ({"total_timeout": float("inf")}, "field 'total_timeout'"),
        ({"max_response_bytes": "lots"}, "field 'max_response_bytes'"),
        ({"max_request_bytes": 0}, "field 'max_request_bytes'"),
        ({"ca_bundle": "/no/such/bundle.pem"}, "field 'ca_bundle'"),
        ({"transport": "not a transport"}, "field 'transport'"),
        ({"async_transport": httpx.BaseTransport()}, "field 'async_transport'"),
        ({"verify": False}, "field 'verify': Extra inputs are not permitted"),
        ({"max_redirects": 0}, "field 'max_redirects'"),
        ({"egress": {"hosts": ["bad host!"]}}, "field 'egress.hosts"),
        ({"egress": {"allow_networks": ["not-a-net"]}}, "field 'egress.allow_networks'"),
        ({"egress": {"schemes": ["ftp"]}}, "field 'egress.schemes'"),
        ({"egress": {"methods": ["TRACE"]}}, "field 'egress.methods'"),
        ({"egress": {"mode": "LOG"}}, "field 'egress.mode'"),
        ({"credentials": [{"hosts": ["a.example"]}]}, "field 'credentials"),
        ({"rate_limit": {"requests_per_second": 0}}, "field 'rate_limit.requests_per_second'"),
        ({"expect_content_types": ["json"]}, "field 'expect_content_types'"),
    ],
)
def test_invalid_options_fail_at_get(http_tools, options, match):
    """Bad options raise ValueError from tools.get(), naming the field but not the value."""
    tools = http_tools(**options)
    with pytest.raises(ValueError, match=match) as info:
        tools.get(HttpTool)
    assert "invalid options for tool 'http'" in str(info.value)
    assert "lots" not in str(info.value)


def test_ca_bundle_that_is_not_pem_fails_at_get(http_tools, tmp_path):
    """A ca_bundle file without certificates raises ValueError from tools.get()."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="ca_bundle"):
        http_tools(ca_bundle=str(bundle)).get(HttpTool)


def test_tls_context_always_verifies(http_tools):
    """The TLS context built for the tool requires a valid certificate and host name."""
    tool = http_tools().get(HttpTool)
    context = tool._clients.ssl_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert tool._clients.ssl_context() is context


def test_every_tool_shares_one_verifying_context_and_a_configured_bundle_gets_its_own(
    http_tools, self_signed_cert, toolbox_env
):
    """The bundled CAs are loaded once per process; a ``ca_bundle`` is read for its own tool."""
    first = http_tools().get(HttpTool)._clients.ssl_context()
    second = http_tools(read_timeout=2).get(HttpTool)._clients.ssl_context()
    assert first is second
    assert first.verify_mode is ssl.CERT_REQUIRED and first.check_hostname
    bundled = first.get_ca_certs()
    own = http_tools(ca_bundle=str(self_signed_cert[0])).get(HttpTool)._clients.ssl_context()
    assert own is not first
    assert own.verify_mode is ssl.CERT_REQUIRED and own.check_hostname
    assert len(own.get_ca_certs()) == 1
    assert first.get_ca_certs() == bundled  # the shared context did not learn the test's CA
    toolbox_env[INSECURE_TLS_ENV] = INSECURE_TLS_VALUE
    insecure = http_tools(insecure_skip_verify=True).get(HttpTool)._clients.ssl_context()
    assert insecure is not first and first.verify_mode is ssl.CERT_REQUIRED


def test_options_are_exposed(http_tools):
    """The validated options are available on the tool."""
    tool = http_tools(read_timeout=2, max_response_bytes=100).get(HttpTool)
    assert tool.options.read_timeout == 2.0
    assert tool.options.max_response_bytes == 100


class _RecordingTransport(httpx.MockTransport):
    closed = False

    def close(self) -> None:
        self.closed = True


def test_tools_close_keeps_a_caller_transport_open(http_tools):
    """Tools.close() closes the tool's client but not a transport the caller owns; the tool stays usable."""
    transport = _RecordingTransport(lambda request: httpx.Response(200))
    tools = http_tools(transport=transport)
    tool = tools.get(HttpTool)
    assert tool.get("http://127.0.0.1:9/").purpose("Probe").execute().is_success
    tools.close()
    assert not transport.closed
    assert tool.get("http://127.0.0.1:9/").purpose("Probe again").execute().is_success
