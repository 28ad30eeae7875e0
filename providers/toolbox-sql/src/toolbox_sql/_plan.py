"""`Planner`: SQL text to a checked, runnable `Plan`, or a refusal; decided once per text.

The checks run in an order that gives the clearest reason: parse (one
statement), statement kind, constructs and functions, tables, columns. A
plan (or a refusal) is kept per operation and text in a bounded cache, so a
statement sent again costs a lookup: parsing and checking take a millisecond
or more, a governed query of one row a fraction of that.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Final, final

from sqlglot import exp

from toolbox_sql._config import DatabaseConfig
from toolbox_sql._errors import SqlDeniedError
from toolbox_sql._parse import Parsed, parse_statement
from toolbox_sql._render import called_names, display, executable
from toolbox_sql._rules import Functions, Mode, check_nodes, shown
from toolbox_sql._scope import qualified_query
from toolbox_sql._tenant import TENANT_PARAMETER, filter_reads
from toolbox_sql._writes import CheckedWrite, check_ddl, check_write

__all__ = ["Plan", "Planner"]

_CACHED: Final = 1024
_QUERIES: Final = (exp.Select, exp.Union, exp.Intersect, exp.Except)
_WRITES: Final = (exp.Insert, exp.Update, exp.Delete)
_DDL: Final = (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable)


@final
@dataclass(frozen=True, slots=True)
class Plan:
    """A checked statement: what governance sees and binds, and what the driver runs."""

    kind: str
    """``SELECT``, ``EXPLAIN``, ``INSERT``, ``UPDATE``, ``DELETE`` or the DDL's kind."""
    sql: str
    """The normalised statement on one line (comments removed, ``:name`` placeholders)."""
    statement: str
    """The same, formatted over several lines for people (approvers)."""
    tables: tuple[str, ...]
    """The tables it reads or writes, sorted."""
    parameters: frozenset[str]
    """The ``:name`` placeholders the caller binds."""
    text: str
    """What the driver runs (its own placeholder style)."""
    tenant: bool
    """Whether it binds the tenant from the context."""
    calls: frozenset[str]
    """Names it calls as functions (SQLite's authorizer allows these only)."""
    reviewed: str = field(init=False)
    """What an approval binds and shows and the audit trail records as ``sql``: a line naming the
    kind and tables, then the formatted normalised statement (made once: it is bound on every call)."""

    def __post_init__(self) -> None:
        reviewed = f"-- {self.kind} {', '.join(self.tables) or '(no table)'}\n{self.statement}"
        object.__setattr__(self, "reviewed", reviewed)


_Refusal = tuple[str, str, str]  # message, reason code, rule


@final
class Planner:
    """Plans of one database's statements, for its ``query`` and ``execute`` tools."""

    __slots__ = ("_cache", "_dialect", "_functions", "_lock", "_profile", "_schema", "_tools")

    def __init__(self, profile: DatabaseConfig, dialect: str, *, read_tool: str, write_tool: str) -> None:
        self._profile = profile
        self._dialect = dialect
        self._schema = profile.schema_name or ("main" if dialect == "sqlite" else "public")
        self._functions = Functions.of(profile.functions, dialect)
        self._tools = {Mode.QUERY: read_tool, Mode.WRITE: write_tool}
        self._cache: dict[tuple[str, str], Plan | _Refusal] = {}
        self._lock = threading.Lock()

    @property
    def dialect(self) -> str:
        """sqlglot's name of the database's dialect (``postgres`` or ``sqlite``)."""
        return self._dialect

    def query(self, sql: str) -> Plan:
        """The plan of a read.

        Raises:
            SqlDeniedError: the statement is refused (see `toolbox_sql.REASON_CODES`).
        """
        return self._plan(Mode.QUERY, sql)

    def write(self, sql: str) -> Plan:
        """The plan of a write (or, with ``ddl = true``, DDL).

        Raises:
            SqlDeniedError: the statement is refused.
        """
        return self._plan(Mode.WRITE, sql)

    def _plan(self, mode: str, sql: str) -> Plan:
        key = (mode, sql)
        found = self._cache.get(key)  # a dict read needs no lock; the oldest plan is dropped first
        if found is None:
            try:
                found = self._make(mode, sql)
            except SqlDeniedError as exc:
                found = (str(exc), exc.reason_code, exc.rule)
            with self._lock:
                self._cache[key] = found
                if len(self._cache) > _CACHED:
                    del self._cache[next(iter(self._cache))]
        if isinstance(found, Plan):
            return found
        message, reason, rule = found
        raise SqlDeniedError(message, tool=self._tools[mode], reason_code=reason, rule=rule)

    def _make(self, mode: str, sql: str) -> Plan:
        tool = self._tools[mode]
        if not isinstance(sql, str):
            raise SqlDeniedError(
                "the statement must be text", tool=tool, reason_code="SQL_UNPARSABLE", rule="sql:parse"
            )
        parsed = parse_statement(sql, self._dialect, tool=tool, max_length=self._profile.max_sql_length)
        original = parsed.statement.copy()
        if mode == Mode.QUERY:
            return self._query(parsed, original, tool)
        return self._write(parsed, original, tool)

    def _query(self, parsed: Parsed, original: exp.Expr, tool: str) -> Plan:
        statement = parsed.statement
        if not isinstance(statement, _QUERIES):
            raise _kind(
                statement,
                "query runs SELECT (or EXPLAIN of a SELECT); use execute for writes",
                self._dialect,
                tool,
            )
        check_nodes(statement, Mode.QUERY, self._functions, self._dialect, tool)
        done, refs = qualified_query(statement, self._profile, self._dialect, tool)
        tenant = filter_reads(refs, self._schema)
        if not parsed.explain:
            _cap(done, self._profile.max_rows + 1)
        text, names = executable(done, self._dialect, tool)
        if parsed.explain:
            text = " ".join((*parsed.explain, text))
        kind = "EXPLAIN" if parsed.explain else "SELECT"
        tables = tuple(sorted({ref.name for ref in refs}))
        return self._finish(kind, original, parsed, tables, text, names, tenant, done)

    def _write(self, parsed: Parsed, original: exp.Expr, tool: str) -> Plan:
        statement = parsed.statement
        writes = self._profile.writes
        if parsed.explain:
            raise _kind(statement, "execute does not run EXPLAIN; use query", self._dialect, tool)
        checked: CheckedWrite
        if isinstance(statement, _WRITES):
            check_nodes(statement, Mode.WRITE, self._functions, self._dialect, tool)
            checked = check_write(statement, self._profile, self._schema, self._dialect, tool)
        elif isinstance(statement, _DDL) and writes is not None and writes.ddl:
            check_nodes(statement, Mode.DDL, self._functions, self._dialect, tool)
            checked = check_ddl(statement, self._profile, self._schema, self._dialect, tool)
        else:
            what = "INSERT, UPDATE or DELETE" + (" (and DDL)" if writes is not None and writes.ddl else "")
            raise _kind(statement, f"execute runs {what}; use query for reads", self._dialect, tool)
        text, names = executable(statement, self._dialect, tool)
        return self._finish(
            checked.kind, original, parsed, checked.tables, text, names, checked.tenant, statement
        )

    def _finish(  # noqa: PLR0917 - the parts of a plan, in order
        self,
        kind: str,
        original: exp.Expr,
        parsed: Parsed,
        tables: tuple[str, ...],
        text: str,
        names: tuple[str, ...],
        tenant: bool,
        done: exp.Expr,
    ) -> Plan:
        prefix = " ".join(parsed.explain)
        one_line = display(original, self._dialect, pretty=False)
        pretty = display(original, self._dialect, pretty=True)
        calls: frozenset[str] = frozenset()
        if self._dialect == "sqlite":
            calls = called_names(text, self._dialect)
            if any(isinstance(n, exp.Like) for n in done.walk()):
                calls |= {"like"}  # SQLite runs LIKE as the function like()
        return Plan(
            kind=kind,
            sql=f"{prefix} {one_line}" if prefix else one_line,
            statement=f"{prefix}\n{pretty}" if prefix else pretty,
            tables=tables,
            parameters=frozenset(n for n in names if n != TENANT_PARAMETER),
            text=text,
            tenant=tenant or TENANT_PARAMETER in names,
            calls=calls,
        )


def _kind(statement: exp.Expr, hint: str, dialect: str, tool: str) -> SqlDeniedError:
    name = statement.key.upper()
    if isinstance(statement, exp.Command):
        name = str(statement.this).upper()[:20]
    return SqlDeniedError(
        f"{name} is not allowed here ({hint}): {shown(statement, dialect)}",
        tool=tool,
        reason_code="SQL_STATEMENT_NOT_ALLOWED",
        rule="sql:statement",
    )


def _cap(statement: exp.Expr, rows: int) -> None:
    """Ask the database for at most ``rows`` rows (the fetch stops there anyway)."""
    limit = statement.args.get("limit")
    if limit is None:
        statement.set("limit", exp.Limit(expression=exp.Literal.number(rows)))
        return
    value = limit.args.get("expression")
    if isinstance(value, exp.Literal) and value.is_int and int(value.this) > rows:
        limit.set("expression", exp.Literal.number(rows))
