"""Property: whatever SQL text (and parameters) a model sends to ``query``, the database does not change.

Hypothesis draws unicode text, soups of SQL keywords, identifiers and hostile
fragments, and templates that splice fragments into ordinary queries; each
goes to ``sql.shop.query`` on real SQLite and PostgreSQL, and a checksum of
every table, the schema and the sequences is compared before and after. The
call always returns a result (never an unexpected exception), refused or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_support import ACME, TestDatabase, database_of

from toolbox import Gateway, Status

WORDS = [
    "SELECT",
    "FROM",
    "WHERE",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "DROP",
    "TABLE",
    "CREATE",
    "ALTER",
    "TRUNCATE",
    "UNION",
    "ALL",
    "WITH",
    "AS",
    "RETURNING",
    "EXPLAIN",
    "ANALYZE",
    "COPY",
    "TO",
    "PROGRAM",
    "PRAGMA",
    "ATTACH",
    "DATABASE",
    "ROLE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "GRANT",
    "LIMIT",
    "ORDER",
    "BY",
    "GROUP",
    "HAVING",
    "OR",
    "AND",
    "NOT",
    "NULL",
    "IS",
    "IN",
    "LIKE",
    "FOR",
    "TEMP",
    "LATERAL",
    "JOIN",
    "ON",
    "VACUUM",
    "CALL",
    "DO",
    "RECURSIVE",
    "LOCK",
    "NOTIFY",
    "orders",
    "customers",
    "payroll",
    "big",
    "pg_user",
    "sqlite_master",
    "pg_catalog",
    "main",
    "temp",
    "id",
    "customer",
    "total",
    "status",
    "card_number",
    "tenant_id",
    "salary",
    "n",
    "rowid",
    "ctid",
    "*",
    "=",
    ",",
    ";",
    "(",
    ")",
    ".",
    "--",
    "/*",
    "*/",
    "'",
    '"',
    "\\",
    "$$",
    "$1",
    "?",
    ":p",
    ":toolbox_tenant",
    "1",
    "0",
    "'x'",
    "'a'';'",
    "1=1",
    "pg_sleep(1)",
    "nextval('s')",
    "set_config('a','b',false)",
    "load_extension('x')",
    "lo_import('/etc/passwd')",
    "count(*)",
    "lower(customer)",
    "::regclass",
    "\n",
    "\t",
    "\u00a0",
    "\uff1b",
    "\u200b",
]

hostile = st.sampled_from(
    [
        "; DELETE FROM orders",
        "; DROP TABLE orders --",
        " UNION SELECT salary FROM payroll",
        " OR 1=1",
        "' OR ''='",
        "/* */ ; UPDATE orders SET status = 'x'",
        " INTO pwned_x",
        " FOR UPDATE",
        ") ; DELETE FROM orders; --",
        "pg_sleep(1)",
        "card_number",
        "$$; DROP TABLE orders; $$",
    ]
)

soup = st.lists(st.sampled_from(WORDS), min_size=1, max_size=24).map(" ".join)
templates = st.builds(
    lambda column, table, tail: f"SELECT {column} FROM {table} WHERE {tail}",
    st.sampled_from(["id", "*", "customer", "count(*)", "n", "card_number"]),
    st.sampled_from(["orders", "customers", "big", "payroll", "orders o, orders p"]),
    st.one_of(hostile, st.text(max_size=40)),
)
wrapped = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(["SELECT id FROM orders", "WITH d AS (", "EXPLAIN "]),
    hostile,
)
texts = st.one_of(st.text(max_size=120), soup, templates, wrapped)
params = st.one_of(
    st.just({}),
    st.dictionaries(
        st.sampled_from(["p", "toolbox_tenant", "id", "x y", ""]),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.floats(allow_nan=False)),
        max_size=3,
    ),
)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestDatabase, Gateway]]:
    """One database per engine and one gateway over it (statements cut at 0.2 s)."""
    folder: Path = tmp_path_factory.mktemp(f"property-{request.param}")
    with database_of(request.param, folder) as database:
        yield database, database.gateway(policy=database.policy(statement_timeout=0.2, max_rows=50))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
@given(sql=texts, arguments=params)
def test_query_never_changes_the_database(
    shop: tuple[TestDatabase, Gateway], sql: str, arguments: dict[str, Any]
) -> None:
    """Any text, any parameters: a result comes back, and the checksum is unchanged."""
    database, gateway = shop
    before = database.checksum()
    result = gateway.invoke(
        "sql.shop.query", {"sql": sql, "params": arguments, "purpose": "Probe"}, context=ACME
    )
    assert result.status in (Status.SUCCESS, Status.DENIED, Status.INVALID_ARGUMENTS, Status.ERROR)
    if result.status is Status.ERROR:
        assert result.error_code in ("SqlExecutionError", "SqlTimeoutError"), result
    assert database.checksum() == before
