"""Audit writes at scale: group commit, batched ASYNC drains, trace heads, processes, real stores."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import audit_scale_support as support
from audit_sql_support import Store, event, make_store, process_context
from polling import wait_until
from tiers import sized
from toolbox import ExecutionContext, Status
from toolbox.audit import (
    AuditEvent,
    AuditMode,
    AuditSinkError,
    AuditTrail,
    EventType,
    MemorySink,
    verify_chain,
    verify_heads,
)
from toolbox.audit._group import GroupCommit
from toolbox.audit.sinks._sql import SqlSink

BACKENDS = ["sqlite", "postgres"]
AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles={"auditor"})


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture(autouse=True)
def _no_executions() -> Iterator[None]:
    support.EXECUTIONS.clear()
    yield
    support.EXECUTIONS.clear()


def forming(sink: SqlSink) -> int:
    """How many batches wait in the group the next leader will write (test-only peek)."""
    group = sink._group._forming
    return 0 if group is None else len(group.batches)


class GatedWrites:
    """Blocks the sink's first transaction until `release`, so the next callers form one group."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, sink: SqlSink) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.transactions: list[int] = []  # events per transaction
        original = sink._group._write  # the sink's group write (test-only peek)
        gated = self
        monkeypatch.setattr(
            sink._group, "_max_writers", 1
        )  # PostgreSQL allows several: the callers must queue

        def write_group(batches: Sequence[list[dict[str, Any]]]) -> None:
            first = not gated.transactions
            gated.transactions.append(sum(len(batch) for batch in batches))
            if first:
                gated.entered.set()
                assert gated.gate.wait(60)
            original(batches)

        monkeypatch.setattr(sink._group, "_write", write_group)

    def release(self) -> None:
        self.gate.set()


def run_threads(count: int, target: Callable[[int], None]) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    return threads


# -- GroupCommit ------------------------------------------------------------------


def test_a_lone_caller_writes_its_own_batch_at_once() -> None:
    """No concurrency, no grouping: each submit is one write of one batch."""
    written: list[Sequence[int]] = []
    group: GroupCommit[int] = GroupCommit(lambda batches: written.append(list(batches)))
    for n in range(3):
        group.submit(n)
    assert written == [[0], [1], [2]]


def test_callers_arriving_during_a_write_share_the_next_one() -> None:
    """While the leader writes, 7 callers queue up; one of them writes all 7 in one go."""
    gate = threading.Event()
    written: list[list[int]] = []

    def write(batches: Sequence[int]) -> None:
        if not written:
            written.append(list(batches))
            assert gate.wait(30)
            return
        written.append(list(batches))

    group: GroupCommit[int] = GroupCommit(write)
    first = run_threads(1, group.submit)
    wait_until(lambda: bool(written))
    others = [threading.Thread(target=group.submit, args=(n,)) for n in range(1, 8)]
    for thread in others:
        thread.start()
    wait_until(lambda: group._forming is not None and len(group._forming.batches) == 7)
    gate.set()
    for thread in (*first, *others):
        thread.join(30)
    assert written[0] == [0]
    assert sorted(written[1]) == list(range(1, 8)) and len(written) == 2


def test_a_failed_group_write_fails_every_caller_of_the_group() -> None:
    """The leader's error reaches each follower; the next group writes normally."""
    calls = {"n": 0}

    def write(batches: Sequence[int]) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise AuditSinkError("store down")

    group: GroupCommit[int] = GroupCommit(write)
    with pytest.raises(AuditSinkError, match="store down"):
        group.submit(1)
    group.submit(2)
    assert calls["n"] == 2


def test_group_size_is_bounded() -> None:
    with pytest.raises(ValueError, match="max_group and max_writers"):
        GroupCommit(lambda batches: None, max_group=0)
    gate, sizes = threading.Event(), []

    def write(batches: Sequence[int]) -> None:
        sizes.append(len(batches))
        if len(sizes) == 1:
            assert gate.wait(30)

    group: GroupCommit[int] = GroupCommit(write, max_group=3)
    threads = run_threads(1, group.submit)
    wait_until(lambda: bool(sizes))
    threads += run_threads(7, group.submit)
    gate.set()  # however many of the 7 have queued by now, no group may exceed 3
    for thread in threads:
        thread.join(30)
    assert sum(sizes) == 8 and max(sizes) <= 3


class SlowWrites:
    """A group commit's ``write`` that takes a commit's time, recording each group and the most
    writes that ran at once (nothing is asserted about time)."""

    def __init__(self, seconds: float) -> None:
        self.groups: list[list[int]] = []
        self.most = 0
        self._running = 0
        self._seconds = seconds
        self._lock = threading.Lock()

    def __call__(self, batches: Sequence[int]) -> None:
        with self._lock:
            self._running += 1
            self.most = max(self.most, self._running)
        time.sleep(self._seconds)  # so writes overlap and groups queue up
        with self._lock:
            self.groups.append(list(batches))
            self._running -= 1

    def batches(self) -> list[int]:
        return sorted(batch for group in self.groups for batch in group)


def test_several_writers_write_each_batch_exactly_once() -> None:
    """max_writers=2, 8 threads x 200 submits: every batch written once, never 3 writes at once."""
    write = SlowWrites(0.0005)
    group: GroupCommit[int] = GroupCommit(write, max_writers=2)
    threads = run_threads(8, lambda n: [group.submit(n * 1000 + i) for i in range(200)])
    for thread in threads:
        thread.join(60)
    assert write.batches() == sorted(n * 1000 + i for n in range(8) for i in range(200))
    assert write.most <= 2


def test_groups_waiting_for_the_writer_are_each_led_once_in_turn() -> None:
    """max_group=1, one writer, 8 threads x 100 submits: many full groups wait at once; the
    writer's place passes from group to group, so each batch is written once, alone, one write
    at a time, and every caller returns."""
    write = SlowWrites(0.0002)
    group: GroupCommit[int] = GroupCommit(write, max_group=1)
    threads = run_threads(8, lambda n: [group.submit(n * 1000 + i) for i in range(100)])
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert write.batches() == sorted(n * 1000 + i for n in range(8) for i in range(100))
    assert all(len(batch) == 1 for batch in write.groups) and write.most == 1
    assert group._writing == 0 and not group._unled and group._forming is None


# -- group commit in the SQL sinks --------------------------------------------------


def test_concurrent_appends_share_one_transaction(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """7 appends arriving during a commit are stored by one transaction, gap-free and chained."""
    sink = store.sink()
    sink.schema_version()
    gated = GatedWrites(monkeypatch, sink)
    threads = run_threads(1, lambda n: sink.append([event("t-lead")]))
    assert gated.entered.wait(30)
    threads += run_threads(7, lambda n: sink.append([event("t-shared"), event(f"t-{n}")]))
    wait_until(lambda: forming(sink) == 7)
    gated.release()
    for thread in threads:
        thread.join(60)
    assert gated.transactions == [1, 14]
    shared = sink.read_trace("t-shared")
    assert [r.sequence for r in shared] == list(range(1, 8))
    assert verify_chain(shared) == [] and verify_heads(shared, sink.trace_heads("t-shared")) == []


def test_a_leader_failing_mid_batch_fails_every_follower_and_stores_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """STRICT: the 7 calls of a failed group are DENIED/AUDIT_UNAVAILABLE, run zero times, leave no row."""
    sink = store.sink()
    sink.schema_version()
    gated = GatedWrites(monkeypatch, sink)
    fallback = tmp_path / "fallback.jsonl"
    gateway = support.governed(AuditTrail(sink, fallback_path=fallback))
    results: dict[int, Any] = {}

    def call(n: int) -> None:
        context = ExecutionContext(tenant="t", principal="p", run_id=f"caller-{n}")
        results[n] = gateway.invoke("add", support.CALL, context=context)

    lead = event("lead")
    threads = run_threads(1, lambda n: sink.append([lead]))  # holds the first transaction
    assert gated.entered.wait(30)
    threads += run_threads(7, call)
    wait_until(lambda: forming(sink) == 7)
    refused_append: list[BaseException] = []

    def duplicate(n: int) -> None:  # a batch the database rejects mid-transaction (its last row)
        try:
            sink.append([event("dup-trace"), lead])
        except AuditSinkError as exc:
            refused_append.append(exc)

    threads += run_threads(1, duplicate)
    wait_until(lambda: forming(sink) == 8)
    gated.release()
    for thread in threads:
        thread.join(60)
    assert gated.transactions[1] == 7 * 3 + 2  # one transaction held the 7 openings and the bad batch
    assert len(refused_append) == 1
    assert sink.read_trace("dup-trace") == [] and sink.trace_heads("dup-trace") == {}
    refused = [results[n] for n in range(7)]
    assert [(r.status, r.reason_code) for r in refused] == [(Status.DENIED, "AUDIT_UNAVAILABLE")] * 7
    assert support.EXECUTIONS == []
    assert len(sink.read_trace("lead")) == 1
    for n in range(7):
        assert sink.read_trace(f"caller-{n}") == []
        assert sink.trace_heads(f"caller-{n}") == {}
    kept = [json.loads(line) for line in fallback.read_text(encoding="ascii").splitlines()]
    responses = [e for e in kept if e["type"] == "INVOCATION_RESPONSE"]  # kept for a replay
    assert sorted(e["trace_id"] for e in responses) == [f"caller-{n}" for n in range(7)]
    assert {e["reason_code"] for e in responses} == {"AUDIT_UNAVAILABLE"}


# -- ASYNC: many batches per transaction ---------------------------------------------


class CountingSink:
    """A memory sink that records the size of each append; the first one waits for `gate`."""

    def __init__(self) -> None:
        self.inner = MemorySink()
        self.appends: list[int] = []
        self.gate = threading.Event()

    def append(self, events: Sequence[AuditEvent]) -> None:
        if not self.appends:
            assert self.gate.wait(30)
        self.appends.append(len(events))
        self.inner.append(list(events))

    def read_trace(self, trace_id: str) -> Any:
        return self.inner.read_trace(trace_id)

    def query(self, query: Any) -> Any:
        return self.inner.query(query)

    def close(self) -> None:
        pass


def test_async_drains_every_queued_batch_in_one_append(tmp_path: Path) -> None:
    """While the writer is busy 50 calls queue up: they are stored by one append, in order."""
    sink = CountingSink()
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=tmp_path / "fb.jsonl")
    gateway = support.governed(trail)
    context = ExecutionContext(tenant="t", principal="p")
    results = [gateway.invoke("add", support.CALL, context=context) for _ in range(51)]
    assert all(r.status is Status.SUCCESS for r in results)
    sink.gate.set()
    trail.close()
    assert sum(sink.appends) == 51 * 4
    assert len(sink.appends) < 10  # the first call's opening, then the rest in very few appends
    records = sink.read_trace(context.run_id)
    assert [r.sequence for r in records] == list(range(1, 205))
    kinds = [r.type for r in records]
    assert kinds[:4] == [
        EventType.INTENT_DECLARED,
        EventType.GOVERNANCE_DECISION,
        EventType.INVOCATION_REQUEST,
        EventType.INVOCATION_RESPONSE,
    ]


def test_async_drain_into_sql_verifies(store: Store, tmp_path: Path) -> None:
    sink = store.sink()
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=tmp_path / "fb.jsonl")
    gateway = support.governed(trail)
    context = ExecutionContext(tenant="t", principal="p")
    for _ in range(200):
        assert gateway.invoke("add", support.CALL, context=context).status is Status.SUCCESS
    trail.flush()
    records = sink.read_trace(context.run_id)
    assert [r.sequence for r in records] == list(range(1, 801))
    assert trail.verify(context.run_id, context=AUDITOR) == []
    trail.close()


# -- several processes, several threads ---------------------------------------------


def test_strict_from_8_threads_in_4_processes_is_gap_free(store: Store, tmp_path: Path) -> None:
    """Processes x threads of STRICT governed calls on shared traces: every event, chain intact.

    4 processes x 8 threads in the full tier, 2 x 4 in the default tier.
    """
    store.sink().schema_version()
    threads, calls, processes_count = sized(4, 8), 20, sized(2, 4)
    context = process_context()
    start = context.Barrier(processes_count)
    processes = [
        context.Process(
            target=support.strict_worker,
            args=(
                store.kind,
                store.location,
                store.schema,
                str(tmp_path / f"fallback-{n}.jsonl"),
                threads,
                calls,
                start,
            ),
        )
        for n in range(processes_count)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(600)
    assert [p.exitcode for p in processes] == [0] * processes_count
    sink = store.sink()
    every = sink.query(support_query())
    assert len(every) == processes_count * threads * calls * 4
    assert verify_chain(every) == []
    assert verify_heads(every, sink.trace_heads()) == []
    shared = sink.read_trace(support.SHARED_TRACE)
    assert [r.sequence for r in shared] == list(range(1, processes_count * threads * calls // 2 * 4 + 1))
    for thread in range(threads):
        own = sink.read_trace(support.thread_trace(thread))
        assert [r.sequence for r in own] == list(range(1, processes_count * calls // 2 * 4 + 1))
    assert all(not (tmp_path / f"fallback-{n}.jsonl").exists() for n in range(processes_count))


def support_query() -> Any:
    from toolbox.audit import AuditQuery

    return AuditQuery(limit=10**9)
