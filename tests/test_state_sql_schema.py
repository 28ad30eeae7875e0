"""The SQL store opens a database of the earlier schema (1) and migrates it: nothing lost, counts exact.

Schema 1 is frozen here as toolbox 0.1's `SqlState` created it (the same
SQLAlchemy definitions; its rows as its admissions left them: a rate limit's
row only its lock, ``calls`` 0, its admissions rows of ``<prefix>rate_events``).
On SQLite and PostgreSQL: the first call of the new store migrates it; the
kill switches, approvals, budgets and rate windows carry on exactly; a process
of the earlier version still running fails closed on its rate-limited calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text, create_engine, text
from sqlalchemy.engine import Engine

from state_support import pending, sql_url, unique
from toolbox.pipeline._state_ports import Quota, StateUnavailableError
from toolbox.state._sql_backend import SqlState
from toolbox.state._sql_schema import VERSION
from toolbox.testing import ManualClock

NOW = 1_800_000_000.0


def schema_1(prefix: str) -> MetaData:
    """toolbox 0.1's tables, as its `SqlState` created them."""
    meta = MetaData()
    Table(
        f"{prefix}kill",
        meta,
        Column("switch", String(300), primary_key=True),
        Column("reason", Text, nullable=False),
        Column("who", Text, nullable=False),
        Column("at", Float, nullable=False),
    )
    Table(
        f"{prefix}counters",
        meta,
        Column("key", String(900), primary_key=True),
        Column("calls", Integer, nullable=False),
        Column("expires_at", Float, nullable=False),
    )
    Table(
        f"{prefix}rate_events",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("key", String(900), nullable=False),
        Column("at", Float, nullable=False),
        Index(f"{prefix}rate_key_at", "key", "at"),
    )
    Table(
        f"{prefix}approvals",
        meta,
        Column("id", String(300), primary_key=True),
        Column("tenant", Text, nullable=False),
        Column("principal", Text, nullable=False),
        Column("state", String(16), nullable=False),
        Column("fingerprint", String(128), nullable=False),
        Column("created_at", Float, nullable=False),
        Column("expires_at", Float, nullable=False),
        Column("forget_at", Float, nullable=False),
        Column("data", Text, nullable=False),
        Index(f"{prefix}approvals_created", "created_at"),
        Index(f"{prefix}approvals_queue", "tenant", "principal", "state"),
    )
    return meta


@pytest.fixture(params=["sqlite", "postgres"])
def old_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Engine]]:
    """A database of schema 1 with what an earlier process left in it: (url, prefix, engine)."""
    url, prefix = sql_url(request.param, tmp_path), unique("v1") + "_"
    engine = create_engine(url)
    schema_1(prefix).create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            text(f'INSERT INTO "{prefix}kill" VALUES (:s, :r, :w, :a)'),
            {"s": "t:refund", "r": "incident 7", "w": "oncall", "a": NOW - 50},
        )
        conn.execute(
            text(f'INSERT INTO "{prefix}counters" VALUES (:k, :c, :e)'),
            [
                {"k": "b:tenant:acme", "c": 3, "e": NOW + 600},  # a budget of 5: 3 spent, window open
                # A rate row is only its lock, ending a window (60 s) after its latest admission.
                {"k": "r:tenant:acme", "c": 0, "e": NOW - 1 + 60},
                {"k": "r:tenant:gone", "c": 0, "e": NOW - 65 + 60},  # all its admissions left the window
            ],
        )
        admissions = [
            ("r:tenant:acme", NOW - 70),  # outside a 60 s window
            ("r:tenant:acme", NOW - 30),
            ("r:tenant:acme", NOW - 10),
            ("r:tenant:acme", NOW - 10),  # two at the same instant
            ("r:tenant:acme", NOW - 1),
            ("r:tenant:gone", NOW - 65),
        ]
        conn.execute(
            text(f'INSERT INTO "{prefix}rate_events" (key, at) VALUES (:k, :a)'),
            [{"k": k, "a": a} for k, a in admissions],
        )
    try:
        yield url, prefix, engine
    finally:
        store = SqlState(url, prefix=prefix)
        store.drop()
        store.close()
        engine.dispose()


def _budget(key: str, limit: int, window: float = 600.0) -> Quota:
    return Quota(key, limit, window, f"budget:{key}")


def _rate(key: str, limit: int, window: float = 60.0) -> Quota:
    return Quota(key, limit, window, f"rate:{key}")


def _counts(engine: Engine, prefix: str) -> dict[str, tuple[int, int]]:
    """Each rate row's count beside the admissions its log holds (they must agree)."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                f'SELECT c.key, c.calls, (SELECT coalesce(sum(n), 0) FROM "{prefix}rate_log" l '
                f"WHERE l.key = c.key) FROM \"{prefix}counters\" c WHERE c.key LIKE 'r:%'"
            )
        ).all()
    return {key: (int(calls), int(logged)) for key, calls, logged in rows}


def test_an_earlier_database_is_migrated_and_every_promise_carries_on(
    old_database: tuple[str, str, Engine],
) -> None:
    url, prefix, engine = old_database
    clock = ManualClock(NOW)
    store = SqlState(url, prefix=prefix, clock=clock)
    try:
        # The kill switch engaged before the upgrade is still engaged.
        entry = store.engaged()["refund"]
        assert (entry.reason, entry.who, entry.at) == ("incident 7", "oncall", NOW - 50)
        # The rate window holds the four admissions of the last minute: one more fits.
        assert store.admit([], [_rate("tenant:acme", 5)]) is None
        refused = store.admit([], [_rate("tenant:acme", 5)])
        assert refused is not None and refused.rate
        assert refused.retry_after == pytest.approx(30.0)  # the oldest in the window, 30 s ago
        # The budget keeps its 3 spent calls: two more, then refused until its window ends.
        assert store.admit([_budget("tenant:acme", 5)], []) is None
        assert store.admit([_budget("tenant:acme", 5)], []) is None
        spent = store.admit([_budget("tenant:acme", 5)], [])
        assert spent is not None and not spent.rate and spent.retry_after == pytest.approx(600.0)
        # A rate limit whose admissions all left the window starts empty.
        assert [store.admit([], [_rate("tenant:gone", 2)]) is None for _ in range(3)] == [True, True, False]
        with engine.connect() as conn:
            version = conn.execute(text(f'SELECT version FROM "{prefix}schema"')).scalar_one()
            left = conn.execute(text(f'SELECT count(*) FROM "{prefix}rate_events"')).scalar_one()
        assert (version, left) == (VERSION, 0)
        counts = _counts(engine, prefix)
        assert counts["r:tenant:acme"] == (5, 5)  # the expired one forgotten, the new one counted
        assert counts["r:tenant:gone"] == (2, 2)
        # Approvals are untouched by the migration and work as before.
        request = pending(created_at=clock())
        assert store.submit(request) == request.id
        assert store.get(request.id) is not None
    finally:
        store.close()
    # A second store (another process, later) finds schema 2: nothing migrates twice.
    again = SqlState(url, prefix=prefix, clock=ManualClock(NOW))
    try:
        refused = again.admit([], [_rate("tenant:acme", 5)])
        assert refused is not None and refused.rate
        assert _counts(engine, prefix)["r:tenant:acme"] == (5, 5)
    finally:
        again.close()


def test_a_process_of_the_earlier_version_fails_closed_on_rate_limits(
    old_database: tuple[str, str, Engine],
) -> None:
    url, prefix, engine = old_database
    store = SqlState(url, prefix=prefix, clock=ManualClock(NOW))
    try:
        store.create()  # migrates
        # Schema 1's processes record a rate admission with this insert: refused now, so such a
        # process's rate-limited calls fail (state unavailable) instead of counting elsewhere.
        with pytest.raises(Exception, match="retired") as raised, engine.begin() as conn:
            conn.execute(
                text(f'INSERT INTO "{prefix}rate_events" (key, at) VALUES (:k, :a)'),
                {"k": "r:tenant:acme", "a": NOW},
            )
        assert "upgrade this process" in str(raised.value)
        # Its budgets share the same rows as before: a budget's count is where it was.
        with engine.connect() as conn:
            calls = conn.execute(
                text(f"SELECT calls FROM \"{prefix}counters\" WHERE key = 'b:tenant:acme'")
            ).scalar_one()
        assert calls == 3
    finally:
        store.close()


def test_a_database_of_a_later_schema_is_refused(old_database: tuple[str, str, Engine]) -> None:
    url, prefix, engine = old_database
    store = SqlState(url, prefix=prefix)
    store.create()
    with engine.begin() as conn:
        conn.execute(text(f'UPDATE "{prefix}schema" SET version = :v'), {"v": VERSION + 1})
    later = SqlState(url, prefix=prefix)
    try:
        with pytest.raises(StateUnavailableError, match="newer than this toolbox"):
            later.admit([_budget("tenant:acme", 5)], [])
    finally:
        later.close()
        store.close()
