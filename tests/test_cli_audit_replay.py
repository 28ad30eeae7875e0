"""`toolbox audit replay` and the trace-head checks of `toolbox audit verify`, on real stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import audit_scale_support as support
from audit_faults import FlakySink
from audit_sql_support import POSTGRES_URL, Store, event, make_store
from toolbox import ExecutionContext, Status
from toolbox.audit import AuditSinkError, AuditTrail, JsonlSink
from toolbox.cli import main

URL_VARIABLE = "TOOLBOX_TEST_REPLAY_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv(URL_VARIABLE, POSTGRES_URL)
    yield from make_store(request.param, tmp_path)


def store_args(store: Store) -> list[str]:
    if store.kind == "sqlite":
        return ["--sqlite", store.location]
    return ["--postgres-url-env", URL_VARIABLE, "--schema", str(store.schema)]


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def refused_calls(tmp_path: Path, count: int, run_id: str = "lost-run") -> Path:
    """A fallback file holding the events of ``count`` calls a failing store refused."""
    fallback = tmp_path / "fallback.jsonl"
    support.EXECUTIONS.clear()
    sink = FlakySink()
    sink.failing = True
    gateway = support.governed(AuditTrail(sink, fallback_path=fallback))
    context = ExecutionContext(tenant="t", principal="p", run_id=run_id)
    for _ in range(count):
        result = gateway.invoke("add", support.CALL, context=context)
        assert (result.status, result.reason_code) == (Status.DENIED, "AUDIT_UNAVAILABLE")
    assert support.EXECUTIONS == []
    support.EXECUTIONS.clear()
    return fallback


def test_replay_twice_stores_each_event_once(store: Store, tmp_path: Path, capsys) -> None:
    sink = store.sink()
    sink.append([event("lost-run")])  # the trace already has an event: replay continues it
    fallback = refused_calls(tmp_path, 3)
    before = fallback.read_bytes()
    status, out, err = run(capsys, "audit", "replay", fallback, *store_args(store))
    assert (status, err) == (0, "")
    assert out == "replayed 9 event(s) of 1 trace(s): 9 stored, 0 already stored\nchain intact\n"
    status, out, _ = run(capsys, "audit", "replay", fallback, *store_args(store))
    assert status == 0
    assert out.startswith("replayed 9 event(s) of 1 trace(s): 0 stored, 9 already stored\n")
    assert fallback.read_bytes() == before  # never changed: delete it once it verifies
    records = sink.read_trace("lost-run")
    assert [r.sequence for r in records] == list(range(1, 11))
    kept_ids = [json.loads(line)["event_id"] for line in before.splitlines()]
    assert [r.event_id for r in records[1:]] == kept_ids  # in file order
    status, out, _ = run(capsys, "audit", "verify", *store_args(store))
    assert (status, out) == (0, "OK: 10 events in 1 trace, chain intact\n")


def test_replay_json_and_invalid_lines(store: Store, tmp_path: Path, capsys) -> None:
    """Bad lines are skipped and named by number, never echoed; the valid ones are stored."""
    store.sink().schema_version()
    fallback = refused_calls(tmp_path, 1)
    lines = fallback.read_text(encoding="ascii").splitlines()
    secret = "sk-live-SECRET-TOKEN"
    forged = json.loads(lines[0]) | {"sequence": 99, "hash": "ab" * 32, "event_id": "forged-1"}
    bad = [f'{{"event_id": "{secret}"', "[" * 100_000, json.dumps({"type": "NOPE", "x": secret})]
    fallback.write_text("\n".join([lines[0], *bad, *lines[1:], json.dumps(forged)]) + "\n", encoding="ascii")
    status, out, err = run(capsys, "audit", "replay", fallback, *store_args(store), "--json")
    assert status == 1
    document = json.loads(out)
    assert document["invalid_lines"] == [2, 3, 4]
    assert (document["stored"], document["problems"], document["ok"]) == (4, [], False)
    assert secret not in out + err
    assert "3 line(s) of the fallback file are not valid events" in err
    records = store.sink().read_trace("lost-run")
    assert [r.sequence for r in records] == [1, 2, 3, 4]  # the chain fields of a line are never trusted
    assert records[-1].event_id == "forged-1" and records[-1].hash != "ab" * 32


def test_replay_errors(store: Store, tmp_path: Path, capsys) -> None:
    store.sink().schema_version()
    status, _, err = run(capsys, "audit", "replay", tmp_path / "absent.jsonl", *store_args(store))
    assert status == 2 and "does not exist" in err
    status, _, err = run(capsys, "audit", "replay", tmp_path, *store_args(store))  # a directory
    assert status == 2 and "is not a file" in err
    status, _, err = run(capsys, "audit", "replay", "--sqlite", tmp_path / "absent.db")
    assert status == 2 and "FALLBACK_FILE" in err


def test_replay_with_the_store_down_changes_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    fallback = refused_calls(tmp_path, 1)
    before = fallback.read_bytes()
    monkeypatch.setenv(URL_VARIABLE, "postgresql://auditor:hunter2@127.0.0.1:1/audit")
    status, out, err = run(capsys, "audit", "replay", fallback, "--postgres-url-env", URL_VARIABLE)
    assert (status, out) == (2, "") and err.startswith("toolbox: error: ")
    assert "hunter2" not in err
    assert fallback.read_bytes() == before


def test_replay_into_a_jsonl_store_is_idempotent_too(tmp_path: Path, capsys) -> None:
    audit = tmp_path / "audit.jsonl"
    JsonlSink(audit).append([event("lost-run")])
    fallback = refused_calls(tmp_path, 2)
    for stored in (6, 0):
        status, out, _ = run(capsys, "audit", "replay", fallback, "--jsonl", audit)
        assert status == 0 and f": {stored} stored" in out
    assert len(audit.read_text().splitlines()) == 7


def test_verify_finds_a_removed_last_event_and_a_removed_trace(store: Store, capsys) -> None:
    sink = store.sink()
    sink.append([event("cut") for _ in range(3)])
    sink.append([event("gone") for _ in range(2)])
    assert run(capsys, "audit", "verify", *store_args(store))[0] == 0
    store.tamper("DELETE FROM audit_events WHERE trace_id = 'cut' AND sequence = 3")
    store.tamper("DELETE FROM audit_events WHERE trace_id = 'gone'")
    status, out, err = run(capsys, "audit", "verify", *store_args(store))
    assert status == 1
    assert out.splitlines() == [
        "trace cut event #3 (-): event 3 removed from the end (the trace head records them)",
        "trace gone event #2 (-): trace removed: its head records 2 event(s)",
        "FAILED: 2 problems in 2 of 2 traces (2 events checked)",
    ]
    assert err == "toolbox: audit chain broken: 2 problems in 2 traces\n"
    status, out, _ = run(capsys, "audit", "verify", "gone", *store_args(store), "--json")
    document = json.loads(out)
    assert (status, document["ok"], document["events"]) == (1, False, 0)
    assert document["problems"][0]["problem"].startswith("trace removed")


def test_a_lost_response_is_replayed_into_its_place_in_the_chain(
    store: Store, tmp_path: Path, capsys, monkeypatch
) -> None:
    """STRICT over a real store: the response write fails after the call ran (audit_failed, kept in the
    fallback file); once the store works, replay puts it back and the whole trace verifies."""
    sink = store.sink()
    fallback = tmp_path / "fallback.jsonl"
    gateway = support.governed(AuditTrail(sink, fallback_path=fallback))
    context = ExecutionContext(tenant="t", principal="p", run_id="half-recorded")
    support.EXECUTIONS.clear()
    original = sink._group._write  # the sink's group write (test-only)
    calls = {"n": 0}

    def failing_second_write(batches):  # the opening is stored, the response is not
        calls["n"] += 1
        if calls["n"] == 2:
            raise AuditSinkError("disk full")
        original(batches)

    monkeypatch.setattr(sink._group, "_write", failing_second_write)
    result = gateway.invoke("add", support.CALL, context=context)
    assert (result.status, result.audit_failed, len(support.EXECUTIONS)) == (Status.SUCCESS, True, 1)
    monkeypatch.setattr(sink._group, "_write", original)
    assert len(sink.read_trace("half-recorded")) == 3
    status, out, _ = run(capsys, "audit", "replay", fallback, *store_args(store))
    assert (status, out.splitlines()[0]) == (
        0,
        "replayed 1 event(s) of 1 trace(s): 1 stored, 0 already stored",
    )
    records = sink.read_trace("half-recorded")
    assert [r.type.value for r in records][-1] == "INVOCATION_RESPONSE" and len(records) == 4
    assert run(capsys, "audit", "verify", "half-recorded", *store_args(store))[0] == 0
