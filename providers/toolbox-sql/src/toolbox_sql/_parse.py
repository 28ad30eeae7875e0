"""From SQL text to exactly one parsed statement, with sqlglot, in the database's dialect.

Nothing here decides what may run (`toolbox_sql._rules` does); this module
only refuses what cannot be classified: text sqlglot cannot parse, nesting
deeper than `MAX_DEPTH`, no statement or several, and ``EXPLAIN`` with an
option that would run the statement (``ANALYZE``).

sqlglot writes a warning with the statement's text to its logger when it
falls back to an opaque ``Command``; the statement may hold a secret, so
those records are dropped while this module parses.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import Final, final

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError

from toolbox_sql._errors import SqlDeniedError

__all__ = ["MAX_DEPTH", "Parsed", "parse_statement"]

#: Deepest nesting of parentheses a statement may have (sqlglot recurses per level).
MAX_DEPTH: Final = 64

_PARSING: contextvars.ContextVar[bool] = contextvars.ContextVar("toolbox_sql_parsing", default=False)


def _not_while_parsing(record: logging.LogRecord) -> bool:
    return not _PARSING.get()


logging.getLogger("sqlglot").addFilter(_not_while_parsing)

# EXPLAIN options that only describe the plan; everything else (ANALYZE above all) is refused.
_EXPLAIN_WORDS: Final = {"postgres": (("VERBOSE",),), "sqlite": (("QUERY", "PLAN"),)}


@final
@dataclass(frozen=True, slots=True)
class Parsed:
    """One statement, and the ``EXPLAIN`` words before it, if any (``("EXPLAIN", "VERBOSE")``)."""

    statement: exp.Expr
    explain: tuple[str, ...] = ()


def parse_statement(sql: str, dialect: str, *, tool: str, max_length: int) -> Parsed:
    """Parse ``sql`` as exactly one statement of ``dialect`` (``postgres`` or ``sqlite``).

    Raises:
        SqlDeniedError: ``SQL_UNPARSABLE`` or ``SQL_NOT_ONE_STATEMENT``.
    """
    if len(sql) > max_length:
        raise _unparsable(tool, f"the statement has {len(sql)} characters, more than {max_length}")
    if "\x00" in sql:
        raise _unparsable(tool, "the statement contains a NUL character")
    token = _PARSING.set(True)
    try:
        return _parse(sql, Dialect.get_or_raise(dialect), dialect, tool)
    except SqlDeniedError:
        raise
    except ParseError as exc:
        raise _unparsable(tool, _describe(exc)) from None
    except SqlglotError as exc:  # a TokenError: an unterminated string, comment or identifier
        raise _unparsable(tool, type(exc).__name__ + ": the text cannot be split into SQL tokens") from None
    except RecursionError:
        raise _unparsable(tool, "the statement is nested too deeply") from None
    finally:
        _PARSING.reset(token)


def _parse(sql: str, dialect: Dialect, name: str, tool: str) -> Parsed:
    tokens = dialect.tokenize(sql)
    _check_depth(tokens, tool)
    explain: tuple[str, ...] = ()
    if tokens and tokens[0].token_type is TokenType.COMMAND and tokens[0].text.upper() == "EXPLAIN":
        explain, sql = _explain(sql[tokens[0].end + 1 :], dialect, name, tool)
    statements = [
        s for s in sqlglot.parse(sql, dialect=dialect) if s is not None and not isinstance(s, exp.Semicolon)
    ]
    if len(statements) != 1:
        raise SqlDeniedError(
            f"the text holds {len(statements)} statements; send exactly one (no ';' between statements)",
            tool=tool,
            reason_code="SQL_NOT_ONE_STATEMENT",
            rule="sql:statements",
        )
    return Parsed(statements[0], explain)


def _explain(rest: str, dialect: Dialect, name: str, tool: str) -> tuple[tuple[str, ...], str]:
    """The EXPLAIN words and the statement after them, or a refusal (``EXPLAIN ANALYZE`` runs it)."""
    tokens = dialect.tokenize(rest)
    for words in ((), *_EXPLAIN_WORDS.get(name, ())):
        ahead = tokens[len(words)] if len(tokens) > len(words) else None
        said = tuple(t.text.upper() for t in tokens[: len(words)])
        if said == words and ahead is not None and ahead.token_type in (TokenType.SELECT, TokenType.WITH):
            return ("EXPLAIN", *words), rest[ahead.start :]
    shown = " ".join(t.text for t in tokens[:3]).upper() or "nothing"
    raise SqlDeniedError(
        f"EXPLAIN is allowed before a query, with no option but {_explain_options(name)}; got {shown[:60]!r} "
        "(EXPLAIN ANALYZE would run the statement)",
        tool=tool,
        reason_code="SQL_CONSTRUCT_NOT_ALLOWED",
        rule="sql:explain",
    )


def _explain_options(name: str) -> str:
    options = [" ".join(words) for words in _EXPLAIN_WORDS.get(name, ())]
    return " or ".join(options) if options else "none"


def _check_depth(tokens: list[Token], tool: str) -> None:
    depth = 0
    for token in tokens:
        if token.token_type is TokenType.L_PAREN:
            depth += 1
            if depth > MAX_DEPTH:
                raise _unparsable(tool, f"the statement nests parentheses deeper than {MAX_DEPTH}")
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1


def _describe(error: ParseError) -> str:
    """Where and why parsing failed, without echoing the text."""
    first = error.errors[0] if error.errors else {}
    description = str(first.get("description", "invalid SQL"))[:200]
    line, column = first.get("line"), first.get("col")
    where = f" at line {line}, column {column}" if line is not None else ""
    return f"the SQL cannot be parsed{where}: {description}"


def _unparsable(tool: str, message: str) -> SqlDeniedError:
    return SqlDeniedError(message, tool=tool, reason_code="SQL_UNPARSABLE", rule="sql:parse")
