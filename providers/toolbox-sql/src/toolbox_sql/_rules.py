"""The constructs a statement may use: an allowlist of parsed node types and, per type, of its parts.

A statement passes only if every node of its tree is of an allowed type and
sets only the parts listed for that type: ``SELECT ... INTO`` is a `Select`
with ``into`` set, ``FOR UPDATE`` one with ``locks``, so both are refused
without a rule of their own. Functions are allowed by name (`Functions`),
casts by target type. What sqlglot cannot classify (a ``Command``, an
unknown node) is refused because it is not listed: fail closed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, final

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from toolbox_sql._errors import SqlDeniedError

__all__ = ["PARAMETER_NAME", "RESERVED_PREFIX", "Functions", "Mode", "check_nodes", "shown"]

#: Names a ``:name`` placeholder may have; ``toolbox_`` names are toolbox's own (the tenant).
PARAMETER_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
RESERVED_PREFIX: Final = "toolbox_"

_ANY: Final = frozenset({"this", "expression", "expressions"})
_BINARY: Final = frozenset({"this", "expression"})

# Every node type a query may hold, with the parts it may set. Parts left out (Select.into,
# Select.locks, Table.sample, Star.except_, Join.method for NATURAL ...) are refusals.
_QUERY: Final[dict[type[exp.Expr], frozenset[str]]] = {
    exp.Select: frozenset(
        {"expressions", "from_", "joins", "where", "group", "having", "order", "limit", "offset"}
        | {"distinct", "with_"}
    ),
    exp.Union: frozenset({"this", "expression", "distinct", "order", "limit", "offset", "with_"}),
    exp.Intersect: frozenset({"this", "expression", "distinct", "order", "limit", "offset", "with_"}),
    exp.Except: frozenset({"this", "expression", "distinct", "order", "limit", "offset", "with_"}),
    exp.From: frozenset({"this"}),
    exp.Join: frozenset({"this", "on", "side", "kind", "using"}),
    exp.Where: frozenset({"this"}),
    exp.Group: frozenset({"expressions"}),
    exp.Having: frozenset({"this"}),
    exp.Order: frozenset({"expressions"}),
    exp.Ordered: frozenset({"this", "desc", "nulls_first"}),
    exp.Limit: frozenset({"expression"}),
    exp.Offset: frozenset({"expression"}),
    exp.Distinct: frozenset({"expressions", "on"}),
    exp.With: frozenset({"expressions", "recursive"}),
    exp.CTE: frozenset({"this", "alias"}),
    exp.Subquery: frozenset({"this", "alias"}),
    exp.Table: frozenset({"this", "db", "alias"}),
    exp.TableAlias: frozenset({"this", "columns"}),
    exp.Alias: frozenset({"this", "alias"}),
    exp.Column: frozenset({"this", "table"}),
    exp.Identifier: frozenset({"this", "quoted"}),
    exp.Star: frozenset(),
    exp.Literal: frozenset({"this", "is_string"}),
    exp.Boolean: frozenset({"this"}),
    exp.Null: frozenset(),
    exp.Placeholder: frozenset({"this"}),
    exp.Paren: frozenset({"this"}),
    exp.Tuple: frozenset({"expressions"}),
    exp.Not: frozenset({"this"}),
    exp.Neg: frozenset({"this"}),
    exp.And: _BINARY,
    exp.Or: _BINARY,
    exp.EQ: _BINARY,
    exp.NEQ: _BINARY,
    exp.GT: _BINARY,
    exp.GTE: _BINARY,
    exp.LT: _BINARY,
    exp.LTE: _BINARY,
    exp.NullSafeEQ: _BINARY,
    exp.NullSafeNEQ: _BINARY,
    exp.Is: frozenset({"this", "expression", "negate"}),
    exp.Like: frozenset({"this", "expression", "negate"}),
    exp.ILike: frozenset({"this", "expression", "negate"}),
    exp.Escape: _BINARY,
    exp.Add: _BINARY,
    exp.Sub: _BINARY,
    exp.Mul: _BINARY,
    exp.Div: frozenset({"this", "expression", "typed", "safe"}),
    exp.IntDiv: _BINARY,
    exp.Mod: _BINARY,
    exp.DPipe: frozenset({"this", "expression", "safe"}),
    exp.In: frozenset({"this", "expressions", "query"}),
    exp.Between: frozenset({"this", "low", "high"}),
    exp.Exists: frozenset({"this"}),
    exp.Case: frozenset({"this", "ifs", "default"}),
    exp.If: frozenset({"this", "true", "false"}),
    exp.Cast: frozenset({"this", "to"}),
    exp.DataType: frozenset({"this", "expressions", "nested"}),
    exp.DataTypeParam: frozenset({"this"}),
    exp.Interval: frozenset({"this", "unit"}),
    exp.Var: frozenset({"this"}),
    exp.Window: frozenset({"this", "partition_by", "order", "spec", "over"}),
    exp.WindowSpec: frozenset({"kind", "start", "start_side", "end", "end_side"}),
    exp.Filter: _BINARY,
}

# What execute adds: the three writes, their column lists, VALUES and RETURNING.
_WRITE: Final[dict[type[exp.Expr], frozenset[str]]] = {
    exp.Insert: frozenset({"this", "expression", "returning"}),
    exp.Update: frozenset({"this", "expressions", "where", "returning"}),
    exp.Delete: frozenset({"this", "where", "returning"}),
    exp.Schema: frozenset({"this", "expressions"}),
    exp.Values: frozenset({"expressions"}),
    exp.Returning: frozenset({"expressions"}),
}

# What a profile with ddl = true adds (no CREATE TABLE ... AS, no CASCADE, no DROP INDEX).
_DDL: Final[dict[type[exp.Expr], frozenset[str]]] = {
    exp.Create: frozenset({"this", "kind", "exists", "unique"}),
    exp.Drop: frozenset({"tables", "kind", "exists"}),
    exp.Alter: frozenset({"this", "kind", "actions"}),
    exp.TruncateTable: frozenset({"expressions"}),
    exp.Schema: frozenset({"this", "expressions"}),
    exp.ColumnDef: frozenset({"this", "kind", "constraints"}),
    exp.ColumnConstraint: frozenset({"this", "kind"}),
    exp.NotNullColumnConstraint: frozenset({"allow_null"}),
    exp.PrimaryKeyColumnConstraint: frozenset({"desc", "include"}),
    exp.UniqueColumnConstraint: frozenset({"include"}),
    exp.DefaultColumnConstraint: frozenset({"this"}),
    exp.IndexParameters: frozenset({"columns", "include"}),
    exp.Index: frozenset({"this", "table", "params", "unique"}),
    exp.RenameColumn: frozenset({"this", "to", "exists"}),
}


@final
class Mode:
    """Which allowlist a statement is checked against."""

    QUERY: Final = "query"
    WRITE: Final = "write"
    DDL: Final = "ddl"


def _allowed(mode: str) -> dict[type[exp.Expr], frozenset[str]]:
    if mode == Mode.QUERY:
        return _QUERY
    if mode == Mode.WRITE:
        return {**_QUERY, **_WRITE}
    return {**_QUERY, **_WRITE, **_DDL}


_TABLES: Final = {mode: _allowed(mode) for mode in (Mode.QUERY, Mode.WRITE, Mode.DDL)}

# Functions that are syntax (CASE, CAST, AND, EXISTS ...): sqlglot models them as functions.
_SYNTAX: Final = frozenset({exp.And, exp.Or, exp.Case, exp.If, exp.Cast, exp.Exists})

# Casts: plain scalar types only. regclass, regproc, oid and user-defined types are refused:
# a cast to them looks up (or reaches) the catalog.
_T = exp.DataType.Type
_TYPES: Final = frozenset(
    {_T.BOOLEAN, _T.SMALLINT, _T.INT, _T.BIGINT, _T.TINYINT, _T.DECIMAL, _T.DOUBLE, _T.FLOAT}
    | {_T.TEXT, _T.VARCHAR, _T.CHAR, _T.NCHAR, _T.NVARCHAR, _T.DATE, _T.TIME, _T.TIMESTAMP}
    | {_T.TIMESTAMPTZ, _T.INTERVAL, _T.UUID, _T.JSON, _T.JSONB, _T.BLOB, _T.VARBINARY}
    | {_T.BIGDECIMAL, _T.UBIGINT, _T.UINT, _T.USMALLINT, _T.UTINYINT}
)

# Argument shapes tried to learn which parsed node a function name becomes in a dialect.
_SHAPES: Final = (
    "{n}()",
    "{n}(x)",
    "{n}(x, y)",
    "{n}(x, y, z)",
    "{n}('month', x)",
    "{n}(year FROM x)",
    "{n}",
)


@final
@dataclass(frozen=True, slots=True)
class Functions:
    """The functions a profile allows: sqlglot's classes for the names, and the names it does not know."""

    classes: frozenset[type[exp.Expr]]
    anonymous: frozenset[str]

    @classmethod
    def of(cls, names: Iterable[str], dialect: str) -> Functions:
        """The functions ``names`` allow in ``dialect`` (each name parsed as a call, in a few shapes)."""
        return _resolve(tuple(sorted(set(names))), dialect)

    def allows(self, node: exp.Func) -> bool:
        """Whether ``node`` calls an allowed function."""
        if isinstance(node, exp.Anonymous):
            return node.name.lower() in self.anonymous
        return type(node) in self.classes


@lru_cache(maxsize=64)
def _resolve(names: tuple[str, ...], dialect: str) -> Functions:
    classes: set[type[exp.Expr]] = set()
    for name in names:
        for shape in _SHAPES:
            try:
                text = f"SELECT {shape.format(n=name)} FROM t"  # noqa: S608 - the profile's own function names
                select = sqlglot.parse_one(text, read=dialect)
            except (SqlglotError, RecursionError):
                continue
            node = select.expressions[0] if isinstance(select, exp.Select) and select.expressions else None
            if not isinstance(node, exp.Func):
                continue
            # The call, and the conversions sqlglot wraps its arguments in (strftime's TsOrDsToTimestamp).
            for part in node.walk():
                if (
                    isinstance(part, exp.Func)
                    and not isinstance(part, exp.Anonymous)
                    and type(part) not in _SYNTAX
                ):
                    classes.add(type(part))
    return Functions(frozenset(classes), frozenset(names))


def shown(node: exp.Expr, dialect: str, limit: int = 120) -> str:
    """``node`` as SQL for a message: one line, at most ``limit`` characters."""
    try:
        text = node.sql(dialect=dialect, comments=False)
    except (SqlglotError, RecursionError, ValueError):
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_nodes(statement: exp.Expr, mode: str, functions: Functions, dialect: str, tool: str) -> None:
    """Refuse ``statement`` unless every node is allowed in ``mode`` (see the module docstring).

    Raises:
        SqlDeniedError: ``SQL_CONSTRUCT_NOT_ALLOWED``, ``SQL_FUNCTION_NOT_ALLOWED`` or
            ``SQL_TYPE_NOT_ALLOWED``, naming the offending node.
    """
    allowed = _TABLES[mode]
    for node in statement.walk():
        kind = type(node)
        if isinstance(node, exp.Func) and kind not in _SYNTAX:
            if not functions.allows(node):
                name = node.name if isinstance(node, exp.Anonymous) else kind.__name__.upper()
                raise SqlDeniedError(
                    f"function {name.lower()[:60]!r} is not in the allowlist: {shown(node, dialect)}",
                    tool=tool,
                    reason_code="SQL_FUNCTION_NOT_ALLOWED",
                    rule="sql:function",
                )
            continue
        parts = allowed.get(kind)
        if parts is None:
            raise _construct(node, f"{kind.__name__} is not allowed", dialect, tool)
        extra = sorted(k for k, v in node.args.items() if k not in parts and v not in (None, False, [], ""))
        if extra:
            raise _construct(node, f"{kind.__name__} with {', '.join(extra)} is not allowed", dialect, tool)
        _check_detail(node, dialect, tool)


def _check_detail(node: exp.Expr, dialect: str, tool: str) -> None:
    """What an allowed node type may still not be: a positional placeholder, a catalog type, ..."""
    if isinstance(node, exp.Placeholder):
        name = node.this
        if not isinstance(name, str) or not PARAMETER_NAME.match(name):
            raise _construct(node, "only named placeholders (:name) are allowed", dialect, tool)
        if name.lower().startswith(RESERVED_PREFIX):
            raise _construct(
                node, f"placeholder names starting with {RESERVED_PREFIX!r} are reserved", dialect, tool
            )
    elif isinstance(node, exp.DataType):
        if node.this not in _TYPES:
            raise SqlDeniedError(
                f"a cast to {shown(node, dialect, 40)} is not allowed",
                tool=tool,
                reason_code="SQL_TYPE_NOT_ALLOWED",
                rule="sql:type",
            )
    elif isinstance(node, exp.Var):
        # A bare word is regenerated as it was written: only as a unit (INTERVAL, EXTRACT, date_trunc).
        if not isinstance(node.parent, (exp.Func, exp.Interval, exp.WindowSpec)):
            raise _construct(node, "a bare word is not allowed here", dialect, tool)
    elif isinstance(node, exp.Join) and node.args.get("kind") not in (None, "", "INNER", "OUTER", "CROSS"):
        raise _construct(node, f"{node.args.get('kind')} JOIN is not allowed", dialect, tool)
    elif isinstance(node, exp.With) and node.args.get("recursive"):
        raise _construct(node, "WITH RECURSIVE is not allowed", dialect, tool)


def _construct(node: exp.Expr, what: str, dialect: str, tool: str) -> SqlDeniedError:
    return SqlDeniedError(
        f"{what}: {shown(node, dialect)}",
        tool=tool,
        reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
        rule=f"sql:construct:{type(node).__name__.lower()}",
    )
