"""The tenant row filter: rows of a tenant's table are only ever those of the caller's tenant.

The value is bound from the trusted `toolbox.ExecutionContext`, as the
parameter `TENANT_PARAMETER`, which the model cannot name (``toolbox_`` is
reserved). Reads replace every reference to a filtered table, wherever it
appears (``FROM``, ``JOIN``, a subquery, each arm of a ``UNION``), by a
derived table that selects the allowed columns of the tenant's rows only,
under the same alias; so no ``OR 1=1`` or ``UNION`` in the model's statement
can reach another tenant's row. Writes add the condition to ``WHERE`` and
the tenant's value to every inserted row.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from toolbox_sql._config import TableConfig
from toolbox_sql._errors import SqlDeniedError
from toolbox_sql._scope import TableRef

__all__ = ["TENANT_PARAMETER", "filter_reads", "filter_write", "qualify_table"]

TENANT_PARAMETER: Final = "toolbox_tenant"


def _tenant_value() -> exp.Placeholder:
    return exp.Placeholder(this=TENANT_PARAMETER)


def _is(column: str) -> exp.EQ:
    return exp.EQ(this=exp.column(column, quoted=True), expression=_tenant_value())


def qualify_table(node: exp.Table, schema: str) -> None:
    """Name ``node``'s schema explicitly (quoted), as the checks resolved it."""
    node.set("this", exp.to_identifier(node.name, quoted=True))
    node.set("db", exp.to_identifier(schema, quoted=True))


def filter_reads(refs: list[TableRef], schema: str, *, wrap_all: bool = False) -> bool:
    """Replace each reference to a filtered table by its tenant's rows; True when any was.

    With ``wrap_all``, every other table too is replaced by its allowed columns
    (a write runs as written, so an unqualified column in its subquery can then
    only find an allowed one, as the check did).
    """
    filtered = False
    for ref in refs:
        column = ref.config.tenant_column
        if column is None and not wrap_all:
            qualify_table(ref.node, schema)
            continue
        alias = ref.node.args.get("alias")
        name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else ref.name
        source = exp.Table(
            this=exp.to_identifier(ref.name, quoted=True), db=exp.to_identifier(schema, quoted=True)
        )
        rows = exp.select(*(exp.column(c, quoted=True) for c in ref.config.columns)).from_(source)
        if column is not None:
            rows = rows.where(_is(column))
            filtered = True
        ref.node.replace(
            exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        )
    return filtered


def filter_write(statement: exp.Expr, target: TableConfig, *, tool: str) -> bool:
    """Confine a write to the caller's tenant's rows; True when the target is filtered.

    Raises:
        SqlDeniedError: an ``INSERT ... SELECT`` whose query is not a plain ``SELECT``.
    """
    column = target.tenant_column
    if column is None:
        return False
    if isinstance(statement, (exp.Update, exp.Delete)):
        where = statement.args.get("where")
        condition: exp.Expr = _is(column)
        if isinstance(where, exp.Where):
            condition = exp.And(this=exp.Paren(this=where.this), expression=condition)
        statement.set("where", exp.Where(this=condition))
        return True
    assert isinstance(statement, exp.Insert)
    columns = statement.this
    assert isinstance(columns, exp.Schema)
    columns.append("expressions", exp.to_identifier(column, quoted=True))
    source = statement.expression
    if isinstance(source, exp.Values):
        for row in source.expressions:
            row.append("expressions", _tenant_value())
    elif isinstance(source, exp.Select):
        source.select(_tenant_value(), copy=False)
    else:
        raise SqlDeniedError(
            "INSERT into a tenant's table takes VALUES or one plain SELECT",
            tool=tool,
            reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
            rule="sql:construct:insert",
        )
    return True
