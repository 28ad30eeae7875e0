"""What ``execute`` may change: the table, the columns, the rows, checked on the parsed statement.

An ``INSERT``, ``UPDATE`` or ``DELETE`` writes one table of the profile that
allows that kind of write, sets only its writable columns (never the tenant
column, which toolbox fills), and, unless the profile allows it, an
``UPDATE`` or ``DELETE`` has a ``WHERE``. Everything the statement reads (the
values it sets, its ``WHERE``, ``RETURNING`` and the query of an ``INSERT
... SELECT``) is checked as a query would be, by checking the ``SELECT``
that reads the same: tables, columns and functions of the profile only.

DDL is refused unless the profile sets ``ddl = true``; then it may name only
tables that allow writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from sqlglot import exp

from toolbox_sql._config import DatabaseConfig, TableConfig
from toolbox_sql._errors import SqlDeniedError
from toolbox_sql._rules import shown
from toolbox_sql._scope import check_tables, qualified_query
from toolbox_sql._tenant import filter_reads, filter_write, qualify_table

__all__ = ["CheckedWrite", "check_ddl", "check_write"]

_KINDS: dict[type[exp.Expr], str] = {exp.Insert: "insert", exp.Update: "update", exp.Delete: "delete"}


@final
@dataclass(frozen=True, slots=True)
class CheckedWrite:
    """A write that passed: what it is, the tables it touches, whether it binds the tenant."""

    kind: str
    tables: tuple[str, ...]
    tenant: bool


def check_write(
    statement: exp.Expr, profile: DatabaseConfig, schema: str, dialect: str, tool: str
) -> CheckedWrite:
    """Check an INSERT, UPDATE or DELETE and confine it (tenant, schema), in place.

    Raises:
        SqlDeniedError: the table, a column, an unfiltered write or anything it reads is refused.
    """
    kind = _KINDS[type(statement)]
    table = _target(statement)
    config = _writable(table, kind, profile, schema, dialect=dialect, tool=tool)
    if kind == "insert":
        _check_inserted(statement, config, dialect, tool)
    elif kind == "update":
        _check_set(statement, config, dialect, tool)
    if kind != "insert" and statement.args.get("where") is None and not _unfiltered_allowed(profile):
        raise SqlDeniedError(
            f"{kind.upper()} without WHERE would change every row of {table.name!r}; add a WHERE clause",
            tool=tool,
            reason_code="SQL_UNFILTERED_WRITE",
            rule="sql:where",
        )
    _refuse_stars(statement, dialect, tool)
    read: set[str] = set()
    for shadow in _reads(statement, table):
        _, refs = qualified_query(shadow, profile, dialect, tool)
        read.update(ref.name for ref in refs)
    # The statement that runs: its reads filtered and qualified like a query's, then its target.
    reads_tenant = filter_reads(check_tables(statement, profile, dialect, tool), schema, wrap_all=True)
    qualify_table(table, schema)
    tenant = filter_write(statement, config, tool=tool)
    return CheckedWrite(kind.upper(), tuple(sorted({table.name, *read})), tenant or reads_tenant)


def _unfiltered_allowed(profile: DatabaseConfig) -> bool:
    return profile.writes is not None and profile.writes.allow_unfiltered


def _target(statement: exp.Expr) -> exp.Table:
    target = statement.this
    if isinstance(target, exp.Schema):
        target = target.this
    if not isinstance(target, exp.Table):  # pragma: no cover - the node allowlist has no other shape
        raise TypeError("a write without a table")
    return target


def _writable(
    table: exp.Table, kind: str, profile: DatabaseConfig, schema: str, *, dialect: str, tool: str
) -> TableConfig:
    if table.args.get("alias") is not None:
        raise SqlDeniedError(
            f"{kind.upper()} names its table without an alias: {shown(table, dialect, 60)}",
            tool=tool,
            reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
            rule="sql:construct:alias",
        )
    config = profile.tables.get(table.name) if isinstance(table.this, exp.Identifier) else None
    if (
        config is None
        or kind not in config.write
        or table.args.get("catalog") is not None
        or table.db not in ("", schema)
    ):
        allowed = sorted(name for name, t in profile.tables.items() if kind in t.write)
        raise SqlDeniedError(
            f"{kind.upper()} on {shown(table, dialect, 60)} is not allowed; the profile allows it on "
            f"{', '.join(allowed) or 'no table'}",
            tool=tool,
            reason_code="SQL_TABLE_NOT_ALLOWED",
            rule="sql:table",
        )
    return config


def _written(column: str, config: TableConfig, node: exp.Expr, dialect: str, tool: str) -> None:
    if column == config.tenant_column:
        raise SqlDeniedError(
            f"the tenant column is set by toolbox from the trusted context, not by the statement: "
            f"{shown(node, dialect)}",
            tool=tool,
            reason_code="SQL_TENANT_COLUMN",
            rule="sql:tenant",
        )
    if column not in config.written:
        raise SqlDeniedError(
            f"column {column[:60]!r} may not be written; writable: {', '.join(sorted(config.written))}",
            tool=tool,
            reason_code="SQL_COLUMN_NOT_ALLOWED",
            rule="sql:column",
        )


def _check_inserted(statement: exp.Expr, config: TableConfig, dialect: str, tool: str) -> None:
    columns = statement.this
    if not isinstance(columns, exp.Schema) or not columns.expressions:
        raise SqlDeniedError(
            "INSERT must name its columns: INSERT INTO t (a, b) VALUES (...)",
            tool=tool,
            reason_code="SQL_COLUMN_NOT_ALLOWED",
            rule="sql:column",
        )
    names = [c.name for c in columns.expressions]
    for column in columns.expressions:
        _written(column.name, config, column, dialect, tool)
    if len(set(names)) != len(names):
        raise SqlDeniedError(
            "INSERT names a column twice", tool=tool, reason_code="SQL_COLUMN_NOT_ALLOWED", rule="sql:column"
        )


def _check_set(statement: exp.Expr, config: TableConfig, dialect: str, tool: str) -> None:
    for assignment in statement.expressions:
        column = assignment.this if isinstance(assignment, exp.EQ) else None
        if not isinstance(column, exp.Column) or column.table not in ("", _target(statement).name):
            raise SqlDeniedError(
                f"SET takes column = value: {shown(assignment, dialect)}",
                tool=tool,
                reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
                rule="sql:construct:update",
            )
        _written(column.name, config, assignment, dialect, tool)


def _refuse_stars(statement: exp.Expr, dialect: str, tool: str) -> None:
    # A * in a write would read or write the table's real columns, not the profile's.
    for star in statement.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):
            raise SqlDeniedError(
                f"a write must name its columns, not *: {shown(star.parent or star, dialect)}",
                tool=tool,
                reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
                rule="sql:construct:star",
            )


def _reads(statement: exp.Expr, table: exp.Table) -> list[exp.Expr]:
    """SELECTs that read what ``statement`` reads, for the query checks (copies; never run)."""
    source = exp.Table(this=table.this.copy(), db=table.args["db"].copy() if table.args.get("db") else None)
    returning = statement.args.get("returning")
    shown_back = [e.copy() for e in returning.expressions] if isinstance(returning, exp.Returning) else []
    where = statement.args.get("where")
    selects: list[exp.Expr] = []
    if isinstance(statement, exp.Insert):
        inserted = statement.expression
        if isinstance(inserted, exp.Values):
            selects += [exp.select(*(v.copy() for v in row.expressions)) for row in inserted.expressions]
        elif inserted is not None:
            selects.append(inserted.copy())
        if shown_back:
            selects.append(exp.select(*shown_back).from_(source))
        return selects
    values = [a.expression.copy() for a in statement.expressions] if isinstance(statement, exp.Update) else []
    select = exp.select(*(values + shown_back or [exp.Literal.number(1)])).from_(source)
    if isinstance(where, exp.Where):
        select = select.where(where.this.copy())
    return [select]


def check_ddl(
    statement: exp.Expr, profile: DatabaseConfig, schema: str, dialect: str, tool: str
) -> CheckedWrite:
    """Check DDL (the profile has ``ddl = true``): every table it names allows writes.

    Raises:
        SqlDeniedError: a kind of DDL or a table the profile does not allow.
    """
    kind = statement.args.get("kind")
    if isinstance(statement, exp.Create) and kind in ("TABLE", "INDEX"):
        label = f"CREATE {kind}"
    elif isinstance(statement, exp.Drop) and kind == "TABLE":
        label = "DROP TABLE"
    elif isinstance(statement, exp.Alter) and kind == "TABLE":
        label = "ALTER TABLE"
    elif isinstance(statement, exp.TruncateTable):
        label = "TRUNCATE"
    else:
        raise SqlDeniedError(
            f"{statement.key.upper()} {kind or ''} is not DDL a profile allows: {shown(statement, dialect)}",
            tool=tool,
            reason_code="SQL_STATEMENT_NOT_ALLOWED",
            rule="sql:statement",
        )
    names: set[str] = set()
    for table in statement.find_all(exp.Table):
        config = profile.tables.get(table.name) if isinstance(table.this, exp.Identifier) else None
        if config is None or not config.write or table.db not in ("", schema) or table.args.get("catalog"):
            raise SqlDeniedError(
                f"{label} on {shown(table, dialect, 60)} is not allowed: only tables that allow writes",
                tool=tool,
                reason_code="SQL_TABLE_NOT_ALLOWED",
                rule="sql:table",
            )
        if not (dialect == "sqlite" and isinstance(table.parent, exp.Index)):
            qualify_table(table, schema)  # SQLite names an index's schema on the index, not its table
        names.add(table.name)
    return CheckedWrite(label, tuple(sorted(names)), False)
