"""The egress proxy's allowed path, run only inside a network namespace of its own (see
test_sandbox_egress.py): the "remote" server listens on 10.99.0.1, an address of that
namespace's loopback interface, so nothing leaves the machine or reaches its services."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from typing import ClassVar

import pytest
from sandbox_support import ACK, ALLOW_SANDBOX

from toolbox.testing import build_tools
from toolbox_http import EgressPolicy
from toolbox_sandbox import SandboxTool, plugin

REMOTE = "10.99.0.1"


@pytest.fixture(autouse=True)
def _own_namespace():
    names = sorted(name for _, name in socket.if_nameindex())
    assert names == ["lo"], f"not in a namespace of its own (interfaces: {names})"


class Handler(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, str | None]]] = []

    def do_GET(self) -> None:
        Handler.seen.append((self.command, self.path, self.headers.get("Host")))
        body = b"x" * 200_000 if self.path == "/big" else json.dumps({"rates": {"EUR": 0.9}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def remote():
    server = http.server.ThreadingHTTPServer((REMOTE, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_allowed_host_is_reached_through_the_proxy(remote):
    egress = EgressPolicy(
        hosts=("rates.test",), allow_networks=("10.99.0.0/24",), resolver=lambda host, port: [REMOTE]
    )
    profile = {"network": "egress", "egress": egress, "limits": {"wall_seconds": 20.0}}
    tools = build_tools(
        plugin, policy=ALLOW_SANDBOX, env=ACK, options={"sandbox": {"profiles": {"default": profile}}}
    )
    code = f"""
import json, urllib.request
with urllib.request.urlopen("http://rates.test:{remote}/latest?base=USD", timeout=5) as response:
    print(json.loads(response.read())["rates"]["EUR"])
"""
    result = tools.get(SandboxTool).run_python(code).audit_as("Fetch rates").execute()
    assert (result.exit_code, result.stdout) == (0, "0.9\n"), result.stderr
    assert [(a.method, a.host, a.port, a.allowed) for a in result.egress] == [
        ("GET", "rates.test", remote, True)
    ]
    assert Handler.seen == [("GET", "/latest?base=USD", f"rates.test:{remote}")]


def test_the_proxy_stops_relaying_past_egress_bytes(remote):
    egress = EgressPolicy(
        hosts=("rates.test",), allow_networks=("10.99.0.0/24",), resolver=lambda host, port: [REMOTE]
    )
    profile = {"network": "egress", "egress": egress, "limits": {"wall_seconds": 20.0, "egress_bytes": 65536}}
    tools = build_tools(
        plugin, policy=ALLOW_SANDBOX, env=ACK, options={"sandbox": {"profiles": {"default": profile}}}
    )
    code = f"""
import urllib.request
try:
    with urllib.request.urlopen("http://rates.test:{remote}/big", timeout=5) as response:
        print(len(response.read()))
except Exception as error:
    print(type(error).__name__)
"""
    result = tools.get(SandboxTool).run_python(code).audit_as("Fetch too much").execute()
    assert result.stdout.strip() == "IncompleteRead", result.stdout + result.stderr
