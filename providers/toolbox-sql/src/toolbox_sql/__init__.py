"""toolbox-sql: governed SQL for agents, one pair of tools per database named in the policy file.

``sql.NAME`` reads (``query``, ``schema``), ``sql_write.NAME`` writes
(``execute``); the statement's text is the governed argument: parsed with
sqlglot in the database's dialect, checked against the profile's tables,
columns and functions, confined to the caller's tenant, and run behind the
database's own guards (read-only transactions, a statement timeout, row and
byte caps). See ``docs/sql.md``.
"""

from __future__ import annotations

from toolbox_sql._config import DEFAULT_FUNCTIONS, DatabaseConfig, SqlConfig, TableConfig, WritesConfig
from toolbox_sql._descriptor import WRITE_ACK_VALUE
from toolbox_sql._errors import (
    REASON_CODES,
    SqlDeniedError,
    SqlExecutionError,
    SqlTimeoutError,
    SqlWriteLimitError,
)
from toolbox_sql._result import SqlResult
from toolbox_sql._schema_info import ColumnInfo, SqlSchema, TableInfo
from toolbox_sql._tool import Scalar, SqlTool, SqlWriteTool, sql_tool, sql_write_tool

__all__ = [
    "DEFAULT_FUNCTIONS",
    "REASON_CODES",
    "WRITE_ACK_VALUE",
    "ColumnInfo",
    "DatabaseConfig",
    "Scalar",
    "SqlConfig",
    "SqlDeniedError",
    "SqlExecutionError",
    "SqlResult",
    "SqlSchema",
    "SqlTimeoutError",
    "SqlTool",
    "SqlWriteLimitError",
    "SqlWriteTool",
    "TableConfig",
    "TableInfo",
    "WritesConfig",
    "sql_tool",
    "sql_write_tool",
]
