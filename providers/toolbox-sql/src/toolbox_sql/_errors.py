"""What toolbox-sql raises: refusals decided on the SQL text, and failures at the database.

Every refusal is a `SqlDeniedError` (a `toolbox.ToolDeniedError`) raised when
the operation is called, before any intent exists, so the statement never
reaches the database. Its ``reason_code`` says which rule refused it and its
message names the offending node of the parsed statement; neither echoes a
parameter value.
"""

from __future__ import annotations

from typing import Final, final

from toolbox.errors import ToolDeniedError, ToolExecutionError

__all__ = [
    "REASON_CODES",
    "SqlDeniedError",
    "SqlExecutionError",
    "SqlTimeoutError",
    "SqlWriteLimitError",
]

REASON_CODES: Final = {
    "SQL_UNPARSABLE": "the text is not SQL the parser can classify (fail closed)",
    "SQL_NOT_ONE_STATEMENT": "empty text, or more than one statement",
    "SQL_STATEMENT_NOT_ALLOWED": "a statement the operation does not run (DDL, SET, COPY, PRAGMA, ...)",
    "SQL_CONSTRUCT_NOT_ALLOWED": "a construct outside the allowlist (SELECT INTO, FOR UPDATE, writable CTE)",
    "SQL_TABLE_NOT_ALLOWED": "a table outside the profile (system catalogs included)",
    "SQL_COLUMN_NOT_ALLOWED": "a column outside the profile, or one the statement may not write",
    "SQL_FUNCTION_NOT_ALLOWED": "a function outside the allowlist (pg_sleep, pg_read_file, load_extension)",
    "SQL_TYPE_NOT_ALLOWED": "a cast to a type outside the allowlist (regclass, oid, ...)",
    "SQL_UNFILTERED_WRITE": "an UPDATE or DELETE without WHERE, which the profile refuses",
    "SQL_TENANT_COLUMN": "a write that sets the tenant column, which toolbox fills from the trusted context",
}
"""Every reason code a `SqlDeniedError` carries, with what it means."""


@final
class SqlDeniedError(ToolDeniedError):
    """The statement was refused before it reached the database.

    Attributes:
        reason_code: one of `REASON_CODES`.
        rule: ``sql:<what>``, e.g. ``sql:function`` or ``sql:table``.
    """


class SqlExecutionError(ToolExecutionError):
    """The database refused or failed the statement (its SQLSTATE and message, values masked)."""


@final
class SqlTimeoutError(SqlExecutionError):
    """The statement ran longer than ``statement_timeout`` (or the context's deadline) and was cancelled.

    Not a `TimeoutError`: the governed chain does not retry it, since the same
    statement would run out of time again.
    """


@final
class SqlWriteLimitError(SqlExecutionError):
    """A write changed more rows than ``max_affected_rows``; it was rolled back, nothing changed."""
