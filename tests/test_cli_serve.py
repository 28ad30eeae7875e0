"""``toolbox serve``: a real process on 127.0.0.1 serving a policy file's tools, and its refusals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

import zygote
from toolbox.cli import main
from toolbox.testing.credentials import write_api_keys

POLICY = """\
version = 1

[auth]
api_keys = "keys.toml"

[audit]
mode = "STRICT"
fallback = "fallback.jsonl"

[[audit.sinks]]
type = "sqlite"
path = "audit.db"
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_answers_on_loopback_with_the_policy_files_auth_and_audit(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY, encoding="utf-8")
    keys = write_api_keys(tmp_path / "keys.toml", {"ops": {"tenant": "acme", "roles": ["caller", "auditor"]}})
    port = free_port()
    # The console script, run by a child of the zygote that imported toolbox once; terminating
    # the launcher terminates the server, which stops as it would on its own (tests/zygote.py).
    process = subprocess.Popen(
        zygote.toolbox_command("serve", "--policy", "policy.toml", "--port", str(port)),
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=url, timeout=30)  # one (building one loads the CA bundle)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "toolbox serve did not start"
            time.sleep(0.2)
        headers = {"Authorization": f"Bearer {keys['ops']}"}
        call = client.post(
            "/v1/tools/calculator.evaluate/invoke",
            json={"arguments": {"expression": "6*7"}, "purpose": "Check the CLI"},
            headers=headers,
        )
        assert call.status_code == 200 and call.json()["content"] == 42
        trace = client.get(f"/v1/audit/traces/{call.json()['trace_id']}/verify", headers=headers)
        assert trace.json()["ok"] is True
        assert client.get("/v1/tools").status_code == 401
    finally:
        client.close()
        process.terminate()
        output = process.communicate(timeout=30)[0].decode(errors="replace")
    # Stopped as asked: uvicorn's graceful shutdown, then the signal re-raised.
    assert process.returncode == -signal.SIGTERM and "Application shutdown complete." in output, output
    assert keys["ops"] not in output
    # Where to go: the operator does not have to guess the console's address.
    assert f"toolbox serve: REST API at {url}/v1" in output
    assert f"toolbox serve: operator console at {url}/console" in output
    assert f"toolbox serve: MCP endpoint at {url}/mcp" in output
    assert (tmp_path / "audit.db").exists()


def test_serve_refuses_a_policy_without_auth(tmp_path: Path, capsys) -> None:
    (tmp_path / "policy.toml").write_text("version = 1\n", encoding="utf-8")
    assert main(["serve", "--policy", str(tmp_path / "policy.toml"), "--port", "1"]) == 2
    assert "needs an [auth] section" in capsys.readouterr().err


def test_serve_argument_checks(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    assert main(["serve"]) == 2
    assert "--policy" in capsys.readouterr().err
    assert main(["serve", "--policy", "p.toml", "--tls-cert", "c.pem"]) == 2
    assert "go together" in capsys.readouterr().err
