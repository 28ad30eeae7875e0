"""`SqlConfig`: the ``[tools.sql]`` table of the policy file, validated when the provider is discovered.

::

    [tools.sql.databases.analytics]
    url_env = "ANALYTICS_DATABASE_URL"     # the SQLAlchemy URL is read from this variable
    statement_timeout = 5                  # seconds
    max_rows = 500
    [tools.sql.databases.analytics.tables.orders]
    columns = ["id", "customer", "total", "status", "created_at"]
    tenant_column = "tenant_id"            # rows are filtered to the caller's tenant
    write = ["update"]                     # execute may UPDATE ...
    writable_columns = ["status"]          # ... only this column
    [tools.sql.databases.analytics.writes]  # registers sql_write.analytics (execute)
    max_affected_rows = 50

The URL never appears in the file: it names credentials. Table, column and
function names are plain lower-case SQL identifiers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolbox import Acknowledgement
from toolbox.provider import describe_validation_error

__all__ = [
    "DEFAULT_FUNCTIONS",
    "DatabaseConfig",
    "SqlConfig",
    "TableConfig",
    "WritesConfig",
    "read_config",
]

KIB = 1024
MIB = 1024 * KIB
_DATABASE_NAME = r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$"
_IDENTIFIER = r"^[a-z_][a-z0-9_]{0,62}$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_Frozen = ConfigDict(frozen=True, extra="forbid")

Identifier = Annotated[str, Field(pattern=_IDENTIFIER)]
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
WriteKind = Literal["insert", "update", "delete"]

DEFAULT_FUNCTIONS: tuple[str, ...] = (
    "abs",
    "avg",
    "ceil",
    "ceiling",
    "coalesce",
    "concat",
    "count",
    "current_date",
    "current_timestamp",
    "date",
    "date_trunc",
    "dense_rank",
    "extract",
    "floor",
    "greatest",
    "group_concat",
    "lag",
    "lead",
    "least",
    "length",
    "lower",
    "ltrim",
    "max",
    "min",
    "nullif",
    "rank",
    "replace",
    "round",
    "row_number",
    "rtrim",
    "strftime",
    "string_agg",
    "substr",
    "substring",
    "sum",
    "trim",
    "upper",
)
"""Functions a query may call when the profile names none: aggregates, windows, strings, numbers
and dates; none with a side effect, none that reads files, sleeps or reaches another server."""


@final
class TableConfig(BaseModel):
    """One table the agent may read (and, with ``write``, change)."""

    model_config = _Frozen

    columns: Annotated[tuple[Identifier, ...], Field(min_length=1)]
    """The columns a statement may name; ``SELECT *`` expands to exactly these."""
    tenant_column: Identifier | None = None
    """Rows are filtered to those whose column equals the context's tenant (never the model's)."""
    write: tuple[WriteKind, ...] = ()
    """What ``execute`` may do to the table: ``insert``, ``update``, ``delete``."""
    writable_columns: tuple[Identifier, ...] | None = None
    """The columns ``execute`` may set; None: every one of ``columns``."""

    @model_validator(mode="after")
    def _consistent(self) -> TableConfig:
        if len(set(self.columns)) != len(self.columns):
            raise ValueError("columns lists a column twice")
        if self.tenant_column is not None and self.tenant_column in self.columns:
            raise ValueError(
                "tenant_column must not be one of columns: toolbox fills it from the context, "
                "the model neither reads nor writes it"
            )
        if self.writable_columns is not None:
            unknown = sorted(set(self.writable_columns) - set(self.columns))
            if unknown:
                raise ValueError(f"writable_columns names columns not in columns: {', '.join(unknown)}")
        return self

    @property
    def written(self) -> frozenset[str]:
        """The columns ``execute`` may set."""
        return frozenset(self.columns if self.writable_columns is None else self.writable_columns)


@final
class WritesConfig(BaseModel):
    """How ``execute`` (the ``sql_write.NAME`` tool) is governed."""

    model_config = _Frozen

    url_env: Annotated[str, Field(pattern=_ENV_NAME)] | None = None
    """The variable holding the writer's URL (a role with write grants); None: the database's ``url_env``."""
    requires_approval: bool = True
    """Every statement needs a human approval bound to its normalised SQL and parameters."""
    acknowledgement: Acknowledgement | None = None
    """The deployment acknowledgement; None: ``TOOLBOX_SQL_<NAME>_WRITE_ACK=allow-sql-writes``."""
    max_affected_rows: Annotated[int, Field(strict=True, ge=1, le=10_000_000)] = 1000
    """A statement that changes more rows is rolled back and fails."""
    allow_unfiltered: bool = False
    """Allow UPDATE and DELETE without WHERE (every row of the table, or of the tenant)."""
    ddl: bool = False
    """Allow CREATE/ALTER/DROP TABLE, CREATE/DROP INDEX and TRUNCATE, on tables that allow writes."""


@final
class DatabaseConfig(BaseModel):
    """One named database: where it is, what may be read and written, and the limits."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    url_env: Annotated[str, Field(pattern=_ENV_NAME)]
    """The environment variable holding the SQLAlchemy URL (``sqlite:///...``, ``postgresql://...``)."""
    schema_: Identifier | None = Field(default=None, alias="schema")
    """The schema the tables live in (PostgreSQL; default ``public``). SQLite uses ``main``."""
    tables: Mapping[Identifier, TableConfig] = Field(min_length=1)
    """The tables a statement may name, by name."""
    functions: tuple[Identifier, ...] = DEFAULT_FUNCTIONS
    """The functions a statement may call (replaces the default list)."""
    statement_timeout: Seconds = 5.0
    """Seconds one statement may run; the database cancels it then."""
    max_rows: Annotated[int, Field(strict=True, ge=1, le=1_000_000)] = 1000
    """Rows a result holds at most; the rest are never fetched (``truncated`` says so)."""
    max_bytes: Annotated[int, Field(strict=True, ge=1024, le=256 * MIB)] = MIB
    """Bytes (of the values as JSON) a result holds at most; fetching stops there."""
    max_sql_length: Annotated[int, Field(strict=True, ge=64, le=1_000_000)] = 20_000
    """Characters a statement may have."""
    writes: WritesConfig | None = None
    """Present: the ``sql_write.NAME`` tool (``execute``) is registered."""

    @model_validator(mode="after")
    def _writable(self) -> DatabaseConfig:
        if self.writes is not None and not any(t.write for t in self.tables.values()):
            raise ValueError("writes is set but no table allows a write: add write = [...] to a table")
        return self

    @property
    def schema_name(self) -> str | None:
        """The configured schema, if any."""
        return self.schema_


@final
class SqlConfig(BaseModel):
    """The ``[tools.sql]`` table."""

    model_config = _Frozen

    databases: Mapping[str, DatabaseConfig] = Field(default_factory=dict)
    """The named databases; each becomes the tool ``sql.NAME`` (and ``sql_write.NAME``)."""

    @field_validator("databases")
    @classmethod
    def _names(cls, value: Mapping[str, DatabaseConfig]) -> Mapping[str, DatabaseConfig]:
        for name in value:
            if not re.match(_DATABASE_NAME, name) or len(name) > 32:
                raise ValueError(
                    f"database name {name!r} must be lower-case letters and digits joined by single "
                    "underscores, at most 32 characters"
                )
        return value


def read_config(table: Mapping[str, Any], *, source: str) -> SqlConfig:
    """Validate ``[tools.sql]``.

    Raises:
        ValueError: names ``source`` and the offending key, never a value.
    """
    if not isinstance(table, Mapping):
        raise ValueError(f"{source}: [tools.sql] must be a table")
    try:
        return SqlConfig.model_validate(dict(table))
    except ValidationError as exc:
        raise ValueError(f"{source}: invalid [tools.sql] ({describe_validation_error(exc)})") from None
