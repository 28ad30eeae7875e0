"""execute: PRIVILEGED, acknowledged, approved per statement, and held to the profile's writes.

An approval binds the normalised statement and its parameters: the approver
reads the formatted statement and the tables it touches; the same statement
written differently (spacing, case, comments) is the same approval, other
parameters or another statement are not, and a grant runs once.
"""

from __future__ import annotations

from typing import Any

import pytest
from sql_support import ACK, ACK_ENV, ACME, APPROVER, TestDatabase

from toolbox import (
    AcknowledgementRequiredError,
    ApprovalRequired,
    Status,
    ToolPolicyDeniedError,
    Tools,
)
from toolbox.audit import MemorySink
from toolbox_sql import SqlDeniedError, SqlWriteTool

BOTH = ("sql.shop", "sql_write.shop")
UPDATE = "UPDATE orders SET status = :status WHERE id = :id"


def _gateway(db: TestDatabase, sink: MemorySink | None = None, **writes: Any) -> Any:
    return db.gateway(policy=db.policy(allow=BOTH, writes=writes), env=db.env(**ACK), sink=sink)


def _call(gateway: Any, sql: str, params: dict[str, Any] | None = None, approval: Any = None) -> Any:
    arguments: dict[str, Any] = {"sql": sql, "params": params or {}, "audit_as": "Fix an order"}
    return gateway.invoke("sql_write.shop.execute", arguments, context=ACME, approval=approval)


def test_the_writer_is_privileged_and_acknowledged(db: TestDatabase) -> None:
    """Allowing reads grants no write; an allowed writer still needs TOOLBOX_SQL_SHOP_WRITE_ACK."""
    reads_only = Tools.load(ACME, policy=db.policy(writes={}), env=db.env(**ACK))
    with pytest.raises(ToolPolicyDeniedError):
        reads_only.get("sql_write.shop")
    reads_only.close()
    unacknowledged = Tools.load(ACME, policy=db.policy(allow=BOTH, writes={}), env=db.env())
    with pytest.raises(AcknowledgementRequiredError) as caught:
        unacknowledged.get("sql_write.shop")
    assert (caught.value.env, caught.value.value) == (ACK_ENV, "allow-sql-writes")
    unacknowledged.close()


def test_every_statement_needs_an_approval_bound_to_it(db: TestDatabase, runs: list[str]) -> None:
    """APPROVAL_REQUIRED first (nothing runs); the grant runs it once; a replay is refused."""
    before = db.checksum()
    gateway = _gateway(db)
    asked = _call(gateway, UPDATE, {"status": "refunded", "id": 2})
    assert (asked.status, asked.reason_code, asked.attempts) == (
        Status.APPROVAL_REQUIRED,
        "APPROVAL_REQUIRED",
        0,
    )
    assert runs == [] and db.checksum() == before
    request = asked.approval
    shown = dict(request.arguments)
    assert shown["sql"] == "-- UPDATE orders\nUPDATE orders SET status = :status\nWHERE\n  id = :id"
    assert shown["params"] == {"status": "refunded", "id": 2}
    grant = APPROVER.grant(request, approved_by="lead")
    done = _call(gateway, UPDATE, {"status": "refunded", "id": 2}, approval=grant)
    assert done.status is Status.SUCCESS and done.content.rows_affected == 1 and len(runs) == 1
    assert db.rows(f"SELECT status FROM {db.prefix}orders WHERE id = 2") == [("refunded",)]
    replay = _call(gateway, UPDATE, {"status": "refunded", "id": 2}, approval=grant)
    assert (replay.status, replay.reason_code) == (Status.DENIED, "APPROVAL_INVALID") and len(runs) == 1


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        (UPDATE, {"status": "refunded", "id": 3}),  # another row
        (UPDATE, {"status": "void", "id": 2}),  # another value
        ("UPDATE orders SET status = :status WHERE id = :id OR 1 = 1", {"status": "refunded", "id": 2}),
        ("DELETE FROM orders WHERE id = :id", {"id": 2}),
    ],
)
def test_a_grant_does_not_stretch(
    db: TestDatabase, runs: list[str], sql: str, params: dict[str, Any]
) -> None:
    """A grant for one statement and its parameters does not run another: APPROVAL_INVALID, nothing run."""
    before = db.checksum()
    gateway = _gateway(db)
    request = _call(gateway, UPDATE, {"status": "refunded", "id": 2}).approval
    grant = APPROVER.grant(request, approved_by="lead")
    result = _call(gateway, sql, params, approval=grant)
    assert (result.status, result.reason_code, result.attempts) == (Status.DENIED, "APPROVAL_INVALID", 0)
    assert runs == [] and db.checksum() == before


def test_the_grant_binds_the_normalised_statement(db: TestDatabase, runs: list[str]) -> None:
    """Spacing, case and comments are not the statement: the same normalised SQL is the same approval."""
    gateway = _gateway(db)
    request = _call(gateway, UPDATE, {"status": "refunded", "id": 2}).approval
    grant = APPROVER.grant(request, approved_by="lead")
    written_differently = "update   orders set status=:status -- fix\n where id = :id"
    result = _call(gateway, written_differently, {"status": "refunded", "id": 2}, approval=grant)
    assert result.status is Status.SUCCESS and len(runs) == 1


def test_typed_door_asks_and_runs_with_the_grant(db: TestDatabase, runs: list[str]) -> None:
    """The typed door raises ApprovalRequired, then runs with the grant."""
    gateway = _gateway(db)
    with Tools(gateway.catalog, ACME) as tools:
        writer: SqlWriteTool = tools.get("sql_write.shop")
        with pytest.raises(ApprovalRequired) as caught:
            writer.execute(UPDATE, {"status": "paid", "id": 3}).audit_as("Mark paid").execute()
        assert runs == []
        grant = APPROVER.grant(caught.value.request, approved_by="lead")
        result = (
            writer.execute(UPDATE, {"status": "paid", "id": 3}).audit_as("Mark paid").execute(approval=grant)
        )
    assert result.rows_affected == 1 and len(runs) == 1


def _direct(db: TestDatabase, **writes: Any) -> Any:
    return _gateway(db, requires_approval=False, **writes)


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("DELETE FROM orders", "SQL_UNFILTERED_WRITE"),
        ("UPDATE orders SET status = 'x'", "SQL_UNFILTERED_WRITE"),
        ("UPDATE orders SET id = 9 WHERE id = 1", "SQL_COLUMN_NOT_ALLOWED"),
        ("UPDATE orders SET card_number = 'x' WHERE id = 1", "SQL_COLUMN_NOT_ALLOWED"),
        ("UPDATE orders SET status = card_number WHERE id = 1", "SQL_COLUMN_NOT_ALLOWED"),
        ("UPDATE orders SET tenant_id = 'globex' WHERE id = 1", "SQL_TENANT_COLUMN"),
        ("UPDATE customers SET name = 'x' WHERE id = 1", "SQL_TABLE_NOT_ALLOWED"),
        ("DELETE FROM payroll WHERE id = 1", "SQL_TABLE_NOT_ALLOWED"),
        ("UPDATE orders o SET status = 'x' WHERE o.id = 1", "SQL_CONSTRUCT_NOT_ALLOWED"),
        (
            "UPDATE orders SET status = 'x' FROM customers WHERE customers.id = orders.id",
            "SQL_CONSTRUCT_NOT_ALLOWED",
        ),
        ("INSERT INTO orders VALUES (9, 'x', 1, 'x', NULL, 'acme', NULL)", "SQL_COLUMN_NOT_ALLOWED"),
        ("INSERT INTO orders (customer, total, status) SELECT * FROM orders", "SQL_CONSTRUCT_NOT_ALLOWED"),
        (
            "INSERT INTO orders (customer, total, status) SELECT employee, salary, 'x' FROM payroll",
            "SQL_TABLE_NOT_ALLOWED",
        ),
        ("INSERT INTO orders (customer, customer, status) VALUES ('x', 'y', 'z')", "SQL_COLUMN_NOT_ALLOWED"),
        ("UPDATE orders SET status = pg_sleep(10) WHERE id = 1", "SQL_FUNCTION_NOT_ALLOWED"),
        ("DELETE FROM orders WHERE id IN (SELECT id FROM payroll)", "SQL_TABLE_NOT_ALLOWED"),
        ("DROP TABLE orders", "SQL_STATEMENT_NOT_ALLOWED"),
        ("CREATE TABLE pwned (a INT)", "SQL_STATEMENT_NOT_ALLOWED"),
        ("SELECT id FROM orders", "SQL_STATEMENT_NOT_ALLOWED"),
        ("UPDATE orders SET status = 'x' WHERE id = 1; DELETE FROM orders", "SQL_NOT_ONE_STATEMENT"),
    ],
)
def test_writes_outside_the_profile_are_refused(
    db: TestDatabase, runs: list[str], sql: str, code: str
) -> None:
    """Each refused write: DENIED with its code, zero runs, nothing changed."""
    before = db.checksum()
    result = _call(_direct(db), sql)
    assert (result.status, result.reason_code, result.attempts) == (Status.DENIED, code, 0), result.message
    assert runs == [] and db.checksum() == before


def test_unfiltered_writes_when_the_profile_allows_them(db: TestDatabase) -> None:
    """allow_unfiltered: a DELETE without WHERE runs (on the caller's rows only)."""
    result = _call(_direct(db, allow_unfiltered=True), "DELETE FROM orders")
    assert result.status is Status.SUCCESS and result.content.rows_affected == 3
    assert db.rows(f"SELECT count(*) FROM {db.prefix}orders") == [(2,)]


def test_a_write_past_max_affected_rows_is_rolled_back(db: TestDatabase) -> None:
    """Three rows with max_affected_rows = 2: ERROR, rolled back, not retried, nothing changed."""
    before = db.checksum()
    result = _call(_direct(db, max_affected_rows=2), "UPDATE orders SET status = 'x' WHERE total > 0")
    assert (result.status, result.error_code, result.attempts) == (Status.ERROR, "SqlWriteLimitError", 1)
    assert "rolled back" in (result.message or "")
    assert db.checksum() == before


def test_returning_rows_come_back(db: TestDatabase) -> None:
    """RETURNING names allowed columns; its rows come back with rows_affected."""
    result = _call(
        _direct(db), "UPDATE orders SET status = 'seen' WHERE total < :t RETURNING id, status", {"t": 100}
    )
    assert result.status is Status.SUCCESS
    assert result.content.rows_affected == 1 and [list(r) for r in result.content.rows] == [[2, "seen"]]
    hidden = _call(_direct(db), "DELETE FROM orders WHERE id = 1 RETURNING card_number")
    assert (hidden.status, hidden.reason_code) == (Status.DENIED, "SQL_COLUMN_NOT_ALLOWED")


def test_ddl_only_when_the_profile_says_so(db: TestDatabase, runs: list[str]) -> None:
    """ddl = true allows CREATE TABLE for a writable table of the profile, never for another."""
    tables = db.profile()["tables"] | {"scratch": {"columns": ["a"], "write": ["insert"]}}
    policy = db.policy(allow=BOTH, tables=tables, writes={"requires_approval": False, "ddl": True})
    gateway = db.gateway(policy=policy, env=db.env(**ACK))
    created = _call(gateway, "CREATE TABLE scratch (a INT)")
    assert created.status is Status.SUCCESS, created.message
    refused = _call(gateway, "CREATE TABLE pwned (a INT)")
    assert (refused.status, refused.reason_code) == (Status.DENIED, "SQL_TABLE_NOT_ALLOWED")
    index = _call(gateway, "CREATE INDEX pwned_ix ON customers (name)")
    assert (index.status, index.reason_code) == (Status.DENIED, "SQL_TABLE_NOT_ALLOWED")
    dropped = _call(gateway, "DROP TABLE scratch")
    assert dropped.status is Status.SUCCESS, dropped.message
    grant = _call(gateway, "GRANT ALL ON orders TO PUBLIC")
    assert grant.status is Status.DENIED


def test_a_failed_write_names_no_value(pg_db: TestDatabase) -> None:
    """PostgreSQL quotes the bad value in its message; the result masks it and changes nothing."""
    before = pg_db.checksum()
    secret = "not-a-number-SECRET-4242"
    result = _call(
        _direct(pg_db), "INSERT INTO orders (customer, total, status) VALUES ('x', :t, 'new')", {"t": secret}
    )
    assert result.status is Status.ERROR and result.error_code == "SqlExecutionError"
    assert "22P02" in (result.message or "") and secret not in (result.message or "")
    assert pg_db.checksum() == before


def test_typed_refusal_raises_before_an_intent(db: TestDatabase, runs: list[str]) -> None:
    """The typed door refuses at the call, with the code, and records the denial."""
    gateway = _direct(db)
    with Tools(gateway.catalog, ACME) as tools, pytest.raises(SqlDeniedError) as caught:
        tools.get("sql_write.shop").execute("DELETE FROM orders")
    assert caught.value.reason_code == "SQL_UNFILTERED_WRITE" and runs == []
