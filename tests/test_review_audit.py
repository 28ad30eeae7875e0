"""Security review of audit at scale: attacks on group commit, the fallback file and replay."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import audit_scale_support as support
from audit_sql_support import POSTGRES_URL, Store, event, make_store
from toolbox import ExecutionContext, Status
from toolbox.audit import AuditTrail, EventType
from toolbox.audit._fallback import event_line
from toolbox.cli import main

URL_VARIABLE = "TOOLBOX_TEST_REPLAY_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv(URL_VARIABLE, POSTGRES_URL)
    support.EXECUTIONS.clear()
    yield from make_store(request.param, tmp_path)
    support.EXECUTIONS.clear()


def store_args(store: Store) -> list[str]:
    if store.kind == "sqlite":
        return ["--sqlite", store.location]
    return ["--postgres-url-env", URL_VARIABLE, "--schema", str(store.schema)]


def test_a_nul_in_a_model_chosen_name_is_stored_not_refused_by_the_store(
    store: Store, tmp_path: Path
) -> None:
    """PostgreSQL refuses NUL in text: the denial of ``add\\x00`` must still be recorded, escaped."""
    sink = store.sink()
    fallback = tmp_path / "fallback.jsonl"
    gateway = support.governed(AuditTrail(sink, fallback_path=fallback))
    context = ExecutionContext(tenant="t", principal="p", run_id="nul-name")
    result = gateway.invoke("add\x00evil", {"a": 1, "b": 2, "purpose": "Sum"}, context=context)
    assert (result.status, result.reason_code) == (Status.DENIED, "TOOL_UNAVAILABLE")
    assert support.EXECUTIONS == []
    assert not result.audit_failed
    records = sink.read_trace("nul-name")
    assert [r.type for r in records] == [EventType.GOVERNANCE_DECISION]
    assert records[0].name == "add\\x00evil" and records[0].reason_code == "TOOL_UNAVAILABLE"
    assert not fallback.exists() or fallback.read_text() == ""


def test_a_nul_event_does_not_fail_the_other_callers_of_its_group(store: Store, tmp_path: Path) -> None:
    """One tenant's NUL-named call shares a group commit with others: theirs all succeed (STRICT)."""
    sink = store.sink()
    sink.schema_version()
    gateway = support.governed(AuditTrail(sink, fallback_path=tmp_path / "fallback.jsonl"))
    results: dict[int, Any] = {}
    barrier = threading.Barrier(8)

    def call(n: int) -> None:
        context = ExecutionContext(tenant=f"tenant-{n}", principal="p", run_id=f"caller-{n}")
        barrier.wait(30)
        for _ in range(5):
            name = "add\x00" if n == 0 else "add"
            results[n] = gateway.invoke(name, support.CALL, context=context)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [results[n].status for n in range(1, 8)] == [Status.SUCCESS] * 7
    assert len(support.EXECUTIONS) == 7 * 5
    for n in range(1, 8):
        assert len(sink.read_trace(f"caller-{n}")) == 5 * 4
    assert len(sink.read_trace("caller-0")) == 5


def test_a_crafted_nul_line_is_reported_and_the_rest_of_the_file_replays(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fallback line the store would refuse (NUL in a field) is an invalid line, not a stalled replay."""
    fallback = tmp_path / "fallback.jsonl"
    good = [event("replayed", attempt=n) for n in range(3)]
    crafted = json.loads(event_line(event("replayed")))
    crafted["tenant"] = "victim\x00"
    lines = [event_line(good[0]), json.dumps(crafted) + "\n", event_line(good[1]), event_line(good[2])]
    fallback.write_text("".join(lines), encoding="ascii")
    store.sink().schema_version()  # the CLI opens an existing store only
    status = main(["audit", "replay", *store_args(store), str(fallback)])
    out, err = capsys.readouterr()
    assert status == 1
    assert "skipped 1 invalid line(s): 2" in out and "victim" not in out + err
    stored = store.sink().read_trace("replayed")
    assert [r.event_id for r in stored] == [e.event_id for e in good]


def test_replay_reads_line_by_line_and_skips_a_line_too_long_to_be_an_event(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A huge crafted line (or a huge file) is never read into memory whole; the valid lines replay."""
    import toolbox.cli._audit_replay as replay

    fallback = tmp_path / "fallback.jsonl"
    good = [event("streamed", attempt=n) for n in range(5)]
    huge = b'{"event_id": "' + b"x" * 100_000 + b'"}\n'
    with fallback.open("wb") as handle:
        handle.write(event_line(good[0]).encode("ascii") + huge)
        handle.writelines(event_line(e).encode("ascii") for e in good[1:])
    store.sink().schema_version()
    monkeypatch.setattr(replay, "_MAX_LINE", 4096)
    monkeypatch.setattr(replay, "_CHUNK", 2)

    read_bytes = Path.read_bytes

    def no_whole_file(self: Path) -> bytes:
        assert self != fallback, "the fallback file was read whole"
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", no_whole_file)
    status = main(["audit", "replay", *store_args(store), str(fallback)])
    out, err = capsys.readouterr()
    assert status == 1, err
    assert "replayed 5 event(s) of 1 trace(s): 5 stored" in out
    assert "skipped 1 invalid line(s): 2" in out
    stored = store.sink().read_trace("streamed")
    assert [r.event_id for r in stored] == [e.event_id for e in good]
