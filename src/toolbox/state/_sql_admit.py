"""The PostgreSQL admission function: a call's budgets and rate limits in one statement, one round trip.

``<prefix>admit(keys, limits, windows, rates, now, cleanup)`` runs in the
caller's statement, so in autocommit it is one transaction of its own: it
creates the missing quota rows and locks every row in key order (an upsert
ordered by key, so racing processes never deadlock), forgets each rate
limit's admissions that left its window (uncounting them), refuses with the
first spent quota in the caller's order, or counts the call in every quota;
with ``cleanup`` it then deletes expired counters nobody holds, with their
admissions. It returns NULL (admitted) or ``{index, rate (0/1), seconds to wait}``.

The time is the caller's clock read before the round trip; a rate limit's
admissions are kept in order all the same: its time is never earlier than its
latest admission (a later process that locked first), so the log a window
counts is the log it would have counted with the clock read under the lock.
"""

from __future__ import annotations

__all__ = ["call_sql", "function_sql"]


def call_sql(function: str) -> str:
    """The statement a call sends (psycopg placeholders)."""
    types = ("text[]", "bigint[]", "float8[]", "boolean[]", "float8", "boolean")
    return f'SELECT "{function}"(' + ", ".join(f"%s::{t}" for t in types) + ")"


def function_sql(function: str, counters: str, log_table: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` of the admission (names: the validated prefix and fixed suffixes)."""
    c, log = f'"{counters}"', f'"{log_table}"'
    return f"""
CREATE OR REPLACE FUNCTION "{function}"(
  p_keys text[], p_limits bigint[], p_windows float8[], p_rates boolean[], p_now float8, p_cleanup boolean
) RETURNS float8[] LANGUAGE plpgsql AS $fn$
DECLARE
  held record;
  t float8;
  latest float8;
  gone bigint;
  oldest float8;
  times float8[] := '{{}}';
BEGIN
  FOR held IN
    WITH h AS (
      INSERT INTO {c} AS c (key, calls, expires_at)
      SELECT k, 0, 0 FROM unnest(p_keys) AS k ORDER BY k
      ON CONFLICT (key) DO UPDATE SET calls = c.calls
      RETURNING c.key, c.calls, c.expires_at)
    SELECT q.i, h.key, h.calls, h.expires_at
    FROM unnest(p_keys) WITH ORDINALITY AS q(key, i) JOIN h ON h.key = q.key ORDER BY q.i
  LOOP
    t := p_now;
    IF p_rates[held.i] THEN
      SELECT max(l.at) INTO latest FROM {log} AS l WHERE l.key = held.key;
      t := greatest(p_now, latest);
      WITH g AS (
        DELETE FROM {log} AS l WHERE l.key = held.key AND l.at <= t - p_windows[held.i] RETURNING l.n)
      SELECT coalesce(sum(g.n), 0) INTO gone FROM g;
      IF gone > 0 THEN
        UPDATE {c} AS c SET calls = c.calls - gone WHERE c.key = held.key;
      END IF;
      IF held.calls - gone >= p_limits[held.i] THEN
        SELECT min(l.at) INTO oldest FROM {log} AS l WHERE l.key = held.key;
        RETURN ARRAY[held.i, 1, coalesce(oldest, t) + p_windows[held.i] - t];
      END IF;
    ELSIF held.expires_at > t THEN
      IF held.calls >= p_limits[held.i] THEN
        RETURN ARRAY[held.i, 0, held.expires_at - t];
      END IF;
    ELSIF p_limits[held.i] <= 0 THEN  -- a spent window counts from zero; a budget of 0 refuses
      RETURN ARRAY[held.i, 0, p_windows[held.i]];
    END IF;
    times := times || t;
  END LOOP;
  -- A budget's window restarts when it has ended; a rate limit's row counts its log and is
  -- forgotten a window after its last call; each rate limit logs the admission.
  UPDATE {c} AS c SET
    calls = CASE WHEN q.rate OR c.expires_at > q.t THEN c.calls + 1 ELSE 1 END,
    expires_at = CASE WHEN q.rate OR c.expires_at <= q.t THEN q.t + q.win ELSE c.expires_at END
  FROM unnest(p_keys, p_windows, p_rates, times) AS q(key, win, rate, t) WHERE c.key = q.key;
  INSERT INTO {log} AS l (key, at, n)
  SELECT q.key, q.t, 1 FROM unnest(p_keys, p_rates, times) AS q(key, rate, t) WHERE q.rate
  ON CONFLICT (key, at) DO UPDATE SET n = l.n + 1;
  IF p_cleanup THEN
    -- Only rows nobody holds: never wait for a row another process holds (it may be waiting
    -- for one this call holds). A key's admissions change only under its row.
    WITH gone_keys AS (
      DELETE FROM {c} AS c WHERE c.key IN (
        SELECT s.key FROM {c} AS s WHERE s.expires_at < p_now FOR UPDATE SKIP LOCKED)
      RETURNING c.key)
    DELETE FROM {log} AS l WHERE l.key IN (SELECT gone_keys.key FROM gone_keys);
  END IF;
  RETURN NULL;
END
$fn$
"""  # noqa: S608 - validated names
