"""The ``toolbox.providers`` entry point of toolbox-sql: two tools per configured database.

Reads the ``[tools.sql]`` table of the policy; it opens no connection and
reads no environment variable (the first tool built does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from toolbox import ToolPolicy, ToolProvider, hookimpl
from toolbox_sql._config import read_config
from toolbox_sql._database import Database
from toolbox_sql._descriptor import read_descriptor, write_descriptor
from toolbox_sql._tool import tool_types_for

__all__ = ["databases_of", "toolbox_providers"]


def databases_of(policy: ToolPolicy) -> list[Database]:
    """Every database configured in ``policy``'s ``[tools.sql]``.

    Raises:
        ValueError: the table is malformed (names the key, never a value).
    """
    tools = policy.governance.get("tools") or {}
    table = tools.get("sql") if isinstance(tools, dict) else None
    if not table:
        return []
    config = read_config(table, source=policy.source or "options")
    return [Database(name, database) for name, database in sorted(config.databases.items())]


@hookimpl
def toolbox_providers(policy: ToolPolicy) -> Sequence[ToolProvider[Any]]:
    """``sql.NAME`` for every database, and ``sql_write.NAME`` for those with ``writes``.

    Registering them grants nothing: the policy must allow each one.
    """
    providers: list[ToolProvider[Any]] = []
    for database in databases_of(policy):
        reads, writes = tool_types_for(database)
        bind = {"query": {"sql": _reviewed(database, write=False), "params": None}, "schema": {}}
        descriptor = read_descriptor(database.name, database.config)
        providers.append(ToolProvider(tool_type=reads, descriptor=descriptor, bind=bind))
        if database.config.writes is not None:
            bind = {"execute": {"sql": _reviewed(database, write=True), "params": None}}
            descriptor = write_descriptor(database.name, database.config)
            providers.append(ToolProvider(tool_type=writes, descriptor=descriptor, bind=bind))
    return providers


def _reviewed(database: Database, *, write: bool) -> Callable[[Any], object]:
    """How ``sql`` is bound (approvals, audit): as the statement was checked, not as it was typed.

    The same statement written with other spacing, case or comments binds the same;
    the approver reads its kind, its tables and the formatted statement.
    """

    def reviewed(sql: Any) -> object:
        planner = database.planner
        return (planner.write(sql) if write else planner.query(sql)).reviewed

    return reviewed
