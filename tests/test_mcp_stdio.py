"""``toolbox mcp serve`` as a real child process, spoken to over stdio by the official client.

The child discovers the scenario tools through a fake installed distribution
(an entry point on its ``PYTHONPATH``), reads the policy file (with a JSON
Lines ``[audit]``) and records each execution in a log file, so the test
counts what ran in the other process and reads the trail with
``toolbox audit show``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

import mcp_scenario_tools as scenario
import zygote
from test_mcp_serve import PURPOSE, SCENARIOS, outcome, trace_of
from toolbox.cli import main

TESTS = Path(__file__).resolve().parent

# Business outcomes need a mapper in code (not expressible in a policy file): over stdio the
# settle call simply succeeds, and the failing tool shows ERROR instead.
STDIO_SCENARIOS = [s for s in SCENARIOS if s[0] not in ("business-failure", "kill-switch")]


class Child:
    """What the child process is started with, and where it leaves its traces."""

    def __init__(
        self, tmp: Path, *, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()
    ) -> None:
        self.site = tmp / "site"
        self.site.mkdir(exist_ok=True)
        if not any(self.site.glob("*.dist-info")):
            scenario.write_scenario_distribution(self.site)
        self.log = tmp / "executions.log"
        self.audit = tmp / "audit.jsonl"
        self.policy = tmp / "policy.toml"
        self.policy.write_text(scenario.POLICY + scenario.audit_table(self.audit), encoding="utf-8")
        env = {
            "PYTHONPATH": f"{self.site}:{TESTS}",
            scenario.LOG_ENV: str(self.log),
            "TOOLBOX_POLICY": "",
            **(extra_env or {}),
        }
        # The console script in a child forked by a zygote that imported toolbox once
        # (tests/zygote.py); the child's PYTHONPATH is applied as at a normal start.
        command, *arguments = zygote.toolbox_command("mcp", "serve", "--policy", str(self.policy), *args)
        self.params = StdioServerParameters(command=command, args=arguments, env=env, cwd=str(tmp))

    def executions(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").split() if self.log.exists() else []

    def session(self, steps, *, mode: str = "auto"):
        async def main():
            async with Client(self.params, mode=mode) as connected:
                return await steps(connected)

        return anyio.run(main)

    def audit_show(self, trace_id: str) -> dict:
        shown = subprocess.run(
            zygote.toolbox_command("audit", "show", trace_id, "--jsonl", str(self.audit), "--json"),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return json.loads(shown.stdout)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_scenarios_through_a_child_process(tmp_path, mode):
    """list and every policy-file scenario through ``toolbox mcp serve``; the trail via ``audit show``."""
    child = Child(tmp_path)

    async def steps(connected):
        names = sorted(t.name for t in (await connected.list_tools()).tools)
        results = []
        for _, name, arguments, *_ in STDIO_SCENARIOS:
            before = len(child.executions())
            result = await connected.call_tool(name, arguments)
            results.append((result, len(child.executions()) - before))
        failed = await connected.call_tool("explode", {"item": "x", "purpose": PURPOSE})
        return names, results, failed

    names, results, failed = child.session(steps, mode=mode)
    assert names == ["calculator__evaluate", "explode", "halt", "lookup", "refund", "settle"]
    for (_, name, _, status, reason, error, executions, _), (result, ran) in zip(
        STDIO_SCENARIOS, results, strict=True
    ):
        assert ran == executions, name
        if status != "SUCCESS":
            assert result.is_error and outcome(result)["status"] == status
            assert (outcome(result)["reason_code"], outcome(result)["error_code"]) == (
                reason,
                error,
            )
    assert outcome(failed)["status"] == "ERROR" and "hunter2" not in failed.model_dump_json()
    trace_id = trace_of(failed)
    assert {trace_of(r) for r, _ in results} == {trace_id}
    shown = child.audit_show(trace_id)
    assert shown["chain_intact"] is True
    events = shown["events"]
    assert {(e["tenant"], e["principal"]) for e in events} == {("acme", "desktop")}
    decisions = [
        e["reason_code"] for e in events if e["type"] == "GOVERNANCE_DECISION" and e["decision"] == "DENY"
    ]
    assert decisions == ["POLICY_DENIED", "NOT_ACKNOWLEDGED", "GUARDRAIL_NO_SECRET_NOTE"]


def test_kill_switch_in_the_child(tmp_path):
    """TOOLBOX_KILL_SWITCH set for the process: nothing listed, calls refused, nothing ran."""
    child = Child(tmp_path, extra_env={"TOOLBOX_KILL_SWITCH": "1"})

    async def steps(connected):
        listed = (await connected.list_tools()).tools
        return listed, await connected.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE})

    listed, result = child.session(steps)
    assert listed == []
    assert outcome(result)["reason_code"] == "KILL_SWITCH"
    assert child.executions() == []


def test_flags_set_the_context_and_toolset(tmp_path):
    """--tenant/--principal/--role replace [mcp.context]; --toolset limits the endpoint."""
    child = Child(tmp_path, args=("--tenant", "globex", "--principal", "ops", "--toolset", "readers"))

    async def steps(connected):
        names = [t.name for t in (await connected.list_tools()).tools]
        called = await connected.call_tool("lookup", {"note_id": 2, "purpose": PURPOSE})
        refused = await connected.call_tool("refund", {"amount": 1, "audit_as": "Refund"})
        return names, called, refused

    names, called, refused = child.session(steps)
    assert sorted(names) == ["halt", "lookup"]
    assert outcome(refused)["reason_code"] == "NOT_IN_TOOLSET"
    assert child.executions() == ["lookup"]
    events = child.audit_show(trace_of(called))["events"]
    assert {(e["tenant"], e["principal"]) for e in events} == {("globex", "ops")}


def _serve(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    policy: str | None = None,
) -> tuple[int, str, str]:
    """``toolbox mcp serve`` in this process, through ``main(argv)``: a refusal to start needs no
    child (the stdio tests above prove the child itself)."""
    child = Child(tmp_path)
    if policy is not None:
        child.policy.write_text(policy, encoding="utf-8")
    monkeypatch.setenv("TOOLBOX_POLICY", "")
    monkeypatch.syspath_prepend(str(child.site))  # the scenario tools' distribution, as the child has it
    status = main(["mcp", "serve", "--policy", str(child.policy), *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "policy", "message"),
    [
        ((), "version = 1\n", "stdio needs the trusted context"),
        (("--tenant", "acme"), None, "--tenant and --principal are needed together"),
        (("--toolset", "nope"), None, "unknown toolset 'nope'; defined toolsets: readers"),
        (("--transport", "http"), None, "needs credentials: add an [auth] section"),
        (("--transport", "http", "--tenant", "a", "--principal", "b"), None, "drop --tenant"),
        (("--transport", "http", "--host", "0.0.0.0"), None, "needs credentials"),
        ((), "version = 1\n[mcp]\ncontext = 3\n", "mcp.context: must be a table"),
    ],
    ids=[
        "no-context",
        "half-context",
        "unknown-toolset",
        "http-no-auth",
        "http-flags",
        "public-no-auth",
        "bad-file",
    ],
)
def test_refuses_to_start(tmp_path, monkeypatch, capsys, args, policy, message):
    """A misconfigured serve exits 2 with one ``toolbox: error:`` line and no traceback."""
    status, out, err = _serve(tmp_path, monkeypatch, capsys, *args, policy=policy)
    assert status == 2, err
    assert message in err and "Traceback" not in err
    assert out == ""


def _with_auth(child: Child) -> dict[str, str]:
    from toolbox.testing.credentials import write_api_keys

    keys = write_api_keys(child.policy.parent / "keys.toml", {"alice": {"tenant": "tenant-a"}})
    text = child.policy.read_text(encoding="utf-8") + '\n[auth]\napi_keys = "keys.toml"\n'
    child.policy.write_text(text, encoding="utf-8")
    return keys


def test_http_transport_from_the_command_line(tmp_path):
    """``--transport http --port 0`` serves on loopback, prints its URL, and authenticates each request."""
    import httpx
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    child = Child(tmp_path)
    keys = _with_auth(child)
    assert child.params.env is not None
    process = subprocess.Popen(
        zygote.toolbox_command(
            "mcp", "serve", "--policy", str(child.policy), "--transport", "http", "--port", "0"
        ),
        env={"PATH": "/usr/bin:/bin", **child.params.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("toolbox mcp serve: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
        assert refused.status_code == 401

        async def main():
            headers = {"Authorization": f"Bearer {keys['alice']}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http)) as connected,
            ):
                return await connected.call_tool("lookup", {"note_id": 3, "purpose": PURPOSE})

        result = anyio.run(main)
        assert result.structured_content == {"note_id": 3, "text": "note 3"}
        assert child.executions() == ["lookup"]
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stderr is not None:
            process.stderr.close()
    events = child.audit_show(trace_of(result))["events"]
    assert {(e["tenant"], e["principal"]) for e in events} == {("tenant-a", "alice")}


def test_public_address_needs_allowed_host(tmp_path, monkeypatch, capsys):
    """With credentials configured, a non-loopback --host without --allowed-host still refuses to start."""
    child = Child(tmp_path)
    _with_auth(child)
    monkeypatch.setenv("TOOLBOX_POLICY", "")
    monkeypatch.syspath_prepend(str(child.site))
    args = ["mcp", "serve", "--policy", str(child.policy), "--transport", "http", "--host", "0.0.0.0"]
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2 and "--allowed-host" in err and "Traceback" not in err


def test_mcp_group_help(capsys):
    """``toolbox mcp`` is a command group; ``serve`` is listed in it."""
    assert main(["mcp", "--help"]) == 0
    assert "serve" in capsys.readouterr().out
