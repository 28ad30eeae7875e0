"""Which tables and columns a query reads: every reference resolved, then checked against the profile.

sqlglot's ``qualify`` resolves each column to the table it comes from, with
the profile's allowlist as the only schema it knows: a column outside the
allowlist cannot be resolved and is refused, ``SELECT *`` expands to the
allowed columns only, and every table is qualified with the profile's schema
(a ``search_path`` or a temporary table of the same name cannot redirect it).
The qualified statement is what runs, so the database resolves nothing the
check did not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from toolbox_sql._config import DatabaseConfig, TableConfig
from toolbox_sql._errors import SqlDeniedError
from toolbox_sql._rules import shown

__all__ = ["TableRef", "check_tables", "qualified_query"]

_TEXT: Final = "TEXT"


@final
@dataclass(frozen=True, slots=True)
class TableRef:
    """A reference to a real table of the profile, as the statement names it."""

    node: exp.Table
    name: str
    config: TableConfig


def _default_schema(dialect: str, profile: DatabaseConfig) -> str:
    return profile.schema_name or ("main" if dialect == "sqlite" else "public")


def _scopes(statement: exp.Expr, dialect: str, tool: str) -> list[Scope]:
    try:
        return list(traverse_scope(statement))
    except (OptimizeError, SqlglotError, RecursionError) as exc:
        raise SqlDeniedError(
            f"the statement's tables cannot be resolved ({type(exc).__name__}): {shown(statement, dialect)}",
            tool=tool,
            reason_code="SQL_UNPARSABLE",
            rule="sql:scope",
        ) from None


def check_tables(statement: exp.Expr, profile: DatabaseConfig, dialect: str, tool: str) -> list[TableRef]:
    """Every real table ``statement`` reads, each one checked: in the profile, in its schema.

    A table node the scopes account for neither as a table nor as a reference
    to a ``WITH`` query is refused: the check does not guess.

    Raises:
        SqlDeniedError: ``SQL_TABLE_NOT_ALLOWED``, or ``SQL_UNPARSABLE`` for an unresolvable scope.
    """
    schema = _default_schema(dialect, profile)
    found: list[TableRef] = []
    accounted: set[int] = set()
    for scope in _scopes(statement, dialect, tool):
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                found.append(_ref(source, profile, schema, dialect, tool))
                accounted.add(id(source))
        accounted.update(id(t) for t in scope.tables if t.name in scope.cte_sources)
    for node in statement.find_all(exp.Table):
        if id(node) not in accounted and not _is_write_target(node):
            raise SqlDeniedError(
                f"table reference {shown(node, dialect)} cannot be classified",
                tool=tool,
                reason_code="SQL_TABLE_NOT_ALLOWED",
                rule="sql:table",
            )
    return found


def _is_write_target(node: exp.Table) -> bool:
    """The table an INSERT, UPDATE or DELETE writes (checked by the write rules, not as a read)."""
    parent = node.parent
    if isinstance(parent, exp.Schema):
        parent = parent.parent
    return isinstance(parent, (exp.Insert, exp.Update, exp.Delete)) and parent.this in (node, node.parent)


def _ref(node: exp.Table, profile: DatabaseConfig, schema: str, dialect: str, tool: str) -> TableRef:
    name = node.name
    config = profile.tables.get(name) if isinstance(node.this, exp.Identifier) else None
    if config is None or node.args.get("catalog") is not None or node.db not in ("", schema):
        where = "" if config is None else f" outside schema {schema!r}"
        raise SqlDeniedError(
            f"table {shown(node, dialect, 60)}{where} is not in the profile; the tables are "
            f"{', '.join(sorted(profile.tables))}",
            tool=tool,
            reason_code="SQL_TABLE_NOT_ALLOWED",
            rule="sql:table",
        )
    return TableRef(node, name, config)


def qualified_query(
    statement: exp.Expr, profile: DatabaseConfig, dialect: str, tool: str
) -> tuple[exp.Expr, list[TableRef]]:
    """``statement`` with every column resolved to its table and every table to the profile's schema.

    Returns the qualified statement (what runs) and its real tables.

    Raises:
        SqlDeniedError: a table or column outside the profile.
    """
    check_tables(statement, profile, dialect, tool)  # clear refusals before qualify's own errors
    schema = _default_schema(dialect, profile)
    mapping = MappingSchema(
        {name: dict.fromkeys(table.columns, _TEXT) for name, table in profile.tables.items()},
        dialect=dialect,
    )
    try:
        done = qualify(
            statement.copy(),
            schema=mapping,
            dialect=dialect,
            db=schema,
            validate_qualify_columns=True,
            quote_identifiers=True,
            identify=True,
        )
    except OptimizeError as exc:
        raise SqlDeniedError(
            f"a column is not in the profile ({_first_line(exc)}); the columns are listed by schema()",
            tool=tool,
            reason_code="SQL_COLUMN_NOT_ALLOWED",
            rule="sql:column",
        ) from None
    except (SqlglotError, RecursionError) as exc:
        raise SqlDeniedError(
            f"the statement cannot be resolved ({type(exc).__name__})",
            tool=tool,
            reason_code="SQL_UNPARSABLE",
            rule="sql:scope",
        ) from None
    tables = check_tables(done, profile, dialect, tool)
    _check_columns(done, profile, dialect, tool)
    return done, tables


def _check_columns(statement: exp.Expr, profile: DatabaseConfig, dialect: str, tool: str) -> None:
    """Every column of every scope: a column of an allowed table, of a WITH or derived query, or an alias."""
    for scope in _scopes(statement, dialect, tool):
        for column in scope.columns:
            table = column.table
            if not table:
                named = getattr(scope.expression, "named_selects", ())
                if column.name in named:
                    continue
                raise _column(column, dialect, tool)
            source = _source(scope, table)
            if isinstance(source, exp.Table):
                config = profile.tables.get(source.name)
                if config is None or column.name not in config.columns:
                    raise _column(column, dialect, tool)
            elif source is None:
                raise _column(column, dialect, tool)


def _source(scope: Scope | None, name: str) -> exp.Table | Scope | None:
    while scope is not None:
        found = scope.sources.get(name)
        if found is not None:
            return found
        scope = scope.parent
    return None


def _column(column: exp.Column, dialect: str, tool: str) -> SqlDeniedError:
    return SqlDeniedError(
        f"column {shown(column, dialect, 80)} is not in the profile",
        tool=tool,
        reason_code="SQL_COLUMN_NOT_ALLOWED",
        rule="sql:column",
    )


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:160] if str(error) else type(error).__name__
