"""SqliteSink writing STRICT groups on the event loop: never waiting there, never checkpointing there.

The loop writes a group only when nothing can make it wait: this sink's lock
free, no other connection in a write transaction, the writer's connection open,
no fold due. These tests watch every statement the writer's connection runs
and on which thread, and try to make the loop wait: another process's write
transaction held open, folds, checkpoints, many concurrent callers.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolbox.audit._group as group_commit
import toolbox.audit.sinks._sqlite as sqlite_module
from audit_sql_support import assert_intact, event
from polling import wait_until
from toolbox.audit import AuditQuery, AuditSinkError, SqliteSink

FOLD = "INSERT INTO audit_events"


@pytest.fixture(autouse=True)
def never_too_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """However slow a loaded machine's flush, the loop keeps writing (the pause: test_audit_group_loop)."""
    monkeypatch.setattr(group_commit, "LOOP_WRITE_LIMIT", 3600.0)


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[SqliteSink]:
    sink = SqliteSink(tmp_path / "audit.db")
    yield sink
    sink.close()


def watch(sink: SqliteSink) -> list[tuple[int, str]]:
    """Every statement the sink's writer connection runs from now on, with its thread."""
    seen: list[tuple[int, str]] = []
    with sink._serialized():
        writer = sink._connection()
    writer.set_trace_callback(lambda statement: seen.append((threading.get_ident(), statement)))
    return seen


async def strict_calls(sink: SqliteSink, callers: int, calls: int) -> None:
    """``callers`` tasks, each writing ``calls`` openings and responses of a trace of its own, awaited."""
    aappend = sink.aappend
    assert aappend is not None

    async def caller(number: int) -> None:
        for _ in range(calls):
            await aappend([event(f"trace-{number}"), event(f"trace-{number}")])
            await aappend([event(f"trace-{number}")])

    await asyncio.gather(*(caller(n) for n in range(callers)))


def test_concurrent_strict_writes_commit_on_the_loop_and_folds_and_checkpoints_on_a_thread(
    sink: SqliteSink,
) -> None:
    sink.append([event("warm")])  # the writer's connection opens off the loop
    seen = watch(sink)

    async def main() -> int:
        await strict_calls(sink, callers=16, calls=20)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    on_loop = [statement for thread, statement in seen if thread == loop_thread]
    elsewhere = [statement for thread, statement in seen if thread != loop_thread]
    assert on_loop.count("COMMIT") > 0 and elsewhere.count("COMMIT") > 0
    assert not any(statement.startswith(FOLD) for statement in on_loop)
    assert any(statement.startswith(FOLD) for statement in elsewhere)  # 960 events: folds happened
    # Each switch of the writer sets the checkpoint: none on the loop, the sink's back on a thread.
    assert "PRAGMA wal_autocheckpoint = 0" in on_loop
    assert f"PRAGMA wal_autocheckpoint = {sqlite_module._AUTOCHECKPOINT}" in elsewhere
    assert "PRAGMA wal_autocheckpoint = 0" not in elsewhere
    assert not any(statement.startswith("PRAGMA busy_timeout") for _, statement in seen)  # always 0
    for number in range(16):
        assert_intact(sink, f"trace-{number}", 60)
    assert len(sink.query(AuditQuery(limit=10**6))) == 1 + 16 * 60


def test_a_database_another_connection_holds_never_stalls_the_loop(sink: SqliteSink, tmp_path: Path) -> None:
    """Another connection (another process, a migration) holds the write lock: the loop's write is
    refused at once, a writer thread waits for the lock, the loop goes on; once the lock is
    released, the events are stored and the caller resumes."""
    sink.append([event("warm")])
    seen = watch(sink)
    other = sqlite3.connect(tmp_path / "audit.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")

    async def main() -> int:
        aappend = sink.aappend
        assert aappend is not None
        write = asyncio.ensure_future(aappend([event("t"), event("t")]))
        for _ in range(50):
            await asyncio.sleep(0)  # the loop turns: it is not stuck in the write
        await asyncio.to_thread(wait_until, lambda: len([s for _, s in seen if s == "BEGIN IMMEDIATE"]) >= 2)
        assert not write.done()  # a writer thread waits for the lock (tried twice), not the loop
        other.execute("COMMIT")
        await write
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    other.close()
    loop_begins = [s for thread, s in seen if thread == loop_thread and s == "BEGIN IMMEDIATE"]
    thread_commits = [s for thread, s in seen if thread != loop_thread and s == "COMMIT"]
    assert loop_begins and thread_commits  # tried on the loop, refused, written by a thread
    assert_intact(sink, "t", 2)


def test_a_fold_due_goes_to_a_thread_and_the_next_group_comes_back_to_the_loop(
    sink: SqliteSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_FOLD_AT", 8)
    sink.append([event("warm")])
    seen = watch(sink)

    async def main() -> int:
        aappend = sink.aappend
        assert aappend is not None
        for _ in range(12):  # one caller: one event a group, a fold every 8 events
            await aappend([event("t")])
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    commits = ["loop" if thread == loop_thread else "thread" for thread, s in seen if s == "COMMIT"]
    folds = ["loop" if thread == loop_thread else "thread" for thread, s in seen if s.startswith(FOLD)]
    assert folds and set(folds) == {"thread"}
    assert commits.count("loop") >= 12 - 2 * len(folds)  # every other group on the loop
    assert_intact(sink, "t", 12)
    assert sink._writer_waits is False  # the last group was the loop's


def test_group_sizes_choose_the_loop_a_thread_and_the_table(
    sink: SqliteSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to _LOOP_GROUP events: the loop writes them into audit_pending; up to _PENDING_GROUP: a
    thread does; more (an ASYNC drain, a replay): a thread writes them into audit_events."""
    monkeypatch.setattr(sqlite_module, "_LOOP_GROUP", 4)
    monkeypatch.setattr(sqlite_module, "_PENDING_GROUP", 8)
    sink.append([event("warm")])
    seen = watch(sink)

    async def main() -> int:
        aappend = sink.aappend
        assert aappend is not None
        for size in (4, 5, 8, 9, 2):
            seen.append((0, f"-- {size}"))
            await aappend([event("t") for _ in range(size)])
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    inserts = [
        (marker, "loop" if thread == loop_thread else "thread", statement.split(" (")[0])
        for marker, (thread, statement) in _marked(seen)
        if statement.startswith(("INSERT INTO audit_pending", "INSERT INTO audit_events ("))
    ]
    # sqlite3 traces each row of an executemany: one entry per group.
    assert list(dict.fromkeys(inserts)) == [
        ("4", "loop", "INSERT INTO audit_pending"),
        ("5", "thread", "INSERT INTO audit_pending"),
        ("8", "thread", "INSERT INTO audit_pending"),
        ("9", "thread", "INSERT INTO audit_events"),
        ("2", "loop", "INSERT INTO audit_pending"),
    ]
    assert_intact(sink, "t", 28)


def _marked(seen: list[tuple[int, str]]) -> Iterator[tuple[str, tuple[int, str]]]:
    """The statements after each ``-- SIZE`` marker, with that size."""
    marker = ""
    for thread, statement in seen:
        if statement.startswith("-- "):
            marker = statement[3:]
        else:
            yield marker, (thread, statement)


def test_a_forked_child_s_first_loop_write_opens_its_own_connection_on_a_thread(
    sink: SqliteSink,
) -> None:
    """The inherited writer is the parent's: the child's loop never writes on it."""
    sink.append([event("warm")])
    sink._writer_pid = -1  # as a forked child sees it

    async def main() -> None:
        aappend = sink.aappend
        assert aappend is not None
        await aappend([event("child")])

    asyncio.run(main())
    assert sink._writer_pid != -1
    assert_intact(sink, "child", 1)


def test_a_writer_that_waits_longer_than_busy_timeout_fails_cleanly_and_stores_nothing(
    tmp_path: Path,
) -> None:
    """Another connection keeps the write lock past the sink's busy_timeout: the append raises
    AuditSinkError naming the lock, nothing of it is stored, and the next append, the lock
    released, is stored whole."""
    sink = SqliteSink(tmp_path / "audit.db", busy_timeout=0.05)
    sink.append([event("warm")])
    other = sqlite3.connect(tmp_path / "audit.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(AuditSinkError, match="locked"):
            sink.append([event("t"), event("t")])
    finally:
        other.execute("COMMIT")
        other.close()
    assert sink.read_trace("t") == []
    sink.append([event("t")])
    assert_intact(sink, "t", 1)
    sink.close()


def test_a_writer_thread_waits_out_another_connection_s_short_transactions(
    sink: SqliteSink, tmp_path: Path
) -> None:
    """Another connection takes the write lock 20 times, briefly: every sync append from 4 threads
    meanwhile is stored, chained, none refused."""
    sink.append([event("warm")])
    other = sqlite3.connect(tmp_path / "audit.db", isolation_level=None, check_same_thread=False)
    stop = threading.Event()

    def hog() -> None:
        for _ in range(20):
            other.execute("BEGIN IMMEDIATE")
            other.execute("COMMIT")
        stop.set()

    def writer(number: int) -> None:
        for _ in range(25):
            sink.append([event(f"w{number}")])

    threads = [threading.Thread(target=hog)] + [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    other.close()
    assert stop.is_set() and not any(thread.is_alive() for thread in threads)
    for number in range(4):
        assert_intact(sink, f"w{number}", 25)
