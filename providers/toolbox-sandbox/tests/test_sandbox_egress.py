"""An egress profile reaches only what toolbox-http's egress policy allows, never the host's loopback.

The refusals run here; the allowed path runs in netns_egress_suite.py, inside a
network namespace of its own (``unshare -rn``) where the "remote" server listens
on an address of that namespace's loopback interface: no packet leaves it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sandbox_support import Host

from toolbox_http import EgressPolicy
from toolbox_sandbox import SandboxTool

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

FETCH = """
import json, socket, urllib.request
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except Exception as error:
        return type(error).__name__
def direct(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return "connected"
    except OSError as error:
        return type(error).__name__
"""


class Listener:
    """A loopback server on the host that records whether anyone connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            client.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def egress_tool(sandbox_tools, **egress) -> SandboxTool:
    profile = {"network": "egress", "egress": EgressPolicy(**egress), "limits": {"wall_seconds": 20.0}}
    return sandbox_tools({"default": profile}).get(SandboxTool)


def test_loopback_is_refused_through_the_proxy_and_directly(sandbox_tools, host: Host, listener: Listener):
    """Listed or resolved to, the host's loopback (PostgreSQL, Redis, the test's server) stays out."""
    tool = egress_tool(
        sandbox_tools,
        hosts=("127.0.0.1", "localhost", "db.test"),
        resolver=lambda host, port: ["127.0.0.1"],
    )
    code = (
        FETCH
        + f"""
print(json.dumps({{
    "pg": fetch("http://127.0.0.1:5432/"),
    "redis": fetch("http://localhost:6379/"),
    "named": fetch("http://db.test:{listener.port}/"),
    "tls": fetch("https://127.0.0.1:{listener.port}/"),
    "direct": direct({listener.port}),
}}))
"""
    )
    result = tool.run_python(code).audit_as("Try the host's services").execute()
    seen = json.loads(result.stdout)
    assert seen["pg"] == seen["redis"] == seen["named"] == 403, seen
    assert seen["tls"] in ("URLError", "OSError")  # CONNECT refused with 403
    assert seen["direct"] == "ConnectionRefusedError"
    assert listener.accepted == 0
    assert [(a.host, a.allowed, a.rule) for a in result.egress] == [
        ("127.0.0.1", False, "http:egress:address"),
        ("localhost", False, "http:egress:address"),
        ("db.test", False, "http:egress:address"),
        ("127.0.0.1", False, "http:egress:address"),
    ]
    assert result.network == "egress"


def test_hosts_ports_schemes_and_methods_outside_the_policy_are_refused(sandbox_tools, host: Host):
    tool = egress_tool(
        sandbox_tools,
        hosts=("api.test",),
        ports=(443,),
        methods=("GET",),
        resolver=lambda host, port: ["203.0.113.7"],
    )
    code = (
        FETCH
        + """
import urllib.request
post = urllib.request.Request("http://api.test:443/", data=b"x", method="POST")
print(json.dumps({
    "host": fetch("http://other.test/"),
    "port": fetch("http://api.test:8080/"),
    "method": fetch(post),
    "connect": fetch("https://api.test/"),
}))
"""
    )
    result = tool.run_python(code).audit_as("Try the policy's edges").execute()
    seen = json.loads(result.stdout)
    assert seen["host"] == seen["port"] == seen["method"] == 403, seen
    rules = [(a.method, a.host, a.rule) for a in result.egress]
    assert rules == [
        ("GET", "other.test", "http:egress:host"),
        ("GET", "api.test", "http:egress:port"),
        ("POST", "api.test", "http:egress:method"),
        ("CONNECT", "api.test", "http:egress:method"),  # methods cannot be seen inside TLS
    ]


def test_malformed_and_oversized_proxy_requests_get_400(sandbox_tools, host: Host):
    tool = egress_tool(sandbox_tools, hosts=("api.test",))
    code = """
import json, socket
def ask(raw):
    sock = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    sock.sendall(raw)
    answer = sock.recv(200)
    sock.close()
    return answer.split(b" ")[1].decode() if answer else "closed"
print(json.dumps([
    ask(b"GET /relative HTTP/1.1\\r\\n\\r\\n"),
    ask(b"NONSENSE\\r\\n\\r\\n"),
    ask(b"GET ftp://api.test/ HTTP/1.1\\r\\n\\r\\n"),
    ask(b"GET http://api.test/ HTTP/1.1\\r\\nX: " + b"a" * 20000 + b"\\r\\n\\r\\n"),
]))
"""
    result = tool.run_python(code).audit_as("Send junk to the proxy").execute()
    assert json.loads(result.stdout) == ["400", "400", "400", "400"], result.stderr


def test_the_allowed_path_in_a_network_namespace_of_its_own():
    """netns_egress_suite.py passes inside ``unshare -rn`` (fails, never skips, without unshare)."""
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is required for the egress suite"
    command = [
        unshare,
        "-rn",
        "sh",
        "-c",
        'ip link set lo up && ip addr add 10.99.0.1/32 dev lo && exec "$0" -m pytest -q -p no:randomly "$1"',
        sys.executable,
        str(HERE / "netns_egress_suite.py"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    completed = subprocess.run(
        command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-8000:]
    assert " passed" in output and "failed" not in output, output[-4000:]


def test_a_refused_request_with_a_body_still_gets_its_403():
    """The proxy answers a refused POST before reading its body: closing with that body unread reset
    the connection, and the client lost the 403 (RemoteDisconnected, 50 tries of 50). It now reads
    the rest (bounded) after answering, so each client reads its whole answer."""
    from toolbox_sandbox._profile import SandboxProfile
    from toolbox_sandbox._proxy import EgressProxy

    policy = EgressPolicy(hosts=("api.test",), methods=("GET",), resolver=lambda host, port: ["203.0.113.7"])
    profile = SandboxProfile.model_validate({"network": "egress", "egress": policy})
    body = b"x" * 65536
    with EgressProxy.for_profile(profile, None) as proxy:
        assert proxy is not None
        for _ in range(20):
            with socket.socket(socket.AF_UNIX) as client:
                client.settimeout(30)
                client.connect(proxy.socket_path)
                head = f"POST http://api.test/ HTTP/1.1\r\nContent-Length: {len(body)}\r\n\r\n"
                client.sendall(head.encode("ascii") + body)
                answer = b""
                while chunk := client.recv(4096):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 403 Forbidden"), answer[:80]
            assert b"toolbox sandbox egress refused api.test:80" in answer
        assert [(a.method, a.allowed) for a in proxy.attempts] == [("POST", False)] * 20
