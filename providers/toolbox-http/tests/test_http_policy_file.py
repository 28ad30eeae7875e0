"""HttpTool options from the policy file's [tools.http] table."""

from __future__ import annotations

import httpx
import pytest

import toolbox_http.plugin
from toolbox import ToolPolicy
from toolbox_http import EgressDeniedError, HttpTool

POLICY = """
version = 1
[allow]
tools = ["http"]

[tools.http]
read_timeout = 2.5
follow_redirects = true

[tools.http.egress]
schemes = ["https"]
hosts = ["api.example.com", "*.example.net"]
mode = "ENFORCE"

[[tools.http.credentials]]
hosts = ["api.example.com"]
header = "Authorization"
prefix = "Bearer "
env = "EXAMPLE_TOKEN"

[tools.http.rate_limit]
requests_per_second = 50
burst = 5
"""


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    return ToolPolicy.from_file(path)


def test_file_options_configure_the_tool(respx_mock, make_tools, policy, toolbox_env):
    """Egress, credentials, redirects and limits come from the file; nothing else is needed in code."""
    toolbox_env["EXAMPLE_TOKEN"] = "file-token"
    route = respx_mock.get("https://api.example.com/rates").mock(return_value=httpx.Response(200))
    with make_tools(toolbox_http.plugin, policy=policy) as tools:
        tool = tools.get(HttpTool)
        assert tool.options.read_timeout == 2.5
        assert tool.options.follow_redirects
        assert tool.options.rate_limit is not None and tool.options.rate_limit.burst == 5
        tool.get("https://api.example.com/rates").purpose("Read").execute()
        with pytest.raises(EgressDeniedError) as info:
            tool.get("https://evil.example.org/")
        assert info.value.rule == "http:egress:host"
        with pytest.raises(EgressDeniedError, match="scheme"):
            tool.get("http://api.example.com/")
    assert route.calls.last.request.headers["authorization"] == "Bearer file-token"


def test_code_options_merge_over_the_file(respx_mock, make_tools, policy):
    """Options in code win key by key; the file's egress hosts stay while code adds a resolver."""

    def resolver(host, port):
        return ["93.184.216.34"]

    options = {"http": {"read_timeout": 1.0, "egress": {"resolver": resolver}}}
    with make_tools(toolbox_http.plugin, policy=policy, options=options) as tools:
        tool = tools.get(HttpTool)
        assert tool.options.read_timeout == 1.0
        assert tool.options.egress.resolver is resolver
        assert tool.options.egress.hosts == ("api.example.com", "*.example.net")


def test_invalid_file_option_fails_at_get(make_tools, tmp_path):
    """A bad value in [tools.http] is refused when the tool is built, naming the field."""
    path = tmp_path / "policy.toml"
    path.write_text('version = 1\n[allow]\ntools = ["http"]\n[tools.http.egress]\nhosts = ["no spaces"]\n')
    tools = make_tools(toolbox_http.plugin, policy=ToolPolicy.from_file(path))
    with tools, pytest.raises(ValueError, match=r"field 'egress\.hosts"):
        tools.get(HttpTool)
