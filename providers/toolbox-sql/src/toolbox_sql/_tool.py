"""`SqlTool` and `SqlWriteTool`: a database's reads and writes, the SQL text the governed argument.

Each operation plans the statement when it is called (parse, checks,
rewrite; cached per text), so a refused statement raises `SqlDeniedError`
before any intent exists: on every door it runs zero times. The intent
hands governance the statement as checked (normalised SQL, kind, tables,
parameters), which is what guardrails match, approvals bind and the audit
trail summarises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from toolbox import ReadIntent, ToolRuntime, Tools, WriteIntent
from toolbox.errors import InvalidArgumentsError
from toolbox_sql._database import Database
from toolbox_sql._errors import SqlDeniedError
from toolbox_sql._plan import Plan
from toolbox_sql._result import SqlResult
from toolbox_sql._rules import PARAMETER_NAME
from toolbox_sql._run import run_query, run_write
from toolbox_sql._schema_info import SchemaCache, SqlSchema

__all__ = ["Scalar", "SqlTool", "SqlWriteTool", "sql_tool", "sql_write_tool", "tool_types_for"]

Scalar = str | int | float | bool | None
"""A value bound to a ``:name`` placeholder."""

_MAX_PARAMETERS = 100
_MAX_TEXT = 65_536


class _DatabaseTool:
    __slots__ = ("_closed", "_runtime")

    #: The database this subclass serves (set on each per-database subclass).
    database: ClassVar[Database]

    def __init__(self, runtime: ToolRuntime) -> None:
        """Build the tool for one context; the database's pools are shared, opened on first use.

        Raises:
            ValueError: the database's URL variable is missing or holds no supported URL.
        """
        self._runtime = runtime
        type(self).database.acquire(runtime.tools.catalog.env)
        self._closed = False

    def close(self) -> None:
        """Stop using the database; the last tool closed disposes its pools (`toolbox.Tools.close`)."""
        if not self._closed:
            self._closed = True
            type(self).database.release()

    def release(self) -> None:
        """Stop using the database, leaving its pools for other contexts: its context is done, not
        its owner (`toolbox.Tools.release`, after each request of `toolbox serve`)."""
        if not self._closed:
            self._closed = True
            type(self).database.release(keep_pools=True)

    def _plan(self, make: Any, sql: object) -> Plan:
        try:
            plan: Plan = make(sql)
        except SqlDeniedError as exc:
            self._runtime.record_denial(exc)
            raise
        return plan

    def _arguments(self, plan: Plan, params: Mapping[str, Any]) -> dict[str, Any]:
        # Scalars only (tables joined, one "params.NAME" key per parameter): the audit trail then
        # keeps them as they are and redacts them when its events are read, not on the call's path.
        arguments: dict[str, Any] = {
            "database": type(self).database.name,
            "kind": plan.kind,
            "sql": plan.sql,
            "tables": ",".join(plan.tables),
        }
        for name, value in params.items():
            arguments[f"params.{name}"] = value
        return arguments

    def __repr__(self) -> str:
        kind = type(self).__mro__[1].__name__
        return f"{kind}({type(self).database.name!r}, context={self._runtime.context.run_id})"


class SqlTool(_DatabaseTool):
    """Reads of one configured database, registered as ``sql.NAME`` (``EXTERNAL_RESOURCE``).

    Typed door::

        db = tools.get("sql.analytics")
        db.query("SELECT id, total FROM orders WHERE total > :min", {"min": 100}).purpose("...").execute()

    By name: ``gateway.invoke("sql.analytics.query", {"sql": ..., "params": {...}, "purpose": ...}, ctx)``.

    ``query`` raises `SqlDeniedError` when the statement is refused (see
    `toolbox_sql.REASON_CODES`) and `toolbox.errors.InvalidArgumentsError` when
    ``params`` do not match its placeholders, both before anything is sent.
    Executing returns a `SqlResult`, or raises `SqlTimeoutError`,
    `SqlExecutionError` or `toolbox.errors.ToolConnectionError`.
    """

    __slots__ = ()

    #: The schema of the database, read once (set on each per-database subclass).
    schemas: ClassVar[SchemaCache]

    def query(self, sql: str, params: dict[str, Scalar] | None = None) -> ReadIntent[SqlResult]:
        """Intent to run one read-only ``SELECT`` (or ``EXPLAIN`` of one) with ``params`` bound.

        Raises:
            SqlDeniedError: the statement is refused; it never reaches the database.
            InvalidArgumentsError: ``params`` do not match the statement's ``:name`` placeholders.
        """
        database = type(self).database
        plan = self._plan(database.planner.query, sql)
        values = _parameters(plan, params)
        context = self._runtime.context
        arguments = self._arguments(plan, values)
        return self._runtime.read_intent(
            "query",
            lambda: run_query(database, plan, values, context),
            target=f"{database.read_tool}:{plan.kind} {','.join(plan.tables)}".rstrip(),
            arguments=arguments,
        )

    def schema(self) -> ReadIntent[SqlSchema]:
        """Intent to describe the tables, columns and functions queries may use."""
        cache = type(self).schemas
        return self._runtime.read_intent(
            "schema", cache.get, target=f"{type(self).database.read_tool}:schema", arguments={}
        )


class SqlWriteTool(_DatabaseTool):
    """Writes to one configured database, registered as ``sql_write.NAME``.

    ``PRIVILEGED``: it needs an explicit policy allow and the acknowledgement
    ``TOOLBOX_SQL_<NAME>_WRITE_ACK=allow-sql-writes``; each statement needs a
    human approval bound to its normalised SQL and parameters unless the
    profile says ``requires_approval = false``.
    """

    __slots__ = ()

    def execute(self, sql: str, params: dict[str, Scalar] | None = None) -> WriteIntent[SqlResult]:
        """Intent to run one ``INSERT``, ``UPDATE`` or ``DELETE`` (or allowed DDL) in its own transaction.

        Raises:
            SqlDeniedError: the statement is refused; it never reaches the database.
            InvalidArgumentsError: ``params`` do not match the statement's ``:name`` placeholders.
        """
        database = type(self).database
        plan = self._plan(database.planner.write, sql)
        values = _parameters(plan, params)
        context = self._runtime.context
        arguments = self._arguments(plan, values)
        arguments["statement"] = plan.statement  # what an approver reads, over several lines
        return self._runtime.write_intent(
            "execute",
            lambda: run_write(database, plan, values, context),
            target=f"{database.write_tool}:{plan.kind} {','.join(plan.tables)}",
            arguments=arguments,
        )


def _parameters(plan: Plan, params: object) -> dict[str, Scalar]:
    """``params`` checked against the plan's placeholders: the same names, scalar values."""
    given: object = {} if params is None else params
    if not isinstance(given, Mapping):
        raise _invalid("params must be an object of :name values", "type", "params")
    if len(given) > _MAX_PARAMETERS:
        raise _invalid(f"at most {_MAX_PARAMETERS} parameters", "too_many", "params")
    values: dict[str, Scalar] = {}
    for name, value in given.items():
        if not isinstance(name, str) or not PARAMETER_NAME.match(name):
            raise _invalid("parameter names are identifiers (letters, digits, _)", "name", "params")
        if name not in plan.parameters:
            raise _invalid(f"the statement has no placeholder :{name}", "unused", f"params.{name}")
        if not isinstance(value, (str, int, float, bool)) and value is not None:
            raise _invalid("a parameter is text, a number, a boolean or null", "type", f"params.{name}")
        if isinstance(value, float) and not math.isfinite(value):
            raise _invalid("a number must be finite", "finite", f"params.{name}")
        if isinstance(value, str) and len(value) > _MAX_TEXT:
            raise _invalid(
                f"a text parameter has at most {_MAX_TEXT} characters", "too_long", f"params.{name}"
            )
        values[name] = value
    missing = sorted(plan.parameters - values.keys())
    if missing:
        raise _invalid(f"no value for the placeholder :{missing[0]}", "missing", f"params.{missing[0]}")
    return values


def _invalid(message: str, code: str, field: str) -> InvalidArgumentsError:
    return InvalidArgumentsError(message, error_code=code, field_path=field)


def tool_types_for(database: Database) -> tuple[type[SqlTool], type[SqlWriteTool]]:
    """The subclasses of `SqlTool` and `SqlWriteTool` for ``database`` (tool types are unique per tool)."""
    stem = "".join(part.capitalize() for part in database.name.split("_"))
    reads = type(
        f"SqlTool_{stem}",
        (SqlTool,),
        {"__slots__": (), "database": database, "schemas": SchemaCache(database), "__module__": __name__},
    )
    writes = type(
        f"SqlWriteTool_{stem}",
        (SqlWriteTool,),
        {"__slots__": (), "database": database, "__module__": __name__},
    )
    return reads, writes


def sql_tool(tools: Tools, database: str) -> SqlTool:
    """``tools.get("sql.<database>")``, typed: the same gates (policy, ...), the same errors.

    Raises:
        TypeError: the tool of that name is not a toolbox-sql reader.
    """
    found = tools.get(f"sql.{database}")
    if not isinstance(found, SqlTool):
        raise TypeError(f"sql.{database} is not a toolbox-sql tool")
    return found


def sql_write_tool(tools: Tools, database: str) -> SqlWriteTool:
    """``tools.get("sql_write.<database>")``, typed (see `sql_tool`).

    Raises:
        TypeError: the tool of that name is not a toolbox-sql writer.
    """
    found = tools.get(f"sql_write.{database}")
    if not isinstance(found, SqlWriteTool):
        raise TypeError(f"sql_write.{database} is not a toolbox-sql tool")
    return found
