"""The fleet guarantees, with real processes on the real Redis and PostgreSQL servers.

Each test writes a policy file whose ``[state]`` names its own Redis namespace
or PostgreSQL tables, starts worker processes (``tests/state_worker.py``) and
counts what the tool's code really ran. Waits are bounded polls, never speed
assertions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import state_worker
from state_support import POSTGRES_URL, REDIS_URL, unique
from toolbox import ExecutionContext, Gateway, Status
from toolbox.state.redis_backend import RedisState, connect
from toolbox.state.sql_backend import SqlState

WORKER = str(Path(__file__).with_name("state_worker.py"))
TIMEOUT = 180.0


@dataclass
class Fleet:
    """A policy file on one backend, and how to clean the backend up."""

    policy: Path
    namespace: str
    backend: str
    url: str


def write_policy(
    directory: Path, backend: str, url: str, namespace: str, extra: str = "", *, audit: bool = False
) -> Path:
    path = directory / "policy.toml"
    trail = f'[audit]\nmode = "STRICT"\n[[audit.sinks]]\ntype = "sqlite"\npath = "{directory / "audit.db"}"\n'
    path.write_text(
        f"""version = 1

{trail if audit else ""}
[state]
backend = "{backend}"
url = "{url}"
namespace = "{namespace}"
kill_switch_refresh = 0.2
{extra}
""",
        encoding="utf-8",
    )
    return path


def cleanup(backend: str, url: str, namespace: str) -> None:
    if backend == "redis":
        state = RedisState(connect(url), namespace=namespace)
        client = state._client
        pattern = state.prefix.replace("{", "\\{").replace("}", "\\}") + "*"
        keys = list(client.scan_iter(match=pattern))
        if keys:
            client.delete(*keys)
        state.close()
    else:
        sql = SqlState(url, prefix=f"toolbox_{namespace}_")
        sql.drop()
        sql.close()


@pytest.fixture(params=["redis", "postgres"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    backend = "redis" if request.param == "redis" else "sql"
    url = REDIS_URL if backend == "redis" else POSTGRES_URL
    made = Fleet(tmp_path / "policy.toml", unique(), backend, url)
    yield made
    cleanup(backend, url, made.namespace)


def start(mode: str, policy: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, mode, str(policy), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_shared_budget_of_1000_admits_exactly_1000(fleet: Fleet, tmp_path: Path) -> None:
    extra = '[[state.budgets]]\nper = "tenant"\ncalls = 1000\nwindow = 3600\n'
    policy = write_policy(tmp_path, fleet.backend, fleet.url, fleet.namespace, extra)
    workers = [start("burst", policy, "--calls", "500") for _ in range(4)]
    summaries = [finish(w)[-1] for w in workers]
    executions = sum(s["executions"] for s in summaries)
    successes = sum(s["statuses"].get("SUCCESS", 0) for s in summaries)
    exhausted = sum(s["statuses"].get("BUDGET_EXHAUSTED", 0) for s in summaries)
    assert (executions, successes, exhausted) == (1000, 1000, 1000)


def test_one_grant_eight_racing_processes_one_execution(fleet: Fleet, tmp_path: Path) -> None:
    extra = ""
    policy = write_policy(tmp_path, fleet.backend, fleet.url, fleet.namespace, extra)
    policy.write_text(
        policy.read_text(encoding="utf-8")
        + '\n[[guardrails.rules]]\nid = "APPROVE_ADD"\ntool = "add"\naction = "REQUIRE_APPROVAL"\n',
        encoding="utf-8",
    )
    loaded, governance = state_worker.governance(str(policy))
    gateway = Gateway.load(policy=loaded, providers=[state_worker.add], discover=False, governance=governance)

    context = ExecutionContext(tenant="acme", principal="requester", run_id="fleet-run")
    asked = gateway.invoke("add", state_worker.CALL, context=context)
    assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
    state = governance.state
    assert state is not None and state.approvals is not None
    state.approvals.decide(asked.approval.id, approve=True, decided_by="reviewer", reason="ok")
    go = tmp_path / "go"
    args = ("--request", asked.approval.id, "--fingerprint", asked.approval.fingerprint, "--go", str(go))
    workers = [start("redeem", policy, *args, "--principal", "requester") for _ in range(8)]
    time.sleep(0.5)  # not an assertion: let them reach the start line (late ones race just the same)
    go.touch()
    lines = [finish(w)[-1] for w in workers]
    assert sum(line["executions"] for line in lines) == 1
    statuses = sorted(line["status"] for line in lines)
    assert statuses == ["DENIED"] * 7 + ["SUCCESS"]
    assert {line["message"] for line in lines if line["status"] == "DENIED"} == {
        "the approval was already used"
    }
    gateway.close()
    state.close()
