"""toolbox-sql registers through the toolbox.providers entry point, configured by the policy file.

The four ways to ask for its tools (unavailable, policy-denied, not
acknowledged, allowed), and a configuration that is wrong in every way an
operator might get it wrong, each named by its key and never by a value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import importlib_metadata
import pytest
from sql_support import ACK, ACME, TestDatabase

import toolbox_sql
from toolbox import (
    RiskClass,
    Status,
    ToolPolicy,
    ToolPolicyDeniedError,
    Tools,
    ToolUnavailableError,
)
from toolbox.testing import assert_denied
from toolbox_sql import SqlTool

POLICY = """\
version = 1
[allow]
tools = ["sql.shop"]

[tools.sql.databases.shop]
url_env = "SHOP_DATABASE_URL"
max_rows = 50
[tools.sql.databases.shop.tables.orders]
columns = ["id", "customer", "total", "status"]
tenant_column = "tenant_id"
"""


def test_entry_point_is_declared() -> None:
    """The distribution declares sql = toolbox_sql.plugin in the toolbox.providers group."""
    (ep,) = importlib_metadata.entry_points(group="toolbox.providers", name="sql")
    assert ep.value == "toolbox_sql.plugin" and ep.dist is not None and ep.dist.name == "toolbox-sql"


def test_public_api_is_explicit() -> None:
    """The package exports exactly its documented names, sorted."""
    assert toolbox_sql.__all__ == [
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
    for name in toolbox_sql.__all__:
        assert getattr(toolbox_sql, name) is not None


def test_a_policy_file_configures_and_discovery_finds_it(db: TestDatabase, tmp_path: Path) -> None:
    """Tools.load with the policy file discovers sql.shop (and no writer: no [writes]); it runs."""
    path = tmp_path / "policy.toml"
    schema = f'schema = "{db.schema}"\n' if db.schema else ""
    path.write_text(POLICY.replace("max_rows = 50\n", f"max_rows = 50\n{schema}"), encoding="utf-8")
    with Tools.load(ACME, policy=ToolPolicy.from_file(path), env=db.env()) as tools:
        assert tools.has("sql.shop") and not tools.has("sql_write.shop")
        assert tools.distribution_of("sql.shop") == "toolbox-sql"
        shop: SqlTool = tools.get("sql.shop")
        result = shop.query("SELECT count(*) AS n FROM orders").purpose("Count").execute()
        assert result.rows == ((3,),)
        schema = shop.schema().purpose("Describe").execute()
        (orders,) = schema.tables
        assert [c.name for c in orders.columns] == ["id", "customer", "total", "status"]
        assert orders.rows_of_your_tenant_only and schema.max_rows == 50


def test_the_four_gates(db: TestDatabase) -> None:
    """Unavailable without the provider; EXTERNAL_RESOURCE needs an allow; the writer needs its ack."""
    bare = Tools.load(ACME, policy=ToolPolicy.standard(), discover=False, env=db.env())
    assert_denied(
        lambda: bare.get("sql.shop"),
        bare,
        "sql.shop",
        error=ToolUnavailableError,
        reason_code="TOOL_UNAVAILABLE",
    )
    standard = db.policy(allow=())
    with Tools.load(ACME, policy=standard, env=db.env()) as tools:
        error = assert_denied(
            lambda: tools.get("sql.shop"),
            tools,
            "sql.shop",
            error=ToolPolicyDeniedError,
            reason_code="POLICY_DENIED",
        )
        assert "allow('sql.shop')" in str(error)
    descriptor = toolbox_sql.plugin.toolbox_providers(db.policy(writes={}))
    assert [(p.descriptor.name, p.descriptor.risk) for p in descriptor] == [
        ("sql.shop", RiskClass.EXTERNAL_RESOURCE),
        ("sql_write.shop", RiskClass.PRIVILEGED),
    ]
    write = descriptor[1].descriptor
    assert write.acknowledgement is not None and write.acknowledgement.env == "TOOLBOX_SQL_SHOP_WRITE_ACK"
    assert write.operations[0].requires_approval and write.operations[0].effect.value == "UNSAFE"
    assert {op.name: op.effect.value for op in descriptor[0].descriptor.operations} == {
        "query": "READ_ONLY",
        "schema": "READ_ONLY",
    }
    with Tools.load(
        ACME, policy=db.policy(allow=("sql.shop", "sql_write.shop"), writes={}), env=db.env(**ACK)
    ) as tools:
        assert tools.explain("sql_write.shop").allowed


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"databases": {"shop": {"tables": {"orders": {"columns": ["id"]}}}}}, "url_env"),
        (
            {
                "databases": {
                    "shop": {
                        "url_env": "X",
                        "url": "postgresql://u:p@h/d",
                        "tables": {"t": {"columns": ["a"]}},
                    }
                }
            },
            "url",
        ),
        ({"databases": {"Bad Name": {"url_env": "X", "tables": {"t": {"columns": ["a"]}}}}}, "databases"),
        ({"databases": {"shop": {"url_env": "X", "tables": {}}}}, "tables"),
        ({"databases": {"shop": {"url_env": "X", "tables": {"t": {"columns": []}}}}}, "columns"),
        ({"databases": {"shop": {"url_env": "X", "tables": {"T;DROP": {"columns": ["a"]}}}}}, "tables"),
        ({"databases": {"shop": {"url_env": "X", "tables": {"t": {"columns": ["a", "a"]}}}}}, "columns"),
        (
            {
                "databases": {
                    "shop": {"url_env": "X", "tables": {"t": {"columns": ["a"], "tenant_column": "a"}}}
                }
            },
            "tenant_column",
        ),
        (
            {
                "databases": {
                    "shop": {"url_env": "X", "tables": {"t": {"columns": ["a"], "writable_columns": ["b"]}}}
                }
            },
            "writable_columns",
        ),
        (
            {"databases": {"shop": {"url_env": "X", "tables": {"t": {"columns": ["a"]}}, "writes": {}}}},
            "writes",
        ),
        (
            {"databases": {"shop": {"url_env": "X", "tables": {"t": {"columns": ["a"]}}, "max_rows": 0}}},
            "max_rows",
        ),
        (
            {
                "databases": {
                    "shop": {"url_env": "X", "tables": {"t": {"columns": ["a"]}}, "statement_timeout": -1}
                }
            },
            "statement_timeout",
        ),
    ],
)
def test_configuration_errors_name_the_key(table: dict[str, Any], key: str) -> None:
    """A malformed [tools.sql] is a broken provider whose message names the key, never a value."""
    policy = ToolPolicy(default_risks=[RiskClass.MEMORY_ONLY], governance={"tools": {"sql": table}})
    with pytest.raises(ValueError, match=key) as caught:
        toolbox_sql.plugin.databases_of(policy)
    assert "u:p@h" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (None, "SHOP_DATABASE_URL is not set"),
        ("not a url at all", "does not hold a SQLAlchemy URL"),
        ("mysql://root:hunter2@127.0.0.1/db", "supports sqlite"),
        ("postgresql+psycopg2://root:hunter2@127.0.0.1/db", "psycopg 3"),
        ("sqlite://", "must name a file"),
        ("sqlite:///:memory:", "must name a file"),
    ],
)
def test_a_bad_url_is_named_by_its_variable_never_shown(
    db: TestDatabase, url: str | None, message: str
) -> None:
    """The URL comes from the environment; a bad one fails the tool's build, its value never shown."""
    env = {} if url is None else {"SHOP_DATABASE_URL": url}
    with (
        Tools.load(ACME, policy=db.policy(), env=env) as tools,
        pytest.raises(ValueError, match=message) as caught,
    ):
        tools.get("sql.shop")
    assert "hunter2" not in str(caught.value) and "root" not in str(caught.value)


def test_gateway_reports_a_bad_url_as_an_error_without_it(db: TestDatabase) -> None:
    """By name, the same failure is an ERROR result whose message holds no URL."""
    gateway = db.gateway(env={"SHOP_DATABASE_URL": "mysql://root:hunter2@127.0.0.1/db"})
    result = gateway.invoke("sql.shop.query", {"sql": "SELECT 1 AS one", "purpose": "Ping"}, context=ACME)
    assert result.status in (Status.ERROR, Status.DENIED) and "hunter2" not in (result.message or "")
