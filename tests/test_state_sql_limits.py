"""The SQL limit store's `admit` on SQLite and PostgreSQL: windows, quotas, races, keys, round trips."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.pool import QueuePool

from state_support import state_store, unique
from toolbox.pipeline._state_ports import Quota, StateUnavailableError
from toolbox.state._sql_backend import SqlState
from toolbox.state._sql_limits import FORGET_EVERY, GC_EVERY
from toolbox.testing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    """The store's time: windows end when a test moves it, never by sleeping."""
    return ManualClock()


@pytest.fixture(params=["sqlite", "postgres"])
def sql(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[SqlState]:
    with state_store(request.param, tmp_path, clock=clock) as store:
        yield store


def _budget(key: str, limit: int, window: float = 3600.0) -> Quota:
    return Quota(key, limit, window, f"budget:{key}")


def _rate(key: str, limit: int, window: float = 60.0) -> Quota:
    return Quota(key, limit, window, f"rate:{key}")


def test_a_budget_window_restarts_once_it_ended(sql: SqlState, clock: ManualClock) -> None:
    budget = [_budget("tenant:acme", 2, 30)]
    assert sql.admit(budget, []) is None
    assert sql.admit(budget, []) is None
    clock.advance(10)
    refused = sql.admit(budget, [])
    assert refused is not None and refused.quota == budget[0] and not refused.rate
    assert refused.retry_after == pytest.approx(20, abs=0.001)
    clock.advance(refused.retry_after)
    assert sql.admit(budget, []) is None  # a fresh window counts from one
    assert sql.admit(budget, []) is None
    assert sql.admit(budget, []) is not None


def test_a_budget_of_zero_refuses_even_in_a_fresh_window(sql: SqlState) -> None:
    refused = sql.admit([_budget("none", 0, 5.0)], [])
    assert refused is not None and refused.retry_after == 5.0


def test_a_refusal_counts_the_call_in_no_quota(sql: SqlState) -> None:
    budgets = [_budget("run:r1", 10), _budget("tenant:acme", 1)]
    rates = [_rate("principal:p", 3), _rate("tool:add", 3)]
    assert sql.admit(budgets, rates) is None
    # The tenant budget is spent: refused, and neither the run budget nor the rates count it.
    for _ in range(5):
        refused = sql.admit(budgets, rates)
        assert refused is not None and refused.quota == budgets[1]
    # Without the spent budget, the rates still have two calls each, the run budget nine.
    assert sql.admit(budgets[:1], rates) is None
    assert sql.admit(budgets[:1], rates) is None
    refused = sql.admit(budgets[:1], rates)
    assert refused is not None and refused.rate and refused.quota == rates[0]
    assert 59.0 < refused.retry_after <= 60.0
    # A refusal by a rate limit counted nowhere either: the run budget has seven calls left.
    run_only = [_budget("run:r1", 10)]
    assert [sql.admit(run_only, []) for _ in range(8)].count(None) == 7


def test_racing_threads_are_admitted_exactly_to_the_limits(sql: SqlState) -> None:
    budget, rate = [_budget("tenant:race", 60)], [_rate("tenant:race", 45)]
    admitted: list[int] = []
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        admitted.append(sum(sql.admit(budget, rate) is None for _ in range(12)))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The rate limit (45 a minute) binds first; the budget counted exactly those 45.
    assert sum(admitted) == 45
    assert [sql.admit(budget, []) for _ in range(20)].count(None) == 15


@pytest.mark.parametrize(
    "key",
    [
        "tenant:o'brien",
        "x'); DROP TABLE toolbox_state_counters; --",
        'quote"d\\back',
        "ünïcødé:租户:🔑",
        "k" * 700,  # quota keys stay far below the 900-character column (`key_part`)
        "{a,b}",  # array-literal syntax, as a value
        "NULL",
    ],
)
def test_keys_are_bound_values_never_sql(sql: SqlState, key: str) -> None:
    assert sql.admit([_budget(key, 1)], [_rate(key, 5)]) is None
    refused = sql.admit([_budget(key, 1)], [_rate(key, 5)])
    assert refused is not None and refused.quota.key == key
    # A key that differs only after the odd characters has its own count.
    assert sql.admit([_budget(key + "2", 1)], [_rate(key + "2", 5)]) is None


@contextmanager
def round_trips(sql: SqlState, directory: Path) -> Iterator[Callable[[], int]]:
    """Round trips of the store's own PostgreSQL connections in the block, from libpq's trace.

    Every answer of the server ends with ReadyForQuery: one per round trip,
    counted on the client whatever layer sent the request. The engine (used for
    approvals and set-up) must not be checked out at all meanwhile.
    """
    import psycopg

    pool = sql._connections
    pool.clear()  # every connection from here on is traced from its first request
    trace = directory / "libpq.trace"
    files: list[Any] = []
    opened: list[Any] = []
    original = pool.connect

    def start(conn: Any, out: Any) -> None:
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

    def traced() -> Any:
        conn = original()
        out = trace.open("ab")
        files.append(out)
        opened.append(conn)
        start(conn, out)
        return conn

    checkouts: list[object] = []

    def checkout(*args: Any) -> None:
        checkouts.append(args)

    def count() -> int:
        assert not checkouts, "the engine's pool was used (with its pre-ping round trip)"
        for conn, out in zip(opened, files, strict=True):
            if not conn.closed:
                conn.pgconn.untrace()  # libpq flushes what it buffered
                start(conn, out)
        lines = trace.read_bytes().splitlines() if trace.exists() else []
        return sum(line.startswith(b"B\t") and b"\tReadyForQuery" in line for line in lines)

    pool.connect = traced
    event.listen(sql._engine, "checkout", checkout)
    try:
        yield count
    finally:
        event.remove(sql._engine, "checkout", checkout)
        pool.connect = original
        pool.clear()
        for out in files:
            out.close()


def test_postgres_admits_in_one_round_trip_whatever_the_quotas(tmp_path: Path) -> None:
    with state_store("postgres", tmp_path) as sql:
        budgets = [_budget("run:r", 100), _budget("tenant:t", 100)]
        rates = [_rate("tenant:t", 100), _rate("host:h", 100)]
        assert sql.admit(budgets, rates) is None  # the tables exist from here on
        with round_trips(sql, tmp_path) as count:
            assert sql.admit(budgets, rates) is None  # on a new connection: still one
            assert count() == 1
            for _ in range(9):
                assert sql.admit(budgets, rates) is None
            assert count() == 10
            assert sql.admit([_budget("spent", 0)], rates) is not None  # a refusal too
            assert count() == 11
            assert sql.engaged() == {}  # the kill-switch read: one more
            assert count() == 12


class _Counting:
    """A sqlite3 connection of the store's own that records the statements the store runs on it."""

    def __init__(self, conn: Any, seen: list[str]) -> None:
        self._conn, self._seen = conn, seen

    def execute(self, sql: str, *args: Any) -> Any:
        self._seen.append(sql.split(None, 1)[0])
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_sqlite_admits_in_one_statement_and_forgets_on_a_schedule(tmp_path: Path) -> None:
    with state_store("sqlite", tmp_path) as sql:
        pool, seen = sql._connections, list[str]()
        original = pool.connect
        pool.clear()
        pool.connect = lambda: _Counting(original(), seen)
        try:
            budgets = [_budget("run:r", 10**6), _budget("tenant:t", 10**6)]
            rates = [_rate("tenant:t", 10**6), _rate("host:h", 10**6)]
            sql._limits._calls = 0
            for _ in range(FORGET_EVERY - 1):
                assert sql.admit(budgets, rates) is None
            # Every quota counted by one upsert, in its own transaction: no BEGIN, no COMMIT.
            assert seen == ["INSERT"] * (FORGET_EVERY - 1)
            seen.clear()
            assert sql.admit(budgets, rates) is None  # the FORGET_EVERY-th: the careful path
            assert seen == ["BEGIN", "DELETE", "INSERT", "COMMIT"]
            seen.clear()
            assert sql.admit([_budget("spent", 0)], []) is not None  # a refusal: careful, then named
            assert seen == ["INSERT", "BEGIN", "INSERT", "SELECT", "COMMIT"]
        finally:
            pool.connect = original
            pool.clear()


def _rate_counts(sql: SqlState) -> dict[str, tuple[int, int]]:
    """Each rate row's count beside the admissions its log holds: always equal."""
    log, counters = sql._log, sql._counters
    with sql._engine.connect() as check:
        logged: dict[str, int] = {}
        for key, n in check.execute(select(log.c.key, log.c.n)):
            logged[key] = logged.get(key, 0) + n
        rows = check.execute(select(counters.c.key, counters.c.calls)).all()
    return {key: (calls, logged.get(key, 0)) for key, calls in rows if key.startswith("r:")}


def test_a_sliding_window_admits_again_exactly_when_its_oldest_admission_leaves(
    sql: SqlState, clock: ManualClock
) -> None:
    rate = [_rate("tenant:slide", 3, 10.0)]
    for _ in range(3):
        assert sql.admit([], rate) is None
        clock.advance(1.0)
    refused = sql.admit([], rate)  # at 3 s: three in the window, the oldest from 0 s
    assert refused is not None and refused.retry_after == pytest.approx(7.0)
    clock.advance(refused.retry_after - 0.001)
    assert sql.admit([], rate) is not None  # a millisecond early: still full
    clock.advance(0.001)
    assert sql.admit([], rate) is None  # the window has fully passed the first admission
    assert sql.admit([], rate) is not None
    # Refusals counted nothing; what left the window was forgotten and uncounted.
    assert _rate_counts(sql) == {"r:tenant:slide": (3, 3)}
    clock.advance(100.0)  # every admission left: the lazy count holds stale ones until full
    assert [sql.admit([], rate) is None for _ in range(4)] == [True, True, True, False]
    assert _rate_counts(sql) == {"r:tenant:slide": (3, 3)}


def test_a_refusal_names_the_first_spent_quota_in_the_callers_order(sql: SqlState) -> None:
    rates = [_rate("zz:last-in-key-order", 1), _rate("aa:first-in-key-order", 1)]
    budgets = [_budget("zz:budget", 1), _budget("aa:budget", 1)]
    assert sql.admit([], rates) is None
    refused = sql.admit([], rates)
    assert refused is not None and refused.quota == rates[0]
    assert sql.admit(budgets, []) is None
    refused = sql.admit(budgets, [])
    assert refused is not None and refused.quota == budgets[0]


def test_overlapping_quotas_given_in_opposite_orders_never_deadlock(sql: SqlState) -> None:
    # Two kinds of call share two budgets and a rate, each listing them in the opposite order:
    # rows locked in the caller's order would deadlock; the store locks them in key order.
    shared = [_budget("tenant:t", 80), _budget("principal:p", 80)]
    rate = [_rate("tenant:t", 1000)]
    failures: list[BaseException] = []
    admitted: list[int] = []
    start = threading.Barrier(8)

    def work(reverse: bool) -> None:
        budgets = shared[::-1] if reverse else shared
        start.wait()
        try:
            admitted.append(sum(sql.admit(budgets, rate) is None for _ in range(15)))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n % 2 == 1,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert sum(admitted) == 80  # 120 attempts, both budgets of 80: exactly 80 ran


def _backend_pids(sql: SqlState) -> set[int]:
    """The server processes of the store's connections: the engine's pool and its own (admissions)."""
    pool = sql._engine.pool
    assert isinstance(pool, QueuePool)
    connections = [sql._engine.connect() for _ in range(pool.checkedin())]
    own = sql._connections
    held = [own.take() for _ in range(len(own._idle))]
    try:
        pids = {int(c.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()) for c in connections}
        return pids | {int(c.execute("SELECT pg_backend_pid()").fetchone()[0]) for c in held}
    finally:
        for connection in connections:
            connection.close()
        for conn in held:
            own.give(conn)


def test_postgres_connections_dropped_by_the_server_are_replaced_without_a_restart(tmp_path: Path) -> None:
    # A restarted or failed-over server ends every connection the store holds; the next
    # call must not fail for it (nor any later one): the store notices and reconnects.
    with state_store("postgres", tmp_path) as sql:
        budget, rate = [_budget("tenant:drop", 3)], [_rate("tenant:drop", 100)]
        assert sql.admit(budget, rate) is None
        assert sql.engaged() == {}
        pids = _backend_pids(sql)
        assert len(pids) >= 2  # the engine's and the store's own
        # Another client terminates them (and waits until each has ended).
        with state_store("postgres", tmp_path) as other, other._engine.connect() as conn:
            for pid in pids:
                assert conn.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 5000)").scalar_one()
        assert sql.admit(budget, rate) is None  # counted once: the dropped connection wrote nothing
        assert sql.engaged() == {}
        assert sql.admit(budget, rate) is None
        refused = sql.admit(budget, rate)
        assert refused is not None and refused.quota == budget[0]
        assert _backend_pids(sql).isdisjoint(pids)


def test_an_unreachable_postgres_is_unavailable_and_names_no_secret(tmp_path: Path) -> None:
    # The tables are never created: nothing answers on port 1. The store's own connections
    # fail like the engine's, as StateUnavailableError, whose text holds neither URL nor password.
    sql = SqlState("postgresql://toolbox:s3cret-pw@127.0.0.1:1/state", prefix=unique() + "_", timeout=1)
    sql._ready = True  # past the set-up: the admission's own connection is what fails
    try:
        for attempt in (lambda: sql.admit([_budget("t", 5)], []), sql.engaged):
            with pytest.raises(StateUnavailableError) as raised:
                attempt()
            assert "s3cret" not in str(raised.value) and "127.0.0.1" not in str(raised.value)
    finally:
        sql.close()


def test_postgres_cleanup_never_waits_for_a_row_another_process_holds(tmp_path: Path) -> None:
    # Every GC_EVERY admissions a process deletes expired counters. Another process may hold
    # one of them (its call is about to restart that budget) while it waits for a row this
    # call holds: waiting here would deadlock. The cleanup skips the held row instead.
    clock = ManualClock()
    with state_store("postgres", tmp_path, clock=clock) as sql:
        assert sql.admit([_budget("run:expired", 5, 10)], []) is None
        clock.advance(11)  # the run budget's window has ended: its row is expired
        counters = sql._counters
        finished = threading.Event()
        with state_store("postgres", tmp_path) as other, other._engine.connect() as conn:
            conn.exec_driver_sql(
                f'SELECT key FROM "{counters.name}" WHERE key = %(key)s FOR UPDATE', {"key": "b:run:expired"}
            )
            sql._limits._calls = GC_EVERY - 1  # the next admission cleans up

            def admit() -> None:
                assert sql.admit([_budget("tenant:busy", 100)], []) is None
                finished.set()

            worker = threading.Thread(target=admit)
            worker.start()
            worker.join(timeout=10)
            blocked = not finished.is_set()
            conn.rollback()  # release the row either way, so a blocked cleanup ends
            worker.join()
        assert not blocked, "the cleanup waited for a row another process holds"
        with sql._engine.connect() as check:
            keys = {row[0] for row in check.execute(select(counters.c.key))}
        assert "b:run:expired" in keys  # skipped, not lost: a later cleanup deletes it
        sql._limits._calls = GC_EVERY - 1
        assert sql.admit([_budget("tenant:busy", 100)], []) is None
        with sql._engine.connect() as check:
            keys = {row[0] for row in check.execute(select(counters.c.key))}
        assert keys == {"b:tenant:busy"}


def test_cleanup_forgets_expired_rate_limits_with_their_admissions(sql: SqlState, clock: ManualClock) -> None:
    # A per-run rate limit's key is used by one run only: once its window has passed, the
    # periodic cleanup removes its counter and every admission recorded under it.
    for run in range(3):
        assert sql.admit([], [_rate(f"run:r{run}", 5, 10)]) is None
        assert sql.admit([], [_rate(f"run:r{run}", 5, 10)]) is None
    assert sql.admit([], [_rate("tenant:live", 5, 3600.0)]) is None
    clock.advance(11)
    sql._limits._calls = GC_EVERY - 1  # the next admission cleans up
    assert sql.admit([_budget("tenant:live", 10)], [_rate("tenant:live", 5, 3600.0)]) is None
    with sql._engine.connect() as check:
        counters = {row[0] for row in check.execute(select(sql._counters.c.key))}
        admissions = sorted(row[0] for row in check.execute(select(sql._log.c.key)))
    assert counters == {"b:tenant:live", "r:tenant:live"}
    assert admissions == ["r:tenant:live", "r:tenant:live"]  # the live window keeps both


def _sqlite_file(sql: SqlState) -> str:
    database = sql._engine.url.database
    assert database is not None
    return database


def test_sqlite_admissions_wait_out_another_connection_s_short_write_transactions(tmp_path: Path) -> None:
    """Another connection (another worker) takes the file's write lock 30 times, briefly, while 4
    threads admit against one budget: each waits its turn (every millisecond or two, not SQLite's
    busy handler), none is refused for the lock, and the budget admits exactly its limit."""
    with state_store("sqlite", tmp_path) as sql:
        budget = [_budget("tenant:acme", 60)]
        sql.admit(budget, [])  # the tables and a connection exist
        other = sqlite3.connect(_sqlite_file(sql), isolation_level=None, check_same_thread=False)
        outcomes: list[bool] = []
        lock = threading.Lock()

        def hog() -> None:
            for _ in range(30):
                other.execute("BEGIN IMMEDIATE")
                other.execute("COMMIT")

        def admit() -> None:
            for _ in range(20):
                refused = sql.admit(budget, [])
                with lock:
                    outcomes.append(refused is None)

        threads = [threading.Thread(target=hog)] + [threading.Thread(target=admit) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        other.close()
        assert not any(thread.is_alive() for thread in threads)
        assert outcomes.count(True) == 59 and len(outcomes) == 80  # 60 with the first admission


def test_sqlite_admission_fails_closed_when_the_lock_outlasts_the_timeout(tmp_path: Path) -> None:
    """Another connection keeps the write lock past the store's timeout: the admission raises
    StateUnavailableError (fail closed) and counts nothing; once released, admissions go on."""
    with state_store("sqlite", tmp_path, timeout=0.05) as sql:
        budget = [_budget("tenant:acme", 2)]
        assert sql.admit(budget, []) is None
        other = sqlite3.connect(_sqlite_file(sql), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StateUnavailableError):
                sql.admit(budget, [])
        finally:
            other.execute("COMMIT")
            other.close()
        assert sql.admit(budget, []) is None  # the second of two: the refused try counted nothing
        refused = sql.admit(budget, [])
        assert refused is not None and refused.quota == budget[0]
