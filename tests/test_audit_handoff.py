"""The ASYNC writer's queue (`Handoff`), the SQLite writer's own connection, and event ids."""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
import uuid
from pathlib import Path

import pytest

from audit_sql_support import event
from toolbox import ExecutionContext, Status
from toolbox.audit import AuditMode, AuditSinkError, AuditTrail, MemorySink, SqliteSink, verify_chain
from toolbox.audit._events import new_event_id
from toolbox.audit._handoff import Handoff

# -- Handoff -------------------------------------------------------------------------------


def test_offer_refuses_beyond_the_bound_and_put_does_not() -> None:
    handoff: Handoff[int] = Handoff(2)
    handoff.offer(1)
    handoff.offer(2)
    with pytest.raises(queue.Full):
        handoff.offer(3)
    handoff.put(99)  # the stop signal always gets in
    assert handoff.qsize() == 3
    assert handoff.take(10) == [1, 2, 99]


def test_take_returns_at_most_what_was_asked_oldest_first() -> None:
    handoff: Handoff[int] = Handoff(100)
    for item in range(10):
        handoff.offer(item)
    assert handoff.take(4) == [0, 1, 2, 3]
    assert handoff.take(100) == [4, 5, 6, 7, 8, 9]


def test_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        Handoff(0)


def test_join_waits_for_the_consumer_to_finish_what_it_took() -> None:
    handoff: Handoff[int] = Handoff(10)
    handoff.offer(1)
    taken = handoff.take(10)
    assert taken == [1]
    assert handoff.join(timeout=0.05) is False  # taken, not finished
    handoff.finished()
    assert handoff.join(timeout=5) is True


def test_join_returns_once_the_consumer_abandons() -> None:
    handoff: Handoff[int] = Handoff(10)
    handoff.offer(1)
    handoff.offer(2)
    assert handoff.join(timeout=0.05) is False
    handoff.abandon()
    assert handoff.join(timeout=5) is True


def test_many_producers_one_consumer_lose_nothing_and_keep_each_producers_order() -> None:
    """16 threads x 2,000 items against a consumer taking up to 7 at a time."""
    handoff: Handoff[tuple[int, int]] = Handoff(1_000_000)
    received: list[tuple[int, int]] = []
    stop = object()

    def consume() -> None:
        while True:
            taken = handoff.take(7)
            done = any(item is stop for item in taken)
            received.extend(item for item in taken if item is not stop)
            handoff.finished()
            if done:
                return

    consumer = threading.Thread(target=consume)
    consumer.start()
    producers = [
        threading.Thread(target=lambda n=n: [handoff.offer((n, i)) for i in range(2_000)]) for n in range(16)
    ]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join()
    assert handoff.join(timeout=30) is True
    assert len(received) == 16 * 2_000
    handoff.put(stop)  # type: ignore[arg-type]
    consumer.join(10)
    for n in range(16):
        assert [i for producer, i in received if producer == n] == list(range(2_000))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the crash is the point
def test_flush_of_an_async_trail_returns_when_its_writer_died(tmp_path: Path) -> None:
    """A writer that died leaves batches behind: flush() still returns (and calls are refused)."""

    class Dying(MemorySink):
        def append(self, events):  # type: ignore[no-untyped-def]
            raise SystemExit  # kills the writer thread, not the test

    trail = AuditTrail(Dying(), mode=AuditMode.ASYNC, fallback_path=None)
    assert trail._queue is not None
    assert trail._writer is not None
    trail._queue.put([event()])
    trail._writer.join(5)  # it died on that batch
    trail._queue.put([event()])  # left behind: nobody will ever take it
    trail.flush(timeout=30)
    assert trail._queue.join(timeout=0) is True  # nothing to wait for: the writer gave the queue up
    assert trail._queue.qsize() == 1
    assert not trail.healthy


def test_async_trail_delivers_every_event_from_many_threads(tmp_path: Path) -> None:
    """8 threads x 200 governed calls through an ASYNC trail into SQLite: 8 gap-free verified traces."""
    import audit_scale_support as support

    sink = SqliteSink(tmp_path / "audit.db")
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=tmp_path / "fb.jsonl")
    gateway = support.governed(trail)
    contexts = [ExecutionContext(tenant="t", principal=f"p{n}") for n in range(8)]
    statuses: list[Status] = []

    def work(context: ExecutionContext) -> None:
        statuses.extend(gateway.invoke("add", support.CALL, context=context).status for _ in range(200))

    support.in_threads(work, contexts)
    trail.flush()
    assert statuses == [Status.SUCCESS] * 1600
    for context in contexts:
        records = sink.read_trace(context.run_id)
        assert [r.sequence for r in records] == list(range(1, 801))
        assert verify_chain(records) == []
    trail.close()


# -- the SQLite sink's writer connection ---------------------------------------------------


def test_a_broken_writer_connection_fails_one_append_then_is_replaced(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "audit.db")
    sink.append([event()])
    assert sink._writer is not None
    sink._writer.close()  # broken behind the sink's back
    with pytest.raises(AuditSinkError, match="cannot store events"):
        sink.append([event()])
    sink.append([event()])
    records = sink.read_trace("trace-1")
    assert [r.sequence for r in records] == [1, 2]
    assert verify_chain(records) == []
    sink.close()


def _append_in_child(sink: SqliteSink, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        sink.append([event() for _ in range(5)])
        results.put(("ok", os.getpid()))
    except BaseException as exc:
        results.put(("error", repr(exc)))


def test_a_forked_child_writes_on_its_own_connection(tmp_path: Path) -> None:
    """The parent's open writer connection is not used in a forked child (SQLite forbids it)."""
    sink = SqliteSink(tmp_path / "audit.db")
    sink.append([event()])  # the parent's writer connection is open now
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_append_in_child, args=(sink, results))
    child.start()
    child.join(60)
    assert results.get(timeout=5)[0] == "ok"
    sink.append([event()])
    records = sink.read_trace("trace-1")
    assert [r.sequence for r in records] == list(range(1, 8))
    assert verify_chain(records) == []
    assert len({r.event_id for r in records}) == 7
    sink.close()


# -- event ids ------------------------------------------------------------------------------


def test_event_ids_are_version_7_uuids_ordered_by_time_and_unique() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_event_id() for _ in range(20_000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for value in ids[:500]:
        parsed = uuid.UUID(hex=value)
        assert (len(value), parsed.version, parsed.variant) == (32, 7, uuid.RFC_4122)
    # The first 48 bits are the time in milliseconds: ids made later never sort before earlier ones'.
    stamps = [int(value[:12], 16) for value in ids]
    assert before <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= after
    # The other 74 bits are random: ids of the same millisecond still differ everywhere.
    same_millisecond = [value for value in ids if value[:12] == ids[0][:12]]
    assert len({value[13:16] for value in same_millisecond}) > 1 or len(same_millisecond) == 1


def _ids_in_child(results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    results.put([new_event_id() for _ in range(100)])


def test_a_forked_child_draws_other_event_ids_than_its_parent() -> None:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    children = [context.Process(target=_ids_in_child, args=(results,)) for _ in range(2)]
    for child in children:
        child.start()
    theirs = [results.get(timeout=30) for _ in children]
    for child in children:
        child.join(30)
    ours = [new_event_id() for _ in range(100)]
    assert not set(ours) & set(theirs[0])
    assert not set(theirs[0]) & set(theirs[1])


def test_event_ids_from_many_threads_never_repeat() -> None:
    """Each thread draws from its own buffer of the OS's random bytes, refilled every 256 ids."""
    drawn: list[list[str]] = [[] for _ in range(8)]

    def draw(out: list[str]) -> None:
        out.extend(new_event_id() for _ in range(1_000))

    threads = [threading.Thread(target=draw, args=(out,)) for out in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for out in drawn for value in out]
    assert len(every) == len(set(every)) == 8_000
