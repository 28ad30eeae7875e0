"""Budgets and rate limits in SQL: a call's quotas checked and counted atomically, in few statements.

A quota's row in ``<prefix>counters`` is its lock and its count: for a budget
the calls of its current window, for a rate limit how many of its admissions
``<prefix>rate_log`` holds (`toolbox.state._sql_schema`), so no call counts a
window's admissions.

- **PostgreSQL**: one statement, one round trip in autocommit: the function
  `toolbox.state._sql_admit` holds every row in key order, decides and counts.
- **SQLite** (one host): ``BEGIN IMMEDIATE`` holds the database's write lock
  and the clock is read then. One statement forgets the admissions that left
  each rate limit's window (a trigger uncounts them), one upsert counts the
  call in every quota and returns the rows (a budget whose window ended
  starts a new one), one inserts the rate limits' admissions, then
  ``COMMIT``; a refused call rolls back instead, so it counts nowhere. Plain
  SQL on the sqlite3 connection (its statement cache), no SQLAlchemy layer.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, final

from toolbox.pipeline._state_ports import Clock, Quota, Refusal, StateUnavailableError
from toolbox.state._sql_admit import call_sql
from toolbox.state._sql_pool import Connections
from toolbox.state._sql_schema import Schema

__all__ = ["GC_EVERY", "SqlLimits"]

#: Every this many admissions a process deletes the counters whose window ended, with the
#: admissions of those rate limits (all older than their window).
GC_EVERY = 512


@final
class SqlLimits:
    """`LimitStore.admit` on the store's own connections (`toolbox.state._sql_pool`)."""

    __slots__ = ("_calls", "_clock", "_connections", "_postgres", "_schema", "_sql")

    def __init__(
        self, schema: Schema, connections: Connections[Any], *, postgres: bool, clock: Clock = time.time
    ) -> None:
        self._schema = schema
        self._connections = connections
        self._postgres = postgres
        self._clock = clock
        self._calls = 0
        self._sql = call_sql(schema.admit) if postgres else ""

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """Refuse if any quota is spent; otherwise count the call in every one."""
        budget_of = {"b:" + q.key: q for q in budgets}
        rate_of = {"r:" + q.key: q for q in rates}
        if not budget_of and not rate_of:
            return None
        self._calls += 1
        cleanup = self._calls % GC_EVERY == 0
        if self._postgres:
            return self._postgres_admit(budget_of, rate_of, cleanup)
        return self._sqlite_admit(budget_of, rate_of, cleanup)

    def _postgres_admit(
        self, budget_of: dict[str, Quota], rate_of: dict[str, Quota], cleanup: bool
    ) -> Refusal | None:
        quotas = [*budget_of.values(), *rate_of.values()]
        arguments = (
            [*budget_of, *rate_of],
            [q.limit for q in quotas],
            [q.window for q in quotas],
            [False] * len(budget_of) + [True] * len(rate_of),
            self._clock(),
            cleanup,
        )
        pool = self._connections
        conn = pool.take()
        try:
            answer = conn.execute(self._sql, arguments).fetchone()[0]
        except Exception as exc:  # noqa: BLE001 - any failure of the driver: the store is unavailable
            pool.drop(conn)
            # The exception text can hold the URL or parameters: only its type is passed on.
            raise StateUnavailableError(f"the SQL state store failed ({type(exc).__name__})") from None
        except BaseException:
            pool.drop(conn)
            raise
        pool.give(conn)
        if answer is None:
            return None
        index, rate, wait = answer
        return Refusal(quotas[int(index) - 1], bool(rate), float(wait))

    def _sqlite_admit(
        self, budget_of: dict[str, Quota], rate_of: dict[str, Quota], cleanup: bool
    ) -> Refusal | None:
        sql = _sqlite_sql(self._schema.counters.name, self._schema.log.name, len(budget_of), len(rate_of))
        pool = self._connections
        conn: sqlite3.Connection = pool.take()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                refusal = self._sqlite_steps(conn, sql, budget_of, rate_of, cleanup)
                conn.execute("ROLLBACK" if refusal is not None else "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
        except sqlite3.Error as exc:
            pool.drop(conn)
            raise StateUnavailableError(f"the SQL state store failed ({type(exc).__name__})") from None
        except BaseException:
            pool.drop(conn)
            raise
        pool.give(conn)
        return refusal

    def _sqlite_steps(
        self,
        conn: sqlite3.Connection,
        sql: dict[str, str],
        budget_of: dict[str, Quota],
        rate_of: dict[str, Quota],
        cleanup: bool,
    ) -> Refusal | None:
        now = self._clock()  # the write lock is held: read the clock now
        if rate_of:
            forget: list[object] = []
            for key, quota in rate_of.items():
                forget += (key, now - quota.window)
            conn.execute(sql["forget"], forget)
        counted: list[object] = [now]
        for key, quota in (*budget_of.items(), *rate_of.items()):
            counted += (key, now + quota.window)
        rows = {key: (calls, expires_at) for key, calls, expires_at in conn.execute(sql["count"], counted)}
        for key, quota in budget_of.items():
            calls, expires_at = rows[key]
            if calls > quota.limit:  # counted one past the budget: refused, rolled back
                return Refusal(quota, False, quota.window if calls == 1 else expires_at - now)
        for key, quota in rate_of.items():
            if rows[key][0] > quota.limit:
                (oldest,) = conn.execute(sql["oldest"], (key,)).fetchone()
                return Refusal(quota, True, (now if oldest is None else oldest) + quota.window - now)
        if rate_of:
            conn.execute(sql["log"], [part for key in rate_of for part in (key, now)])
        if cleanup:
            conn.execute(sql["cleanup_log"], (now,))
            conn.execute(sql["cleanup"], (now,))
        return None


@lru_cache(maxsize=256)
def _sqlite_sql(counters: str, log: str, budgets: int, rates: int) -> dict[str, str]:
    """The statements of an admission with this many budgets and rate limits (sqlite3 caches each)."""
    # The names are the validated prefix (lowercase letters, digits, _) and fixed suffixes.
    c, g = f'"{counters}"', f'"{log}"'
    n = budgets + rates
    values = ", ".join(f"(?{2 + 2 * i}, 1, ?{3 + 2 * i})" for i in range(n))
    return {
        "forget": f"DELETE FROM {g} WHERE "  # noqa: S608 - validated names, bound values
        + " OR ".join("(key = ? AND at <= ?)" for _ in range(rates)),
        # A rate row counts its log (the trigger uncounts what is forgotten); a live budget
        # counts on; a budget whose window ended (or a new row) starts one at 1.
        "count": f"INSERT INTO {c} (key, calls, expires_at) VALUES {values} "  # noqa: S608 - validated names
        "ON CONFLICT (key) DO UPDATE SET "
        "calls = CASE WHEN expires_at > ?1 OR substr(key, 1, 2) = 'r:' THEN calls + 1 ELSE 1 END, "
        "expires_at = CASE WHEN expires_at > ?1 AND substr(key, 1, 2) = 'b:' THEN expires_at "
        "ELSE excluded.expires_at END "
        "RETURNING key, calls, expires_at",
        "oldest": f"SELECT min(at) FROM {g} WHERE key = ?",  # noqa: S608 - validated names
        "log": f"INSERT INTO {g} (key, at, n) VALUES "  # noqa: S608 - validated names
        + ", ".join("(?, ?, 1)" for _ in range(rates))
        + " ON CONFLICT (key, at) DO UPDATE SET n = n + 1",
        # A rate limit's row expires a window after its last admission: all its log is older.
        "cleanup_log": f"DELETE FROM {g} WHERE key IN (SELECT key FROM {c} WHERE expires_at < ?)",  # noqa: S608
        "cleanup": f"DELETE FROM {c} WHERE expires_at < ?",  # noqa: S608 - validated names
    }
