"""The fleet guarantees, with real processes on the real Redis and PostgreSQL servers and a SQLite file.

Every race runs in both tiers; the full tier (``pytest --full``) runs them at full size (eight
racing processes, a budget of 1,000, a three-second rate-limit burst), the default tier with
fewer processes and calls and a burst of a second and a half.

Each test writes a policy file whose ``[state]`` names its own Redis namespace
or PostgreSQL tables, starts worker processes (``tests/state_worker.py``) and
counts what the tool's code really ran. Waits are bounded polls, never speed
assertions.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import state_worker
import zygote
from polling import wait_until
from state_support import POSTGRES_URL, REDIS_URL, free_port, start_redis, unique
from tiers import sized
from toolbox import ExecutionContext, Gateway, Status
from toolbox.audit import SqliteSink
from toolbox.state._redis_backend import RedisState, connect
from toolbox.state._sql_backend import SqlState

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


def _fleet(kind: str, tmp_path: Path) -> Iterator[Fleet]:
    backend = "redis" if kind == "redis" else "sql"
    url = {"redis": REDIS_URL, "postgres": POSTGRES_URL}.get(kind, f"sqlite:///{tmp_path / 'state.db'}")
    made = Fleet(tmp_path / "policy.toml", unique(), backend, url)
    yield made
    cleanup(backend, url, made.namespace)


@pytest.fixture(params=["redis", "postgres"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    yield from _fleet(request.param, tmp_path)


@pytest.fixture(params=["redis", "postgres", "sqlite"])
def counting_fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    """Also a SQLite file shared by the processes: its admission is a statement of its own."""
    yield from _fleet(request.param, tmp_path)


def start(mode: str, policy: Path, *args: str) -> subprocess.Popen[str]:
    """A worker process: ``python state_worker.py MODE POLICY ARGS``, forked by a zygote that
    imported toolbox and the backends once (tests/zygote.py says what stays real)."""
    return subprocess.Popen(
        zygote.shared(*state_worker.PRELOAD).command(WORKER, mode, str(policy), *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def start_race(go: Path, workers: list[subprocess.Popen[str]]) -> None:
    """Create ``go`` once every worker waits for it at the start line (a bounded poll).

    A worker that exited before it got there ends the wait too: `finish` reports its error.
    """
    wait_until(
        lambda: state_worker.at_start_line(go) == len(workers) or any(w.poll() is not None for w in workers),
        TIMEOUT,
    )
    go.touch()


def test_a_shared_budget_admits_exactly_its_size(counting_fleet: Fleet, tmp_path: Path) -> None:
    """Four processes spend twice a shared budget: exactly the budget is admitted and ran."""
    size = sized(100, 1000)
    extra = f'[[state.budgets]]\nper = "tenant"\ncalls = {size}\nwindow = 3600\n'
    policy = write_policy(
        tmp_path, counting_fleet.backend, counting_fleet.url, counting_fleet.namespace, extra
    )
    workers = [start("burst", policy, "--calls", str(size // 2)) for _ in range(4)]
    summaries = [finish(w)[-1] for w in workers]
    executions = sum(s["executions"] for s in summaries)
    successes = sum(s["statuses"].get("SUCCESS", 0) for s in summaries)
    exhausted = sum(s["statuses"].get("BUDGET_EXHAUSTED", 0) for s in summaries)
    assert (executions, successes, exhausted) == (size, size, size)


def test_racing_reviewers_then_one_grant_eight_racing_processes_one_execution(
    fleet: Fleet, tmp_path: Path
) -> None:
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
    # Four reviewers in four processes approve at once: exactly one decision is taken.
    decide_go = tmp_path / "decide-go"
    deciders = [
        start(
            "decide", policy, "--request", asked.approval.id, "--go", str(decide_go), "--principal", f"rev{i}"
        )
        for i in range(4)
    ]
    start_race(decide_go, deciders)
    decisions = [finish(d)[-1] for d in deciders]
    assert sorted(str(d["reason"]) for d in decisions) == ["ALREADY_DECIDED"] * 3 + ["None"]
    record = state.approvals.get(asked.approval.id)
    assert (
        record is not None
        and record.state == "approved"
        and record.decided_by in {f"rev{i}" for i in range(4)}
    )
    go = tmp_path / "go"
    args = ("--request", asked.approval.id, "--fingerprint", asked.approval.fingerprint, "--go", str(go))
    redeemers = sized(4, 8)
    workers = [start("redeem", policy, *args, "--principal", "requester") for _ in range(redeemers)]
    start_race(go, workers)
    lines = [finish(w)[-1] for w in workers]
    assert sum(line["executions"] for line in lines) == 1
    statuses = sorted(line["status"] for line in lines)
    assert statuses == ["DENIED"] * (redeemers - 1) + ["SUCCESS"]
    assert {line["message"] for line in lines if line["status"] == "DENIED"} == {
        "the approval was already used"
    }
    gateway.close()
    state.close()


def test_racing_processes_ask_for_approval_within_the_bound(fleet: Fleet, tmp_path: Path) -> None:
    # Processes of one principal ask for `calls` different calls, each twice, against a bound of
    # one less: every call but one gets a request (shared by its two processes), one is refused.
    processes = sized(4, 8)
    calls = processes // 2
    bound = calls - 1
    policy = write_policy(
        tmp_path, fleet.backend, fleet.url, fleet.namespace, f"max_pending_approvals = {bound}\n"
    )
    policy.write_text(
        policy.read_text(encoding="utf-8")
        + '\n[[guardrails.rules]]\nid = "APPROVE_ADD"\ntool = "add"\naction = "REQUIRE_APPROVAL"\n',
        encoding="utf-8",
    )
    go = tmp_path / "ask-go"
    workers = [
        start("ask", policy, "--go", str(go), "--principal", "looper", "--a", str(10 + i % calls))
        for i in range(processes)
    ]
    start_race(go, workers)
    lines = [finish(w)[-1] for w in workers]
    assert sum(line["executions"] for line in lines) == 0
    asked = [line for line in lines if line["status"] == "APPROVAL_REQUIRED"]
    full = [line for line in lines if line["reason"] == "APPROVAL_QUEUE_FULL"]
    assert (len(asked), len(full)) == (2 * bound, 2)
    assert len({line["request"] for line in asked}) == bound
    # Each call's two processes got the same request; the call left out was refused in both.
    assert all(len({x["request"] for x in asked if x["a"] == a}) == 1 for a in {x["a"] for x in asked})
    assert len({line["a"] for line in full}) == 1


def read_lines(
    process: subprocess.Popen[str], seen: list[dict[str, Any]], until: Any, timeout: float
) -> None:
    """Read ``process``'s JSON lines into ``seen`` until ``until(line)`` holds (bounded)."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = process.stdout.readline()
        if not raw:
            break
        line = json.loads(raw)
        seen.append(line)
        if until(line):
            return
    raise AssertionError(f"no matching line within {timeout} s; last: {seen[-1:]}")


def stop_loops(workers: list[subprocess.Popen[str]], stop: Path, seen: list[list[dict[str, Any]]]) -> None:
    stop.touch()
    for worker, lines in zip(workers, seen, strict=True):
        # Read the rest through the same text wrapper `readline` used: communicate() reads the
        # pipe's descriptor and would miss what the wrapper has already buffered (a torn line).
        stdout = worker.stdout
        assert stdout is not None
        chunks: list[str] = []
        reader = threading.Thread(target=lambda out=stdout, got=chunks: got.append(out.read()), daemon=True)
        reader.start()
        reader.join(TIMEOUT)
        if reader.is_alive():  # a worker that never stops: end it, then fail below
            worker.kill()
            reader.join()
        rest = "".join(chunks)
        _, err = worker.communicate(timeout=TIMEOUT)
        assert worker.returncode == 0, err[-2000:]
        lines.extend(json.loads(line) for line in rest.splitlines() if line.strip())


def test_kill_switch_from_the_cli_stops_every_worker(counting_fleet: Fleet, tmp_path: Path) -> None:
    policy = write_policy(
        tmp_path, counting_fleet.backend, counting_fleet.url, counting_fleet.namespace, audit=True
    )
    stop = tmp_path / "stop"
    workers = [start("loop", policy, "--stop", str(stop)) for _ in range(sized(2, 4))]
    seen: list[list[dict[str, Any]]] = [[] for _ in workers]
    try:
        for worker, lines in zip(workers, seen, strict=True):
            read_lines(worker, lines, lambda line: line["status"] == "SUCCESS", TIMEOUT)
        engaged = subprocess.run(
            zygote.toolbox_command(
                "kill", "engage", "--reason", "incident 7", "--who", "oncall", "--policy", str(policy)
            ),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert engaged.returncode == 0, engaged.stderr
        # Bounded poll: the configured delay is 0.2 s; the bound allows for a loaded machine.
        for worker, lines in zip(workers, seen, strict=True):
            read_lines(worker, lines, lambda line: line["reason"] == "KILL_SWITCH", 30.0)
        executions_at_kill = [lines[-1]["executions"] for lines in seen]
        status = subprocess.run(
            zygote.toolbox_command("kill", "status", "--json", "--policy", str(policy)),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        )
        [entry] = json.loads(status.stdout)["engaged"]
        assert (entry["tool"], entry["who"], entry["reason"]) == (None, "oncall", "incident 7")
    finally:
        stop_loops(workers, stop, seen)
    for lines, at_kill in zip(seen, executions_at_kill, strict=True):
        first = next(i for i, line in enumerate(lines) if line["reason"] == "KILL_SWITCH")
        # Once a worker refused, it refused every call after, and its tool never ran again.
        assert {line["reason"] for line in lines[first:]} == {"KILL_SWITCH"}
        assert lines[-1]["executions"] == at_kill
    sink = SqliteSink(tmp_path / "audit.db")
    try:
        events = sink.read_trace("toolbox-kill-switch")
    finally:
        sink.close()
    assert [(e.reason_code, e.principal, e.intent_text) for e in events] == [
        ("KILL_SWITCH_ENGAGED", "oncall", "incident 7")
    ]


def test_rate_limit_across_four_processes(counting_fleet: Fleet, tmp_path: Path) -> None:
    # Small enough that four workers exceed it even on a loaded machine (SQL state calls are
    # slow), so the test always sees refusals as well as admissions.
    limit = 5
    extra = f'[[state.rate_limits]]\nper = "tenant"\ncalls = {limit}\nwindow = 1.0\n'
    policy = write_policy(
        tmp_path, counting_fleet.backend, counting_fleet.url, counting_fleet.namespace, extra
    )
    # Each worker calls as fast as it can (its CPU) for this long: over a window and a half in
    # the default tier (so admissions fall in more than one window), three in the full tier.
    seconds = str(sized(1500, 3000) / 1000)
    workers = [start("burst", policy, "--calls", "100000", "--seconds", seconds) for _ in range(4)]
    summaries = [finish(w)[-1] for w in workers]
    spans = sorted((float(a), float(b)) for s in summaries for a, b in s["spans"])
    assert sum(s["statuses"].get("RATE_LIMITED", 0) for s in summaries) > 0
    assert len(spans) == sum(s["statuses"].get("SUCCESS", 0) for s in summaries) > limit
    # Each admission happened between a call's start and its tool's run. If more than `limit`
    # calls started and ran inside one window, their admissions fell in it: a violation.
    for left, _ in spans:
        inside = [1 for a, b in spans if a >= left and b < left + 1.0]
        assert len(inside) <= limit


def test_redis_outage_fails_closed_and_recovers_without_restart(tmp_path: Path) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis(port, tmp_path)
    extra = '[[state.budgets]]\nper = "tenant"\ncalls = 1000000\nwindow = 3600\n'
    policy = write_policy(tmp_path, "redis", url, unique(), extra)
    stop = tmp_path / "stop"
    workers = [start("loop", policy, "--stop", str(stop)) for _ in range(2)]
    seen: list[list[dict[str, Any]]] = [[] for _ in workers]
    try:
        for worker, lines in zip(workers, seen, strict=True):
            read_lines(worker, lines, lambda line: line["status"] == "SUCCESS", TIMEOUT)
        server.terminate()
        server.wait(timeout=30)
        for worker, lines in zip(workers, seen, strict=True):
            read_lines(worker, lines, lambda line: line["reason"] == "STATE_UNAVAILABLE", 60.0)
        server = start_redis(port, tmp_path)
        for worker, lines in zip(workers, seen, strict=True):
            read_lines(
                worker,
                lines,
                lambda line: line["status"] == "SUCCESS",
                60.0,
            )
    finally:
        stop_loops(workers, stop, seen)
        server.terminate()
        server.wait(timeout=30)
    for lines in seen:
        unavailable = [i for i, line in enumerate(lines) if line["reason"] == "STATE_UNAVAILABLE"]
        assert unavailable
        for i in unavailable:
            # A refused call ran zero times: the worker's execution count did not move.
            assert lines[i]["executions"] == lines[i - 1]["executions"]
            assert lines[i]["status"] == "DENIED"
        assert lines[-1]["status"] == "SUCCESS" or any(
            line["status"] == "SUCCESS" for line in lines[unavailable[-1] :]
        )
