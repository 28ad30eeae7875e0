"""The PostgreSQL admission function: a call's budgets and rate limits in one statement, one round trip.

``<prefix>admit(keys, limits, windows, rates, now, forget, cleanup)`` runs in
the caller's statement, so in autocommit it is one transaction of its own: it
creates the missing quota rows and locks every row in key order (an upsert
ordered by key, so racing processes never deadlock), refuses with the first
spent quota in the caller's order, or counts the call in every quota; with
``cleanup`` it then deletes expired counters nobody holds, with their
admissions. A rate row counts the admissions its log keeps: when that reaches
the limit (and with ``forget``, every few calls) the ones that left the
window are forgotten and uncounted first, so the refusal is exact. It
returns NULL (admitted) or ``{index, rate (0/1), seconds to wait}``.

A rate limit's log holds when each admission leaves its window (its time plus
the window). The time is the caller's clock read before the round trip; the
log is kept in order all the same: an admission never ends before the latest
one logged (a process with a later clock may have locked first), so what a
window forgets is exactly what it would have forgotten with the clock read
under the lock.
"""

from __future__ import annotations

__all__ = ["call_sql", "function_sql"]


def call_sql(function: str) -> str:
    """The statement a call sends (psycopg placeholders)."""
    types = ("text[]", "bigint[]", "float8[]", "boolean[]", "float8", "boolean", "boolean")
    return f'SELECT "{function}"(' + ", ".join(f"%s::{t}" for t in types) + ")"


def function_sql(function: str, counters: str, log_table: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` of the admission (names: the validated prefix and fixed suffixes)."""
    c, log = f'"{counters}"', f'"{log_table}"'
    return f"""
CREATE OR REPLACE FUNCTION "{function}"(
  p_keys text[], p_limits bigint[], p_windows float8[], p_rates boolean[], p_now float8,
  p_forget boolean, p_cleanup boolean
) RETURNS float8[] LANGUAGE plpgsql AS $fn$
DECLARE
  held record;
  counted bigint;
  gone bigint;
  oldest float8;
  ends float8[] := '{{}}';
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
    IF p_rates[held.i] THEN
      counted := held.calls;  -- admissions its log keeps, some perhaps out of the window
      IF p_forget OR counted >= p_limits[held.i] THEN
        WITH g AS (
          DELETE FROM {log} AS l WHERE l.key = held.key AND l.expires_at <= p_now RETURNING l.n)
        SELECT coalesce(sum(g.n), 0) INTO gone FROM g;
        IF gone > 0 THEN
          UPDATE {c} AS c SET calls = c.calls - gone WHERE c.key = held.key;
          counted := counted - gone;
        END IF;
        IF counted >= p_limits[held.i] THEN
          SELECT min(l.expires_at) INTO oldest FROM {log} AS l WHERE l.key = held.key;
          RETURN ARRAY[held.i, 1, coalesce(oldest - p_now, p_windows[held.i])];
        END IF;
      END IF;
      -- The row ends with its latest admission: never end before it (see the module).
      ends := ends || greatest(p_now + p_windows[held.i], held.expires_at);
    ELSIF held.expires_at > p_now THEN
      IF held.calls >= p_limits[held.i] THEN
        RETURN ARRAY[held.i, 0, held.expires_at - p_now];
      END IF;
      ends := ends || held.expires_at;
    ELSIF p_limits[held.i] <= 0 THEN  -- a spent window counts from zero; a budget of 0 refuses
      RETURN ARRAY[held.i, 0, p_windows[held.i]];
    ELSE
      ends := ends || (p_now + p_windows[held.i]);
    END IF;
  END LOOP;
  -- A budget counts on in its window or starts a new one; a rate limit's row counts its log
  -- and ends with its latest admission's window; each rate limit logs the admission.
  -- One statement (one executor start): the rows, then the log (the log's rows are other rows).
  WITH q AS (SELECT * FROM unnest(p_keys, p_rates, ends) AS q(key, rate, ends)),
  moved AS (
    UPDATE {c} AS c SET
      calls = CASE WHEN q.rate OR c.expires_at > p_now THEN c.calls + 1 ELSE 1 END,
      expires_at = q.ends
    FROM q WHERE c.key = q.key)
  INSERT INTO {log} AS l (key, expires_at, n)
  SELECT q.key, q.ends, 1 FROM q WHERE q.rate
  ON CONFLICT (key, expires_at) DO UPDATE SET n = l.n + 1;
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
