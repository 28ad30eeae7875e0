"""``toolbox serve --workers N``: N real worker processes share the audit store and the governance state.

Each worker builds its own app from the policy file; what one process would
keep to itself (kill switches, approvals, the session secret) must be shared,
so the command refuses a memory ``[state]``. The audit store is the same file
(SQLite: writers serialized by the database's lock) or the same PostgreSQL
schema; every trace a worker wrote verifies through whichever worker answers.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from toolbox.cli import main
from toolbox.testing.credentials import write_api_keys

POSTGRES_URL = os.environ.get(
    "TOOLBOX_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
CALLS = 24
BODY = {"arguments": {"expression": "6*7"}, "purpose": "Check the workers"}
INVOKE = "/v1/tools/calculator.evaluate/invoke"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def policy_text(kind: str, schema: str, namespace: str) -> str:
    """STRICT audit and shared state on SQLite files, or on PostgreSQL (a schema and a prefix of its own)."""
    head = 'version = 1\n\n[auth]\napi_keys = "keys.toml"\n\n'
    head += '[audit]\nmode = "STRICT"\nfallback = "fallback.jsonl"\n\n'
    if kind == "sqlite":
        return head + (
            '[[audit.sinks]]\ntype = "sqlite"\npath = "audit.db"\n\n'
            '[state]\nbackend = "sql"\nurl = "sqlite:///state.db"\nkill_switch_refresh = 0.0\n'
        )
    return head + (
        f'[[audit.sinks]]\ntype = "postgres"\nurl_env = "TEST_AUDIT_URL"\nschema = "{schema}"\n\n'
        f'[state]\nbackend = "sql"\nurl_env = "TEST_AUDIT_URL"\nnamespace = "{namespace}"\n'
        "kill_switch_refresh = 0.0\n"
    )


def worker_pids(parent: int) -> list[int]:
    """The uvicorn worker processes under ``parent``: forked from it, so under its command line."""
    try:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        command = Path(f"/proc/{parent}/cmdline").read_bytes()
    except OSError:
        return []
    found = []
    for pid in children:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes() == command:
                found.append(int(pid))
    return found


def caught_signals(pid: int) -> set[int]:
    """The standard signals ``pid`` has a handler for (``SigCgt`` in /proc: a bit per signal).

    Real-time ones (32 and up) are left out: the C library's threads use two for itself.
    """
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            mask = int(line.split()[1], 16)
            return {number for number in range(1, 32) if mask >> (number - 1) & 1}
    raise AssertionError(f"no SigCgt in /proc/{pid}/status")


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``toolbox serve --workers 2`` on the policy of ``kind``; stopped (its schema dropped) afterwards."""
    kind = request.param
    schema = f"toolbox_test_workers_{uuid.uuid4().hex[:10]}"
    namespace = f"w{uuid.uuid4().hex[:10]}"
    (tmp_path / "policy.toml").write_text(policy_text(kind, schema, namespace), encoding="utf-8")
    roles = ["caller", "auditor", "admin"]
    key = write_api_keys(tmp_path / "keys.toml", {"ops": {"tenant": "acme", "roles": roles}})["ops"]
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    command = [str(Path(sys.executable).with_name("toolbox")), "serve", "--policy", "policy.toml"]
    command += ["--port", str(port), "--workers", "2", "--no-console"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TEST_AUDIT_URL": POSTGRES_URL}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    # One client (building one loads the CA bundle, ~20 ms of CPU), no kept-alive connection: each
    # request on a connection of its own, so the kernel may hand it to either worker.
    client = httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))
    try:
        deadline = time.monotonic() + 120
        while (tmp_path / "serve.log").read_text(errors="replace").count("Application startup complete") < 2:
            assert process.poll() is None, (tmp_path / "serve.log").read_text(errors="replace")
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.5)
        yield {
            "client": client,
            "key": key,
            "kind": kind,
            "pid": process.pid,
            "dir": tmp_path,
            "schema": schema,
        }
    finally:
        client.close()
        process.terminate()
        process.wait(60)
        log.close()
        if kind == "postgres":
            engine = create_engine(POSTGRES_URL)
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                for table in conn.execute(
                    text("SELECT tablename FROM pg_tables WHERE tablename LIKE :prefix"),
                    {"prefix": f"{namespace}\\_%"},
                ).scalars():
                    conn.execute(text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))
            engine.dispose()


def call(client: httpx.Client, key: str) -> httpx.Response:
    """One governed call on a connection of its own (so the kernel may hand it to either worker)."""
    return client.post(INVOKE, json=BODY, headers={"Authorization": f"Bearer {key}"})


def success_responses(served: dict[str, Any]) -> int:
    """INVOCATION_RESPONSE events with status SUCCESS in the audit store: how often the tool ran."""
    if served["kind"] == "sqlite":
        engine = create_engine(f"sqlite:///{served['dir'] / 'audit.db'}")
        tables = ["audit_events", "audit_pending"]
    else:
        engine = create_engine(POSTGRES_URL)
        tables = [f'"{served["schema"]}".audit_events']
    try:
        with engine.connect() as conn:
            return sum(
                int(
                    conn.execute(
                        text(
                            f"SELECT count(*) FROM {table} "
                            "WHERE type = 'INVOCATION_RESPONSE' AND status = 'SUCCESS'"
                        )
                    ).scalar_one()
                )
                for table in tables
            )
    finally:
        engine.dispose()


def test_two_workers_share_one_audit_store_and_one_kill_switch(served: dict[str, Any]) -> None:
    """One `toolbox serve --workers 2` per store (starting one costs CPU): every promise."""
    _concurrent_calls_land_in_one_audit_store(served)
    _a_kill_switch_engaged_through_one_worker_stops_every_worker(served)
    _a_worker_that_dies_is_replaced_by_another_fork(served)


def _a_worker_that_dies_is_replaced_by_another_fork(served: dict[str, Any]) -> None:
    first, second = worker_pids(served["pid"])
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 60  # bounded poll: uvicorn's supervisor checks every 0.5 s
    while first in (workers := worker_pids(served["pid"])) or len(workers) < 2:
        assert time.monotonic() < deadline, "the dead worker was not replaced"
        time.sleep(0.1)
    assert second in workers  # the other one served on
    log = (served["dir"] / "serve.log").read_text(errors="replace")
    deadline = time.monotonic() + 60
    while log.count("Application startup complete") < 3:  # the new worker is serving too
        assert time.monotonic() < deadline, log
        time.sleep(0.1)
        log = (served["dir"] / "serve.log").read_text(errors="replace")
    answers = [call(served["client"], served["key"]) for _ in range(8)]
    assert [a.status_code for a in answers] == [200] * 8


def _concurrent_calls_land_in_one_audit_store(served: dict[str, Any]) -> None:
    client, key = served["client"], served["key"]
    workers = worker_pids(served["pid"])
    assert len(workers) == 2  # forked from the command, which had imported everything already
    for worker in workers:  # with a fresh interpreter's handlers, plus uvicorn's own, not the supervisor's
        assert caught_signals(worker) <= {signal.SIGINT, signal.SIGTERM}, caught_signals(worker)
    assert signal.SIGHUP in caught_signals(served["pid"])  # what the supervisor queues for its loop
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: call(client, key), range(CALLS)))
    assert [a.status_code for a in answers] == [200] * CALLS, [
        a.text for a in answers if a.status_code != 200
    ]
    assert all(a.json()["content"] == 42 for a in answers)
    assert success_responses(served) == CALLS
    headers = {"Authorization": f"Bearer {key}"}
    for answer in answers:  # each trace, written by one worker, read back through either
        trace = answer.json()["trace_id"]
        verified = client.get(f"/v1/audit/traces/{trace}/verify", headers=headers)
        assert verified.status_code == 200 and verified.json()["ok"] is True, verified.text
        events = client.get(f"/v1/audit/traces/{trace}", headers=headers).json()
        assert len(events["events"]) == 4


def _a_kill_switch_engaged_through_one_worker_stops_every_worker(served: dict[str, Any]) -> None:
    client, key = served["client"], served["key"]
    headers = {"Authorization": f"Bearer {key}"}
    engaged = client.put("/v1/kill-switch", json={"engaged": True, "reason": "incident 7"}, headers=headers)
    assert engaged.status_code == 200, engaged.text
    ran_before = success_responses(served)
    with ThreadPoolExecutor(8) as pool:
        refused = list(pool.map(lambda _: call(client, key), range(12)))
    for answer in refused:  # whichever worker took the connection
        assert answer.status_code == 403, answer.text
        problem = answer.json()
        assert (problem["reason_code"], problem["tool_status"], problem["attempts"]) == (
            "KILL_SWITCH",
            "DENIED",
            0,
        )
        trace = problem["trace_id"]
        events = client.get(f"/v1/audit/traces/{trace}", headers=headers).json()["events"]
        assert [(e["reason_code"], e["status"]) for e in events if e["type"] == "GOVERNANCE_DECISION"] == [
            ("KILL_SWITCH", "DENIED")
        ]
    assert success_responses(served) == ran_before  # the tool's code ran zero times
    released = client.put("/v1/kill-switch", json={"engaged": False, "reason": "resolved"}, headers=headers)
    assert released.status_code == 200
    assert call(client, key).status_code == 200


def test_workers_need_shared_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n\n[auth]\napi_keys = "keys.toml"\n', encoding="utf-8")
    write_api_keys(tmp_path / "keys.toml", {"ops": {"tenant": "acme", "roles": ["caller"]}})
    assert main(["serve", "--policy", str(policy), "--port", "1", "--workers", "2"]) == 2
    error = capsys.readouterr().err
    assert "--workers 2 needs state the workers share" in error
    assert 'backend = "sql" or "redis"' in error


@pytest.mark.parametrize("workers", ["0", "-1", "65"])
def test_workers_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: str) -> None:
    assert main(["serve", "--policy", str(tmp_path / "p.toml"), "--workers", workers]) == 2
    assert "--workers must be from 1 to 64" in capsys.readouterr().err


def _simple_policy(tmp_path: Path) -> Path:
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text("sqlite", "", ""), encoding="utf-8")
    write_api_keys(tmp_path / "keys.toml", {"ops": {"tenant": "acme", "roles": ["caller"]}})
    return policy


def test_a_single_worker_serves_with_its_startup_objects_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    seen: dict[str, Any] = {}

    def run(app: Any, **options: Any) -> None:  # instead of serving: what uvicorn would be given
        seen.update(options, app=app, frozen=gc.get_freeze_count())

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.chdir(tmp_path)
    try:
        assert main(["serve", "--policy", str(_simple_policy(tmp_path)), "--port", "8089"]) == 0
    finally:
        gc.unfreeze()
    assert seen["frozen"] > 10_000  # FastAPI, pydantic, SQLAlchemy, the catalog: out of the collector's walk
    assert seen["workers"] is None and seen["factory"] is False
    seen["app"].state.service.served.close()


def test_each_worker_builds_its_app_from_the_commands_options_and_freezes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from toolbox.cli._serve import worker_app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: seen.update(options, app=app))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBOX_SERVE_WORKER", raising=False)
    policy = _simple_policy(tmp_path)
    assert main(["serve", "--policy", str(policy), "--port", "8089", "--workers", "3", "--no-console"]) == 0
    assert (seen["app"], seen["factory"], seen["workers"]) == ("toolbox.cli._serve:worker_app", True, 3)
    options = json.loads(os.environ["TOOLBOX_SERVE_WORKER"])
    assert options["policy"] == str(policy) and options["console"] is False
    # The secret made for the run is gone once the command returns; no secret travels in the env.
    assert not Path(options["secret_file"]).exists()
    secret = tmp_path / "secret"
    secret.write_text("s" * 32)
    options["secret_file"] = str(secret)
    monkeypatch.setenv("TOOLBOX_SERVE_WORKER", json.dumps(options))
    try:
        app = worker_app()
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
    assert app.state.service.served.shared_state is True
    app.state.service.served.close()


def test_workers_are_forked_only_while_no_other_thread_or_event_loop_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a fork would copy of another thread is a lock it may hold: then a worker is spawned."""
    import asyncio
    import threading

    from toolbox.cli._workers import fork_safe

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert fork_safe()

    async def in_a_loop() -> bool:
        return fork_safe()

    assert asyncio.run(in_a_loop()) is False
    with monkeypatch.context() as on_macos:
        on_macos.setattr(sys, "platform", "darwin")
        assert not fork_safe()
    monkeypatch.undo()
    other = threading.Event()
    thread = threading.Thread(target=other.wait)
    thread.start()
    try:
        assert not fork_safe()
    finally:
        other.set()
        thread.join()


def test_uvicorn_forks_its_workers_inside_forked_workers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from multiprocessing.context import ForkProcess, SpawnProcess

    import uvicorn
    from uvicorn import _subprocess

    from toolbox.cli import _workers

    config = uvicorn.Config("toolbox.cli._serve:worker_app", factory=True)
    spawn = _subprocess.spawn
    with _workers.forked_workers():
        monkeypatch.setattr(_workers, "fork_safe", lambda: True)
        assert isinstance(_subprocess.get_subprocess(config, print, []), ForkProcess)
        monkeypatch.setattr(_workers, "fork_safe", lambda: False)
        assert isinstance(_subprocess.get_subprocess(config, print, []), SpawnProcess)
    assert _subprocess.spawn is spawn
    assert isinstance(_subprocess.get_subprocess(config, print, []), SpawnProcess)
