"""What a configured database's two tools are: ``sql.NAME`` (reads) and ``sql_write.NAME`` (writes).

Risk and acknowledgement belong to a whole tool in toolbox, so a database's
reads and writes are two tools: a policy can allow reading without ever
allowing a write, and the write tool alone is ``PRIVILEGED``, acknowledged
and (by default) approved call by call.
"""

from __future__ import annotations

from toolbox import Acknowledgement, Effect, OperationDescriptor, RiskClass, ToolDescriptor
from toolbox_sql._config import DatabaseConfig

__all__ = ["VERSION", "WRITE_ACK_VALUE", "read_descriptor", "write_acknowledgement", "write_descriptor"]

VERSION = "0.1.0"
WRITE_ACK_VALUE = "allow-sql-writes"
"""The value ``TOOLBOX_SQL_<NAME>_WRITE_ACK`` must hold, unless the profile names its own."""


def read_descriptor(name: str, config: DatabaseConfig) -> ToolDescriptor:
    """``sql.NAME``: ``query`` and ``schema``, both ``READ_ONLY``, ``EXTERNAL_RESOURCE``."""
    return ToolDescriptor(
        name=f"sql.{name}",
        version=VERSION,
        summary=f"Read the {name} database with SQL (one SELECT per call).",
        risk=RiskClass.EXTERNAL_RESOURCE,
        operations=(
            OperationDescriptor(
                name="query",
                effect=Effect.READ_ONLY,
                summary=(
                    f"Run one read-only SELECT on the {name} database; pass values as :name placeholders "
                    f"with params. At most {config.max_rows} rows come back. Call schema first for the "
                    "tables, columns and functions you may use."
                ),
            ),
            OperationDescriptor(
                name="schema",
                effect=Effect.READ_ONLY,
                summary=f"The tables, columns and functions of the {name} database that queries may use.",
            ),
        ),
    )


def write_acknowledgement(name: str, config: DatabaseConfig) -> Acknowledgement:
    """The deployment acknowledgement of ``sql_write.NAME``."""
    writes = config.writes
    if writes is not None and writes.acknowledgement is not None:
        return writes.acknowledgement
    return Acknowledgement(env=f"TOOLBOX_SQL_{name.upper()}_WRITE_ACK", value=WRITE_ACK_VALUE)


def write_descriptor(name: str, config: DatabaseConfig) -> ToolDescriptor:
    """``sql_write.NAME``: ``execute`` (``UNSAFE``), ``PRIVILEGED``, acknowledged, approved by default."""
    writes = config.writes
    approval = writes.requires_approval if writes is not None else True
    return ToolDescriptor(
        name=f"sql_write.{name}",
        version=VERSION,
        summary=f"Change rows of the {name} database with SQL (INSERT, UPDATE, DELETE).",
        risk=RiskClass.PRIVILEGED,
        acknowledgement=write_acknowledgement(name, config),
        operations=(
            OperationDescriptor(
                name="execute",
                effect=Effect.UNSAFE,
                requires_approval=approval,
                summary=(
                    f"Run one INSERT, UPDATE or DELETE on the {name} database; pass values as :name "
                    "placeholders with params."
                    + (" A person approves each statement before it runs." if approval else "")
                ),
            ),
        ),
    )
