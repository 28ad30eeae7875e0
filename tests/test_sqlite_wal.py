"""A new SQLite file opened by several sinks or stores at once: each waits its turn to enter WAL.

SQLite refuses ``PRAGMA journal_mode = WAL`` on a new file with ``database is locked`` at once
(no busy handler) while another connection holds a lock; before `enter_wal`, about one start in
ten of six racing audit sinks failed with AUDIT "cannot prepare the schema".
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolbox.audit import AuditEvent, EventType, SqliteSink
from toolbox.audit._sink import AuditQuery
from toolbox.foundations._sqlite_wal import enter_wal
from toolbox.pipeline._state_ports import Quota
from toolbox.state._sql_backend import SqlState

RACERS = 6
ROUNDS = 25


def race(make: Callable[[], Any], act: Callable[[Any], None]) -> list[BaseException]:
    """``RACERS`` objects made first, then acting at the same instant; the errors they raised."""
    made = [make() for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)
    errors: list[BaseException] = []

    def run(item: Any) -> None:
        barrier.wait()
        try:
            act(item)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(item,)) for item in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for item in made:
        item.close()
    return errors


def test_audit_sinks_racing_to_open_a_new_file_all_start_and_store(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"audit-{round_}.db"

        def append(sink: SqliteSink) -> None:
            sink.append([AuditEvent(EventType.SYSTEM_ERROR, trace_id=f"t{id(sink)}", name="race")])

        assert race(lambda: SqliteSink(path), append) == []  # noqa: B023 - used before the next round
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        check = SqliteSink(path)
        try:
            assert len(check.query(AuditQuery())) == RACERS
        finally:
            check.close()


def test_state_stores_racing_to_open_a_new_file_all_admit(tmp_path: Path) -> None:
    quota = Quota("b:tenant:acme", RACERS, 600.0, "budget:acme")

    def admit(store: SqlState) -> None:
        assert store.admit([quota], []) is None

    for round_ in range(ROUNDS):
        url = f"sqlite:///{tmp_path / f'state-{round_}.db'}"
        assert race(lambda: SqlState(url), admit) == []  # noqa: B023 - used before the next round


def test_a_file_held_past_the_timeout_is_an_error_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            enter_wal(other.execute, 0.05)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        other.close()


def test_another_error_is_raised_at_once() -> None:
    calls: list[str] = []

    def failing(statement: str) -> None:
        calls.append(statement)
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        enter_wal(failing, 30.0)
    assert calls == ["PRAGMA journal_mode = WAL"]
