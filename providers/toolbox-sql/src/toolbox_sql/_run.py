"""Running a `Plan`: parameters bound (the tenant from the context), a deadline, rows streamed.

A query runs on the reader pool and is never committed (the connection goes
back to the pool rolled back). A write runs on the writer pool in one
transaction that is committed only when it changed at most
``max_affected_rows`` rows. Failures become toolbox errors whose messages
name the SQLSTATE and the database's own words, with every bound value
masked; never the URL or a parameter.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.exc import DBAPIError

from toolbox import ExecutionContext
from toolbox.errors import ToolConnectionError
from toolbox.provider import MASK, require_dispatch
from toolbox_sql._database import Database
from toolbox_sql._errors import SqlExecutionError, SqlTimeoutError, SqlWriteLimitError
from toolbox_sql._plan import Plan
from toolbox_sql._result import SqlResult, collect
from toolbox_sql._sqlite import GUARD
from toolbox_sql._tenant import TENANT_PARAMETER

__all__ = ["run_query", "run_write"]

_MASKED_MIN = 3  # shorter values are masked nowhere: they would mask ordinary words


def _bound(plan: Plan, parameters: Mapping[str, Any], context: ExecutionContext) -> dict[str, Any]:
    bound = {name: parameters[name] for name in plan.parameters}
    if plan.tenant:
        bound[TENANT_PARAMETER] = context.tenant
    return bound


def _seconds(database: Database, context: ExecutionContext) -> float:
    """Seconds the statement may run: the profile's timeout, or less when the context's deadline is near."""
    timeout = database.config.statement_timeout
    deadline = context.deadline
    if deadline is not None:
        left = (deadline - datetime.now(timezone.utc)).total_seconds()
        if left <= 0:
            raise SqlTimeoutError(
                "the context's deadline has passed; the statement was not sent", request_sent=False
            )
        timeout = min(timeout, left)
    return timeout


def run_query(
    database: Database, plan: Plan, parameters: Mapping[str, Any], context: ExecutionContext
) -> SqlResult:
    """Run a query's plan on the reader pool and take its rows within the caps.

    Raises:
        toolbox.errors.GovernanceBypassError: called outside the chain's dispatch of the database's reader.
    """
    require_dispatch(database.read_tool)
    config = database.config
    bound = _bound(plan, parameters, context)
    seconds = _seconds(database, context)
    connection = _checkout(database, writer=False)
    try:
        driver = connection.driver_connection
        if isinstance(driver, sqlite3.Connection):
            guard = connection.info[GUARD]
            guard.calls, guard.deadline = plan.calls, time.monotonic() + seconds
            cursor = None
            try:
                cursor = driver.execute(plan.text, bound)
                columns = [d[0] for d in cursor.description or ()]
                return collect(columns, cursor, max_rows=config.max_rows, max_bytes=config.max_bytes)
            finally:
                if cursor is not None:
                    cursor.close()  # ends the statement: rows past the caps are never stepped
                guard.calls, guard.deadline = frozenset(), None
        from toolbox_sql._postgres import stream_rows

        with driver.cursor() as cursor:
            _shorten_timeout(cursor, seconds, config.statement_timeout)
            columns, rows = stream_rows(cursor, plan.text, bound)
            try:
                return collect(columns, rows, max_rows=config.max_rows, max_bytes=config.max_bytes)
            finally:
                rows.close()
    except Exception as exc:  # noqa: BLE001 - every driver failure is described, then raised
        raise _failure(exc, database, bound, connection) from None
    finally:
        connection.close()


def run_write(
    database: Database, plan: Plan, parameters: Mapping[str, Any], context: ExecutionContext
) -> SqlResult:
    """Run a write's plan in one transaction on the writer pool; roll it back past ``max_affected_rows``.

    Raises:
        toolbox.errors.GovernanceBypassError: called outside the chain's dispatch of the database's writer.
    """
    require_dispatch(database.write_tool)
    config = database.config
    writes = config.writes
    cap = writes.max_affected_rows if writes is not None else 0
    bound = _bound(plan, parameters, context)
    seconds = _seconds(database, context)
    connection = _checkout(database, writer=True)
    try:
        driver = connection.driver_connection
        if isinstance(driver, sqlite3.Connection):
            return _sqlite_write(
                driver, connection.info[GUARD], plan, bound, seconds, config.max_rows, config.max_bytes, cap
            )
        with driver.cursor() as cursor:
            _shorten_timeout(cursor, seconds, config.statement_timeout)
            cursor.execute(plan.text, bound, binary=True)  # the extended protocol: one statement only
            affected = max(cursor.rowcount, 0)
            if affected > cap and plan.kind in ("INSERT", "UPDATE", "DELETE"):
                driver.rollback()
                raise _too_many(affected, cap)
            columns = [c.name for c in cursor.description or ()]
            rows = cursor if cursor.description else iter(())
            result = collect(
                columns, rows, max_rows=config.max_rows, max_bytes=config.max_bytes, rows_affected=affected
            )
        _commit(driver.commit)
        return result
    except (SqlWriteLimitError, ToolConnectionError):
        raise
    except Exception as exc:  # noqa: BLE001 - every driver failure is described, then raised
        raise _failure(exc, database, bound, connection) from None
    finally:
        connection.close()


def _sqlite_write(  # noqa: PLR0917 - one write's settings, in order
    driver: sqlite3.Connection,
    guard: Any,
    plan: Plan,
    bound: dict[str, Any],
    seconds: float,
    max_rows: int,
    max_bytes: int,
    cap: int,
) -> SqlResult:
    guard.calls, guard.deadline = plan.calls, time.monotonic() + seconds
    guard.schema_change = plan.kind not in ("INSERT", "UPDATE", "DELETE")
    try:
        driver.execute("BEGIN IMMEDIATE")
        before = driver.total_changes
        try:
            cursor = driver.execute(plan.text, bound)
            columns = [d[0] for d in cursor.description or ()]
            returned = (
                cursor.fetchall() if cursor.description else []
            )  # every change happens at the first step
            affected = driver.total_changes - before
            if affected > cap and plan.kind in ("INSERT", "UPDATE", "DELETE"):
                raise _too_many(affected, cap)
        except BaseException:
            if driver.in_transaction:  # an interrupted statement's transaction is already rolled back
                driver.execute("ROLLBACK")
            raise
        result = collect(columns, returned, max_rows=max_rows, max_bytes=max_bytes, rows_affected=affected)
        _commit(lambda: driver.execute("COMMIT"))
        return result
    finally:
        guard.calls, guard.deadline, guard.schema_change = frozenset(), None, False


def _shorten_timeout(cursor: Any, seconds: float, configured: float) -> None:
    """PostgreSQL: a nearer deadline than the session's timeout, for this transaction only."""
    if seconds < configured:
        cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}")


def _commit(commit: Any) -> None:
    try:
        commit()
    except Exception as exc:  # noqa: BLE001 - any failure of the commit leaves the outcome unknown
        # The statement ran; whether its changes were kept is not known.
        raise ToolConnectionError(
            f"the commit failed ({type(exc).__name__}); the changes may or may not have been kept",
            request_sent=True,
        ) from None


def _too_many(affected: int, cap: int) -> SqlWriteLimitError:
    return SqlWriteLimitError(
        f"the statement changed {affected} rows, more than max_affected_rows={cap}; it was rolled back, "
        "nothing changed",
        request_sent=False,
    )


def _checkout(database: Database, *, writer: bool) -> Any:
    try:
        return (database.writer() if writer else database.reader()).raw_connection()
    except Exception as exc:  # noqa: BLE001 - any failure to connect is reported the same way
        raise ToolConnectionError(
            f"could not connect to database {database.name!r} ({type(_original(exc)).__name__})",
            request_sent=False,
        ) from None


def _original(exc: BaseException) -> BaseException:
    return exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc


def _failure(exc: BaseException, database: Database, bound: Mapping[str, Any], connection: Any) -> Exception:
    """``exc`` from the driver as a toolbox error that names no value."""
    if isinstance(exc, (SqlExecutionError, ToolConnectionError)):
        return exc
    original = _original(exc)
    if isinstance(original, sqlite3.OperationalError) and "interrupted" in str(original):
        return SqlTimeoutError(
            f"the statement ran longer than {database.config.statement_timeout:g} s and was interrupted"
        )
    state = getattr(original, "sqlstate", None)
    if state == "57014":  # query_canceled: the statement timeout
        return SqlTimeoutError(
            f"the statement ran longer than {database.config.statement_timeout:g} s and was cancelled"
        )
    if type(original).__module__.startswith("psycopg") and type(original).__name__ in (
        "OperationalError",
        "InterfaceError",
    ):
        connection.invalidate()
        return ToolConnectionError(
            f"the connection to database {database.name!r} failed ({type(original).__name__})",
            request_sent=True,
        )
    message = _masked(_primary(original), bound)
    code = f"SQLSTATE {state}: " if state else f"{type(original).__name__}: "
    return SqlExecutionError(f"database {database.name!r} refused the statement: {code}{message}")


def _primary(error: BaseException) -> str:
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    text = primary if isinstance(primary, str) else (str(error).splitlines()[0] if str(error) else "")
    return text[:300]


def _masked(message: str, bound: Mapping[str, Any]) -> str:
    for value in bound.values():
        text = (
            value
            if isinstance(value, str)
            else None
            if isinstance(value, bool) or value is None
            else str(value)
        )
        if text is not None and len(text) >= _MASKED_MIN:
            message = message.replace(text, MASK)
    return message
