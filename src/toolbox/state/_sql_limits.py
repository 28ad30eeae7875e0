"""Budgets and rate limits in SQL: one transaction per call that holds each quota's row first.

A quota's row in ``<prefix>counters`` is its lock (and, for a budget, its
count); a rate limit's admissions are rows of ``<prefix>rate_events``. The
clock is read once the rows are held, so racing processes see increasing times.

- **SQLite** (one host): ``BEGIN IMMEDIATE`` already holds the database's
  write lock, and each statement is a call into the library, so the
  statements run one per quota, as plain SQL on the sqlite3 connection of the
  transaction: the library's own work is microseconds, SQLAlchemy's layer
  per statement (compilation cache, events, result objects) would be ten
  times that.
- **PostgreSQL**: every statement is a round trip made while the quota rows
  are locked, and those locks order every process of the fleet that counts
  the same quota. So the transaction makes at most three statements: one
  upsert that creates or locks every row in key order and returns it, one that
  forgets expired admissions and counts each rate's window, and one that counts
  the call in every quota; then the commit.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any, NamedTuple, final

from sqlalchemy import Connection, Table, bindparam, delete, select, text

from toolbox.pipeline._state_ports import Clock, Quota, Refusal

__all__ = ["SqlLimits"]

#: Every this many admissions a process deletes the counters whose window ended, with the
#: admissions of those rate limits (all older than their window).
GC_EVERY = 512


class _Held(NamedTuple):
    """A quota's row, as the transaction holds it."""

    key: str
    calls: int
    expires_at: float


@final
class SqlLimits:
    """`LimitStore.admit` over the ``counters`` and ``events`` tables, inside the caller's transaction."""

    __slots__ = ("_calls", "_cleanup", "_clock", "_postgres", "_statements")

    def __init__(self, counters: Table, events: Table, *, postgres: bool, clock: Clock = time.time) -> None:
        self._postgres = postgres
        self._clock = clock
        self._calls = 0
        self._cleanup = _cleanup(counters, events, postgres=postgres)
        self._statements: dict[str, Any] = (
            _postgres_statements(counters, events) if postgres else _sqlite_statements(counters, events)
        )

    def admit(self, conn: Connection, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """Refuse if any quota is spent; otherwise count the call in every one (``conn``'s transaction)."""
        budget_of = {"b:" + q.key: q for q in budgets}
        rate_of = {"r:" + q.key: q for q in rates}
        if not budget_of and not rate_of:
            return None
        held = self._hold(conn, sorted(budget_of.keys() | rate_of.keys()))
        now = self._clock()  # the rows are held: read the clock now
        refusal = _spent_budget(budget_of, held, now) or self._full_rate(conn, rate_of, now)
        if refusal is not None:
            return refusal
        self._count(conn, budget_of, rate_of, held, now)
        self._calls += 1
        if self._calls % GC_EVERY == 0:
            for statement in self._cleanup:
                conn.execute(statement, {"now": now})
        return None

    def _hold(self, conn: Connection, keys: list[str]) -> dict[str, Any]:
        """Every quota's row (created when missing), held until the transaction ends."""
        sql = self._statements
        if not self._postgres:
            raw = _driver(conn)
            raw.executemany(sql["ensure"], [(k,) for k in keys])
            found = raw.execute(sql["hold"].format(", ".join("?" * len(keys))), keys)
            return {row[0]: _Held(*row) for row in found}
        return {row.key: row for row in conn.execute(sql["hold"], {"keys": keys})}

    def _full_rate(self, conn: Connection, rate_of: dict[str, Quota], now: float) -> Refusal | None:
        """Forget the admissions each rate limit's window has left behind; the first full window."""
        if not rate_of:
            return None
        sql = self._statements
        if self._postgres:
            keys = list(rate_of)
            cutoffs = [now - rate_of[key].window for key in keys]
            found = conn.execute(sql["windows"], {"keys": keys, "cutoffs": cutoffs})
            windows = {key: (count, oldest) for key, count, oldest in found}
        else:
            raw, windows = _driver(conn), {}
            for key, quota in rate_of.items():
                raw.execute(sql["forget"], (key, now - quota.window))
                windows[key] = raw.execute(sql["window"], (key,)).fetchone()
        for key, quota in rate_of.items():
            count, oldest = windows[key]
            if count >= quota.limit:
                return Refusal(quota, True, oldest + quota.window - now)
        return None

    def _count(
        self,
        conn: Connection,
        budget_of: dict[str, Quota],
        rate_of: dict[str, Quota],
        held: dict[str, Any],
        now: float,
    ) -> None:
        """Count the call: a budget whose window ended starts a new one; each rate limit records it."""
        sql = self._statements
        if self._postgres:
            quotas = {**budget_of, **rate_of}
            windows = [quota.window for quota in quotas.values()]
            rates = [key in rate_of for key in quotas]
            conn.execute(sql["count"], {"keys": list(quotas), "windows": windows, "rates": rates, "now": now})
            return
        raw = _driver(conn)
        for key, quota in budget_of.items():
            if held[key].expires_at <= now:
                raw.execute(sql["restart"], (now + quota.window, key))
            else:
                raw.execute(sql["count"], (key,))
        if rate_of:
            raw.executemany(sql["admitted"], [(key, now) for key in rate_of])
            # A counter row of a rate limit is only its lock: forget it a window after its last call.
            raw.executemany(sql["keep"], [(now + quota.window, key) for key, quota in rate_of.items()])


def _spent_budget(budget_of: dict[str, Quota], held: dict[str, Any], now: float) -> Refusal | None:
    """The first budget already spent in its current window (a spent window counts from zero again)."""
    for key, quota in budget_of.items():
        row = held[key]
        live = row.expires_at > now
        # A budget of 0 refuses even in a fresh window.
        if (row.calls if live else 0) >= quota.limit:
            return Refusal(quota, False, row.expires_at - now if live else quota.window)
    return None


def _cleanup(counters: Table, events: Table, *, postgres: bool) -> tuple[Any, ...]:
    """The statements that forget expired counters and, for a rate limit, its admissions.

    A rate limit's row expires a window after its last admission, so every
    admission left under its key is outside the window: a key used once (a
    per-run limit) leaves nothing behind.
    """
    expired = counters.c.expires_at < bindparam("now")
    if not postgres:  # BEGIN IMMEDIATE holds the whole database
        stale = select(counters.c.key).where(expired).scalar_subquery()
        return delete(events).where(events.c.key.in_(stale)), delete(counters).where(expired)
    # Only rows nobody holds: never wait for a row another process holds (it may be waiting
    # for one this transaction holds: a deadlock). A key's admissions change only under its row.
    unheld = select(counters.c.key).where(expired).with_for_update(skip_locked=True).scalar_subquery()
    gone = delete(counters).where(counters.c.key.in_(unheld)).returning(counters.c.key).cte("gone")
    return (delete(events).where(events.c.key.in_(select(gone.c.key))),)


def _driver(conn: Connection) -> sqlite3.Connection:
    """The sqlite3 connection under ``conn`` (inside its ``BEGIN IMMEDIATE`` transaction)."""
    driver = conn.connection.driver_connection
    assert isinstance(driver, sqlite3.Connection)
    return driver


def _sqlite_statements(counters: Table, events: Table) -> dict[str, str]:
    """One statement per quota and step, as SQL text (sqlite3 caches each prepared statement)."""
    # The names are the validated prefix (lowercase letters, digits, _) and fixed suffixes.
    c, e = f'"{counters.name}"', f'"{events.name}"'
    return {
        "ensure": f"INSERT INTO {c} (key, calls, expires_at) VALUES (?, 0, 0) "  # noqa: S608 - validated names
        "ON CONFLICT (key) DO NOTHING",
        "hold": f"SELECT key, calls, expires_at FROM {c} WHERE key IN ({{}})",  # noqa: S608 - validated names
        "forget": f"DELETE FROM {e} WHERE key = ? AND at <= ?",  # noqa: S608 - validated names
        "window": f"SELECT count(*), min(at) FROM {e} WHERE key = ?",  # noqa: S608 - validated names
        "restart": f"UPDATE {c} SET calls = 1, expires_at = ? WHERE key = ?",  # noqa: S608 - validated names
        "count": f"UPDATE {c} SET calls = calls + 1 WHERE key = ?",  # noqa: S608 - validated names
        "admitted": f"INSERT INTO {e} (key, at) VALUES (?, ?)",  # noqa: S608 - validated names
        "keep": f"UPDATE {c} SET expires_at = ? WHERE key = ?",  # noqa: S608 - validated names
    }


def _postgres_statements(counters: Table, events: Table) -> dict[str, Any]:
    """The three statements of a PostgreSQL admission, each over arrays of every quota at once."""
    # The names are the validated prefix (lowercase letters, digits, _) and fixed suffixes.
    c, e = f'"{counters.name}"', f'"{events.name}"'
    return {
        # Creates the missing rows and locks every row in key order (no deadlock between
        # racing processes); a conflicting row is returned as last committed, once locked.
        "hold": text(
            f"INSERT INTO {c} (key, calls, expires_at) "  # noqa: S608 - validated table names, bound values
            "SELECT k, 0, 0 FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k "
            f"ON CONFLICT (key) DO UPDATE SET calls = {c}.calls "
            "RETURNING key, calls, expires_at"
        ),
        # The DELETE runs to completion, but the count reads the statement's snapshot (from
        # before it): so it counts only what is newer than the cutoff itself.
        "windows": text(
            "WITH q AS (SELECT * FROM unnest(CAST(:keys AS text[]), "  # noqa: S608 - validated names
            "CAST(:cutoffs AS float8[])) AS q(key, cutoff)), "
            f"gone AS (DELETE FROM {e} AS e USING q WHERE e.key = q.key AND e.at <= q.cutoff) "
            f"SELECT q.key, count(e.at), min(e.at) FROM q LEFT JOIN {e} AS e "
            "ON e.key = q.key AND e.at > q.cutoff GROUP BY q.key"
        ),
        # A budget's window restarts when it has ended; a rate limit's row (only its lock) is
        # forgotten a window after its last call; each rate limit records the admission.
        "count": text(
            "WITH q AS (SELECT * FROM unnest(CAST(:keys AS text[]), "  # noqa: S608 - validated names
            "CAST(:windows AS float8[]), CAST(:rates AS boolean[])) AS q(key, win, rate)), "
            f"moved AS (UPDATE {c} AS c SET "
            "calls = CASE WHEN q.rate THEN c.calls WHEN c.expires_at <= :now THEN 1 ELSE c.calls + 1 END, "
            "expires_at = CASE WHEN q.rate OR c.expires_at <= :now THEN :now + q.win ELSE c.expires_at END "
            "FROM q WHERE c.key = q.key) "
            f"INSERT INTO {e} (key, at) SELECT q.key, :now FROM q WHERE q.rate"
        ),
    }
