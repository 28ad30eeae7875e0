"""`SqlSchema`: the tables and columns a profile exposes, with the database's own types, for a prompt.

Only what the profile allows is shown: a column outside the allowlist, and
the tenant column, never appear. Types are read from the database's catalog
once (on the first ``schema()`` call) and kept; a table the database does
not have is shown with no types.
"""

from __future__ import annotations

import threading
from typing import final

from pydantic import BaseModel, ConfigDict
from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError

from toolbox.provider import require_dispatch
from toolbox_sql._database import Database

__all__ = ["ColumnInfo", "SchemaCache", "SqlSchema", "TableInfo"]

_Frozen = ConfigDict(frozen=True)


@final
class ColumnInfo(BaseModel):
    """One column a statement may name."""

    model_config = _Frozen

    name: str
    type: str | None = None
    """The database's type name, or None when the catalog does not say."""
    writable: bool = False
    """Whether ``execute`` may set it."""


@final
class TableInfo(BaseModel):
    """One table of the profile."""

    model_config = _Frozen

    name: str
    columns: tuple[ColumnInfo, ...]
    writes: tuple[str, ...] = ()
    """What ``execute`` may do to it: ``insert``, ``update``, ``delete``."""
    rows_of_your_tenant_only: bool = False
    """Whether rows are filtered to the caller's tenant (by toolbox, not by the statement)."""


@final
class SqlSchema(BaseModel):
    """What a model needs to write a query the profile allows."""

    model_config = _Frozen

    database: str
    dialect: str
    tables: tuple[TableInfo, ...]
    functions: tuple[str, ...]
    max_rows: int
    placeholders: str = ":name, with the values in params"


@final
class SchemaCache:
    """The schema of one database, read from its catalog once."""

    __slots__ = ("_database", "_lock", "_schema")

    def __init__(self, database: Database) -> None:
        self._database = database
        self._schema: SqlSchema | None = None
        self._lock = threading.Lock()

    def get(self) -> SqlSchema:
        """The schema, read now if this is the first call (inside the chain's dispatch only)."""
        require_dispatch(self._database.read_tool)
        with self._lock:
            if self._schema is None:
                self._schema = _read(self._database)
            return self._schema


def _read(database: Database) -> SqlSchema:
    config = database.config
    planner = database.planner
    schema = config.schema_name or ("main" if planner.dialect == "sqlite" else "public")
    types: dict[str, dict[str, str]] = {}
    engine = database.inspector_engine()
    try:
        inspector = inspect(engine)
        for name in config.tables:
            try:
                columns = inspector.get_columns(name, schema=schema)
            except SQLAlchemyError:
                continue
            types[name] = {str(c["name"]): str(c["type"]) for c in columns}
    except SQLAlchemyError:
        types = {}
    finally:
        engine.dispose()
    tables = tuple(
        TableInfo(
            name=name,
            columns=tuple(
                ColumnInfo(name=c, type=types.get(name, {}).get(c), writable=bool(t.write) and c in t.written)
                for c in t.columns
            ),
            writes=t.write,
            rows_of_your_tenant_only=t.tenant_column is not None,
        )
        for name, t in sorted(config.tables.items())
    )
    return SqlSchema(
        database=database.name,
        dialect=planner.dialect,
        tables=tables,
        functions=tuple(sorted(config.functions)),
        max_rows=config.max_rows,
    )
