"""From a checked statement back to text: what the driver runs, and what people read.

The driver runs the statement regenerated from the checked tree, never the
model's text: comments are gone, every identifier is quoted, and nothing the
parser skipped or read differently from the database can reach it. A
construct the dialect's generator cannot write faithfully raises instead of
being dropped (``unsupported_level=RAISE``).

Placeholders become the driver's own: ``%(name)s`` for psycopg, whose query
parser reads every other ``%`` as an escape (so each is doubled), and
``:name`` for sqlite3, which reads the text with SQLite's own tokenizer. They
are written as NUL-delimited markers first; the text holds no other NUL (the
parser refused it), so replacing the markers cannot touch a literal.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Final

from sqlglot import TokenType, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, SqlglotError

from toolbox_sql._errors import SqlDeniedError

__all__ = ["called_names", "display", "executable"]

_MARK: Final = "\x00"


def executable(statement: exp.Expr, dialect: str, tool: str) -> tuple[str, tuple[str, ...]]:
    """The driver's text of ``statement`` and the names of its placeholders, in order.

    Raises:
        SqlDeniedError: ``SQL_CONSTRUCT_NOT_ALLOWED`` when the generator cannot write it faithfully.
    """
    names: list[str] = []

    def marker(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            names.append(str(node.this))
            return exp.Var(this=f"{_MARK}{len(names) - 1}{_MARK}")
        return node

    try:
        text = statement.transform(marker).sql(
            dialect=dialect, identify=True, comments=False, unsupported_level=ErrorLevel.RAISE
        )
    except (SqlglotError, RecursionError, ValueError) as exc:
        raise SqlDeniedError(
            f"the statement cannot be written back faithfully for this database ({type(exc).__name__})",
            tool=tool,
            reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
            rule="sql:generate",
        ) from None
    if text.count(_MARK) != 2 * len(names):  # pragma: no cover - the parser refuses NUL in the text
        raise SqlDeniedError(
            "the statement holds a NUL character", tool=tool, reason_code="SQL_UNPARSABLE", rule="sql:parse"
        )
    if dialect == "postgres":
        text = text.replace("%", "%%")
        style = "%({})s"
    else:
        style = ":{}"
    for index, name in enumerate(names):
        text = text.replace(f"{_MARK}{index}{_MARK}", style.format(name), 1)
    return text, tuple(names)


def display(statement: exp.Expr, dialect: str, *, pretty: bool) -> str:
    """``statement`` as people read it: normalised, no comments, placeholders as ``:name``."""

    def named(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            return exp.Var(this=f":{node.this}")
        return node

    return statement.transform(named).sql(dialect=dialect, pretty=pretty, comments=False)


def called_names(text: str, dialect: str) -> frozenset[str]:
    """The lower-cased names called as functions in ``text`` (an unquoted word before ``(``).

    Keywords that take parentheses (``IN``, ``EXISTS``, ``OVER``, ``CAST``) are
    among them; they only widen what SQLite's authorizer is told a statement
    may call, never what the checks allowed.
    """
    tokens = Dialect.get_or_raise(dialect).tokenize(text)
    found: set[str] = set()
    quoted = (TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER)
    for token, after in pairwise(tokens):
        if after.token_type is TokenType.L_PAREN and token.token_type not in quoted:
            found.add(token.text.lower())
    return frozenset(found)
