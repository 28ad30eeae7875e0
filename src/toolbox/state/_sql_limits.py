"""Budgets and rate limits in SQL: a call's quotas checked and counted atomically, in few statements.

A quota's row in ``<prefix>counters`` is its lock and its count: for a budget
the calls of its current window, for a rate limit how many of its admissions
``<prefix>rate_log`` holds (`toolbox.state._sql_schema`), so no call counts a
window's admissions.

- **PostgreSQL**: one statement, one round trip in autocommit: the function
  `toolbox.state._sql_admit` holds every row in key order, decides and counts.
- **SQLite** (one host): one statement in autocommit, its own transaction
  (a write statement takes the write lock first, as ``BEGIN IMMEDIATE``):
  an upsert of every quota's row that counts the call, a trigger logging each
  rate limit's admission; a count past its limit aborts the statement, which
  then changed nothing. A rate row counts admissions not yet forgotten, some
  of which may have left the window: so an abort (or every `FORGET_EVERY`
  admissions) takes the careful path, under ``BEGIN IMMEDIATE``: forget what
  left the windows (a trigger uncounts it), count again, and if that aborts
  too, read the rows and name the refusal. Plain SQL on the sqlite3
  connection (its statement cache), no SQLAlchemy layer.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, final

from toolbox.foundations._sqlite_wal import WRITER_WAIT, is_locked, retry_locked
from toolbox.pipeline._state_ports import Clock, Quota, Refusal, StateUnavailableError
from toolbox.state._sql_admit import call_sql
from toolbox.state._sql_pool import Connections
from toolbox.state._sql_schema import Schema

__all__ = ["FORGET_EVERY", "GC_EVERY", "SqlLimits"]

#: Every this many admissions a process deletes the counters whose window ended, with the
#: admissions of those rate limits (all older than their window).
GC_EVERY = 512
#: Every this many admissions with a rate limit a process forgets the admissions that left the
#: call's windows before counting (otherwise only when a rate limit looks full).
FORGET_EVERY = 64


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
        forget = cleanup or (bool(rate_of) and self._calls % FORGET_EVERY == 0)
        if self._postgres:
            return self._postgres_admit(budget_of, rate_of, forget=forget, cleanup=cleanup)
        return self._sqlite_admit(budget_of, rate_of, careful=forget, cleanup=cleanup)

    def _postgres_admit(
        self, budget_of: dict[str, Quota], rate_of: dict[str, Quota], *, forget: bool, cleanup: bool
    ) -> Refusal | None:
        quotas = [*budget_of.values(), *rate_of.values()]
        arguments = (
            [*budget_of, *rate_of],
            [q.limit for q in quotas],
            [q.window for q in quotas],
            [False] * len(budget_of) + [True] * len(rate_of),
            self._clock(),
            forget,
            cleanup,
        )
        with self._connections.lease() as conn:  # any failure of the driver: the store is unavailable
            answer = conn.execute(self._sql, arguments).fetchone()[0]
        if answer is None:
            return None
        index, rate, wait = answer
        return Refusal(quotas[int(index) - 1], bool(rate), float(wait))

    def _sqlite_admit(
        self, budget_of: dict[str, Quota], rate_of: dict[str, Quota], *, careful: bool, cleanup: bool
    ) -> Refusal | None:
        sql = _sqlite_sql(self._schema.counters.name, self._schema.log.name, len(budget_of), len(rate_of))
        quotas = (*budget_of.items(), *rate_of.items())
        conn: sqlite3.Connection
        with self._connections.lease(sqlite3.Error) as conn:
            if not careful:
                try:
                    self._count(conn, sql["count"], quotas)
                except sqlite3.IntegrityError:  # a quota looks spent: the statement changed nothing
                    pass
                else:
                    return None
            return self._locked(conn, sql, budget_of, rate_of, cleanup)

    def _count(self, conn: sqlite3.Connection, count: str, quotas: Sequence[tuple[str, Quota]]) -> None:
        """``count`` in autocommit: one try, then, while another writer holds the file (the
        statement did nothing), `retry_locked` within the store's timeout."""
        try:
            conn.execute(count, _counted(quotas, self._clock()))
        except sqlite3.OperationalError as exc:
            if not is_locked(exc):
                raise
            retry_locked(
                lambda statement: conn.execute(statement, _counted(quotas, self._clock())),
                count,
                self._connections.timeout,
                longest_wait=WRITER_WAIT,
            )

    def _locked(
        self,
        conn: sqlite3.Connection,
        sql: dict[str, str],
        budget_of: dict[str, Quota],
        rate_of: dict[str, Quota],
        cleanup: bool,
    ) -> Refusal | None:
        """Under the write lock: forget what left the rate windows, count the call or name the refusal."""
        retry_locked(conn.execute, "BEGIN IMMEDIATE", self._connections.timeout, longest_wait=WRITER_WAIT)
        try:
            now = self._clock()  # the write lock is held: read the clock now
            if rate_of:
                conn.execute(sql["forget"], [part for key in rate_of for part in (key, now)])
            try:
                conn.execute(sql["count"], _counted((*budget_of.items(), *rate_of.items()), now))
                refusal = None
            except sqlite3.IntegrityError:  # spent indeed: the statement alone is undone
                refusal = _refusal(conn, sql, budget_of, rate_of, now)
            if cleanup:
                conn.execute(sql["cleanup_log"], (now,))
                conn.execute(sql["cleanup"], (now,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        return refusal


def _counted(quotas: Sequence[tuple[str, Quota]], now: float) -> list[object]:
    """The count statement's parameters: the time, then each quota's key, limit and window's end."""
    values: list[object] = [now]
    for key, quota in quotas:
        values += (key, quota.limit, now + quota.window)
    return values


def _refusal(
    conn: sqlite3.Connection,
    sql: dict[str, str],
    budget_of: dict[str, Quota],
    rate_of: dict[str, Quota],
    now: float,
) -> Refusal:
    """The first spent quota in the caller's order (budgets first), read under the write lock."""
    keys = [*budget_of, *rate_of]
    rows = {key: (calls, ends) for key, calls, ends in conn.execute(sql["rows"], keys)}
    for key, quota in budget_of.items():
        calls, ends = rows.get(key, (0, 0.0))
        live = ends > now
        # A spent window counts from zero again; a budget of 0 refuses even in a fresh window.
        if (calls if live else 0) >= quota.limit:
            return Refusal(quota, False, ends - now if live else quota.window)
    for key, quota in rate_of.items():
        if rows.get(key, (0, 0.0))[0] >= quota.limit:
            (oldest,) = conn.execute(sql["oldest"], (key,)).fetchone()
            return Refusal(quota, True, quota.window if oldest is None else oldest - now)
    raise StateUnavailableError("the SQL state store refused a call without a spent quota")


@lru_cache(maxsize=256)
def _sqlite_sql(counters: str, log: str, budgets: int, rates: int) -> dict[str, str]:
    """The statements of an admission with this many budgets and rate limits (sqlite3 caches each).

    ``count`` is the whole admission in one statement: ``?1`` the time, then
    per quota its key, limit and window's end. A budget counts on in its
    window or starts a new one at 1; a rate row counts its log, which a
    trigger writes (`toolbox.state._sql_schema`), and ends with its latest
    admission (never earlier: the log stays in order). A count past its limit
    is NULL, which the column refuses: the statement aborts, changing nothing.
    """
    # The names are the validated prefix (lowercase letters, digits, _) and fixed suffixes.
    c, g = f'"{counters}"', f'"{log}"'
    n = budgets + rates
    values = ", ".join(
        f"(?{2 + 3 * i}, CASE WHEN ?{3 + 3 * i} >= 1 THEN 1 END, ?{4 + 3 * i})" for i in range(n)
    )
    limit = "CASE key " + " ".join(f"WHEN ?{2 + 3 * i} THEN ?{3 + 3 * i}" for i in range(n)) + " END"
    rate = "substr(key, 1, 2) = 'r:'"
    following = f"CASE WHEN expires_at > ?1 OR {rate} THEN calls + 1 ELSE 1 END"
    return {
        "count": f"INSERT INTO {c} (key, calls, expires_at) VALUES {values} "  # noqa: S608 - validated names
        "ON CONFLICT (key) DO UPDATE SET "
        f"calls = CASE WHEN {following} > {limit} THEN NULL ELSE {following} END, "
        f"expires_at = CASE WHEN {rate} THEN max(expires_at, excluded.expires_at) "
        "WHEN expires_at > ?1 THEN expires_at ELSE excluded.expires_at END",
        "forget": f"DELETE FROM {g} WHERE "  # noqa: S608 - validated names, bound values
        + " OR ".join("(key = ? AND expires_at <= ?)" for _ in range(rates)),
        "rows": f"SELECT key, calls, expires_at FROM {c} WHERE key IN ({', '.join('?' * n)})",  # noqa: S608
        "oldest": f"SELECT min(expires_at) FROM {g} WHERE key = ?",  # noqa: S608 - validated names
        # A rate limit's row ends with its latest admission: all its log has left the window.
        "cleanup_log": f"DELETE FROM {g} WHERE key IN (SELECT key FROM {c} WHERE expires_at < ?)",  # noqa: S608
        "cleanup": f"DELETE FROM {c} WHERE expires_at < ?",  # noqa: S608 - validated names
    }
