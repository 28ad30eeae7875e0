"""Defence in depth: with the SQL checks out of the way, the database still refuses.

These tests hand hostile text straight to the runner (a `Plan` nobody
checked), as if the parser had been fooled, and show each layer below it
holding on its own: the read-only transaction, the statement timeout, the
extended protocol's one statement, SQLite's authorizer and read-only file,
and on PostgreSQL the least-privilege role the docs create. They also show
the runner refuses to run outside the governed chain.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sql_support import ACK, ACME, TestDatabase
from sqlalchemy import text

from toolbox import Status, Tools
from toolbox.errors import GovernanceBypassError, ToolExecutionError
from toolbox.foundations._dispatch import run_dispatched
from toolbox_sql import SqlExecutionError, SqlTimeoutError
from toolbox_sql._plan import Plan
from toolbox_sql._run import run_query, run_write


def _raw(sql: str, *, calls: frozenset[str] = frozenset(), kind: str = "SELECT") -> Plan:
    """A plan of ``sql`` that no check has seen."""
    return Plan(kind, sql, sql, (), frozenset(), sql, False, calls)


@pytest.fixture
def database(db: TestDatabase) -> Iterator[Any]:
    """The shop database's `Database`, acquired (statement timeout 0.5 s) and released afterwards."""
    gateway = db.gateway(
        policy=db.policy(allow=("sql.shop", "sql_write.shop"), writes={}, statement_timeout=0.5),
        env=db.env(**ACK),
    )
    with Tools(gateway.catalog, ACME) as tools:
        yield type(tools.get("sql.shop")).database


def _query(database: Any, sql: str, **options: Any) -> Any:
    return run_dispatched(database.read_tool, lambda: run_query(database, _raw(sql, **options), {}, ACME))


def _write(database: Any, sql: str, **options: Any) -> Any:
    plan = _raw(sql, kind="UPDATE", **options)
    return run_dispatched(database.write_tool, lambda: run_write(database, plan, {}, ACME))


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM orders",
        "UPDATE orders SET status = 'x'",
        "INSERT INTO orders (customer, total, status, tenant_id) VALUES ('x', 1, 'x', 'acme')",
        "CREATE TABLE pwned (a INT)",
        "DROP TABLE orders",
    ],
)
def test_the_reader_cannot_write(db: TestDatabase, database: Any, sql: str) -> None:
    """Read-only transactions (PostgreSQL), a read-only file and query_only (SQLite): refused."""
    before = db.checksum()
    qualified = sql.replace("orders", f"{db.prefix}orders")
    with pytest.raises(SqlExecutionError) as caught:
        _query(database, qualified)
    if db.kind == "postgres":
        assert "25006" in str(caught.value)  # read_only_sql_transaction
    assert db.checksum() == before


def test_a_session_setting_does_not_make_the_reader_writable(pg_db: TestDatabase) -> None:
    """Even a session told default_transaction_read_only = off begins every transaction READ ONLY."""
    gateway = pg_db.gateway(policy=pg_db.policy(), env=pg_db.env())
    before = pg_db.checksum()
    with Tools(gateway.catalog, ACME) as tools:
        database = type(tools.get("sql.shop")).database
        engine = database.reader()
        engine.pool.dispose()
        _query(database, "SELECT set_config('default_transaction_read_only', 'off', false)")
        with pytest.raises(SqlExecutionError, match="25006"):
            _query(database, f"DELETE FROM {pg_db.prefix}orders")
    assert pg_db.checksum() == before


def test_the_timeout_cancels_a_long_statement(db: TestDatabase, database: Any) -> None:
    """pg_sleep past statement_timeout is cancelled; SQLite's progress handler interrupts a long scan."""
    slow = (
        "SELECT pg_sleep(30)"
        if db.kind == "postgres"
        else "SELECT count(*) FROM big a, big b, big c"  # 8e9 rows: the progress handler stops it
    )
    with pytest.raises(SqlTimeoutError):
        _query(database, slow, calls=frozenset({"count", "pg_sleep"}))


def test_the_timeout_also_holds_for_writes(db: TestDatabase, database: Any) -> None:
    """A write that runs too long is cancelled and rolled back."""
    before = db.checksum()
    slow = (
        f"UPDATE {db.prefix}orders SET status = 'x' WHERE id IN (SELECT 1 FROM pg_sleep(30))"
        if db.kind == "postgres"
        else "UPDATE orders SET status = 'x' WHERE id IN "
        "(SELECT a.n FROM big a, big b, big c WHERE a.n + b.n + c.n < 0)"
    )
    with pytest.raises(SqlTimeoutError):
        _write(database, slow)
    assert db.checksum() == before


def test_one_statement_reaches_the_server(db: TestDatabase, database: Any) -> None:
    """PostgreSQL's extended protocol and sqlite3 both refuse a second statement in one text."""
    before = db.checksum()
    with pytest.raises(SqlExecutionError):
        _query(database, f"SELECT 1; DELETE FROM {db.prefix}orders")
    with pytest.raises(SqlExecutionError):
        _write(
            database, f"UPDATE {db.prefix}orders SET status = 'x' WHERE id = 1; DELETE FROM {db.prefix}orders"
        )
    assert db.checksum() == before


@pytest.mark.parametrize(
    ("sql", "calls"),
    [
        ("ATTACH DATABASE 'pwned.db' AS pwned", frozenset()),
        ("PRAGMA query_only = 0", frozenset()),
        ("SELECT card_number FROM orders", frozenset()),
        ("SELECT salary FROM payroll", frozenset()),
        ("SELECT sql FROM sqlite_master", frozenset()),
        ("SELECT load_extension('/tmp/evil')", frozenset()),
        ("SELECT sqlite_version()", frozenset()),
        ("SELECT count(*) FROM temp.sqlite_master", frozenset({"count"})),
    ],
)
def test_sqlite_authorizer_refuses_outside_the_profile(
    sqlite_db: TestDatabase, sql: str, calls: frozenset[str]
) -> None:
    """SQLite's authorizer: tables, columns, functions, ATTACH, PRAGMA outside the profile fail to prepare."""
    gateway = sqlite_db.gateway()
    before = sqlite_db.checksum()
    with Tools(gateway.catalog, ACME) as tools:
        database = type(tools.get("sql.shop")).database
        with pytest.raises(SqlExecutionError, match=r"not authorized|prohibited"):
            _query(database, sql, calls=calls)
    assert sqlite_db.checksum() == before


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM customers WHERE id = 1",
        "UPDATE orders SET card_number = 'x' WHERE id = 1",
        "DROP TABLE orders",
        "INSERT INTO payroll (employee, salary) VALUES ('x', 1)",
    ],
)
def test_sqlite_authorizer_holds_the_writer_to_the_profile(sqlite_db: TestDatabase, sql: str) -> None:
    """The writer's authorizer allows only the profile's writes (no DDL without ddl = true)."""
    gateway = sqlite_db.gateway(
        policy=sqlite_db.policy(allow=("sql.shop", "sql_write.shop"), writes={}), env=sqlite_db.env(**ACK)
    )
    before = sqlite_db.checksum()
    with Tools(gateway.catalog, ACME) as tools:
        database = type(tools.get("sql_write.shop")).database
        with pytest.raises(SqlExecutionError, match=r"not authorized|prohibited"):
            _write(database, sql)
    assert sqlite_db.checksum() == before


def test_the_runner_refuses_outside_the_chain(db: TestDatabase, database: Any) -> None:
    """run_query, run_write, schema reads and an intent's call refuse outside the chain (bypass error)."""
    before = db.checksum()
    with pytest.raises(GovernanceBypassError):
        run_query(database, _raw("SELECT 1"), {}, ACME)
    with pytest.raises(GovernanceBypassError):
        run_write(database, _raw("DELETE FROM orders", kind="DELETE"), {}, ACME)
    gateway = db.gateway(
        policy=db.policy(allow=("sql.shop", "sql_write.shop"), writes={"requires_approval": False}),
        env=db.env(**ACK),
    )
    with Tools(gateway.catalog, ACME) as tools:
        intent = tools.get("sql_write.shop").execute("DELETE FROM orders WHERE id = 1")
        with pytest.raises(GovernanceBypassError):
            intent._call()
        with pytest.raises(GovernanceBypassError):
            type(tools.get("sql.shop")).schemas.get()
    assert db.checksum() == before


@pytest.fixture
def reader_role(pg_db: TestDatabase) -> Iterator[str]:
    """The least-privilege role the docs show, for this test's schema only; dropped afterwards."""
    role = f"agent_reader_{uuid.uuid4().hex[:8]}"
    schema = pg_db.schema
    statements = [
        f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT",
        f"GRANT USAGE ON SCHEMA {schema} TO {role}",
        f"GRANT SELECT (id, customer, total, status, created_at, tenant_id) ON {schema}.orders TO {role}",
        f"GRANT SELECT (id, name, tenant_id) ON {schema}.customers TO {role}",
        f"GRANT SELECT (n) ON {schema}.big TO {role}",
        f"ALTER ROLE {role} SET default_transaction_read_only = on",
        f"ALTER ROLE {role} SET statement_timeout = '5s'",
    ]
    with pg_db.admin.begin() as connection:
        for statement in statements:
            connection.execute(text(statement))
    try:
        yield role
    finally:
        with pg_db.admin.begin() as connection:
            connection.execute(text(f"DROP OWNED BY {role}"))
            connection.execute(text(f"DROP ROLE {role}"))


def test_the_least_privilege_role_refuses_what_it_was_not_granted(
    pg_db: TestDatabase, reader_role: str
) -> None:
    """As the documented role: governed queries work; a column it was not granted fails at the server."""
    url = pg_db.url.replace("postgres@", f"{reader_role}@")
    gateway = pg_db.gateway(policy=pg_db.policy(), env={"SHOP_DATABASE_URL": url})
    ok = gateway.invoke(
        "sql.shop.query", {"sql": "SELECT count(*) AS n FROM orders", "purpose": "Count"}, context=ACME
    )
    assert ok.status is Status.SUCCESS and ok.content.rows == ((3,),)
    with Tools(gateway.catalog, ACME) as tools:
        database = type(tools.get("sql.shop")).database
        with pytest.raises(SqlExecutionError, match="42501"):  # insufficient_privilege
            _query(database, f"SELECT card_number FROM {pg_db.schema}.orders")
        with pytest.raises(SqlExecutionError, match="42501"):
            _query(database, f"SELECT salary FROM {pg_db.schema}.payroll")


def test_connection_failures_name_the_database_not_the_url(db: TestDatabase) -> None:
    """An unreachable server: ERROR/ToolConnectionError naming the database; no URL, no password."""
    if db.kind == "sqlite":
        env = {"SHOP_DATABASE_URL": "sqlite:////nonexistent-dir/nope.db"}
    else:
        env = {"SHOP_DATABASE_URL": "postgresql://postgres:hunter2-secret@127.0.0.1:1/test"}
    gateway = db.gateway(policy=db.policy(), env=env)
    result = gateway.invoke("sql.shop.query", {"sql": "SELECT 1 AS one", "purpose": "Ping"}, context=ACME)
    assert result.status is Status.ERROR and result.error_code == "CONNECTION_FAILED"
    assert "shop" in (result.message or "") and "hunter2" not in (result.message or "")
    assert "nonexistent" not in (result.message or "")
    assert issubclass(SqlExecutionError, ToolExecutionError)
