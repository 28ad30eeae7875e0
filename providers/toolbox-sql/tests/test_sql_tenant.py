"""The tenant row filter: bound from the trusted context, applied wherever a filtered table appears.

An attacker controls the whole SQL text and its parameters, never the
context: ``OR 1=1``, a UNION, a self-join, a WITH query, a correlated
subquery or a quoting trick all see the caller's tenant's rows only, and
writes change (and insert) only the caller's tenant's rows.
"""

from __future__ import annotations

from typing import Any

import pytest
from sql_support import ACK, ACME, GLOBEX, SECRETS, TestDatabase

from toolbox import ExecutionContext, Status

BYPASSES = [
    "SELECT customer FROM orders WHERE customer = 'nobody' OR 1 = 1",
    "SELECT customer FROM orders WHERE 1 = 0 UNION SELECT customer FROM orders o2 WHERE o2.total > 500",
    "SELECT customer FROM orders UNION ALL SELECT name FROM customers",
    "SELECT a.customer FROM orders a JOIN orders b ON b.total > 500",
    "SELECT customer FROM orders a WHERE EXISTS (SELECT 1 FROM orders b WHERE b.total > 500)",
    "WITH every_order AS (SELECT customer, total FROM orders) SELECT customer FROM every_order",
    "SELECT customer FROM (SELECT customer FROM orders) AS everything",
    "SELECT customer FROM orders WHERE customer = 'x'' OR ''1''=''1'",
    "SELECT customer FROM orders WHERE id IN (SELECT id FROM orders WHERE total > 500) OR TRUE",
    "SELECT max(customer) FROM orders GROUP BY status HAVING 1 = 1",
]


def _values(result: Any) -> set[str]:
    return {str(v) for row in result.content.rows for v in row}


@pytest.mark.parametrize("sql", BYPASSES)
def test_no_query_reaches_another_tenants_rows(reads: TestDatabase, sql: str) -> None:
    """Whatever the statement says, acme's query returns none of globex's values."""
    gateway = reads.gateway()
    result = gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "Probe"}, context=ACME)
    assert result.status is Status.SUCCESS, result.message
    assert not _values(result) & set(SECRETS)
    assert all("globex" not in v and v != "gina" for v in _values(result))


def test_the_tenant_comes_from_the_context(reads: TestDatabase) -> None:
    """The same statement returns each caller's own rows; sums differ accordingly."""
    gateway = reads.gateway()
    sql = "SELECT count(*) AS n, sum(total) AS s FROM orders"
    acme = gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "Sum"}, context=ACME)
    globex = gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "Sum"}, context=GLOBEX)
    assert acme.content.rows[0][0] == 3 and globex.content.rows[0][0] == 2
    assert float(acme.content.rows[0][1]) == 500.5 and float(globex.content.rows[0][1]) == 1004


def test_a_tenant_value_with_quotes_is_only_a_value(reads: TestDatabase) -> None:
    """The tenant is bound as a parameter: a tenant named like an injection matches no row."""
    gateway = reads.gateway()
    odd = ExecutionContext(tenant="acme' OR '1'='1", principal="mallory")
    result = gateway.invoke(
        "sql.shop.query", {"sql": "SELECT id FROM orders", "purpose": "Probe"}, context=odd
    )
    assert result.status is Status.SUCCESS and result.content.rows == ()


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"params": {"toolbox_tenant": "globex"}}, "unused"),
        ({"sql": "SELECT id FROM orders WHERE customer = :toolbox_tenant"}, None),
        ({"tenant": "globex"}, "extra_forbidden"),
    ],
)
def test_the_model_cannot_set_the_tenant(
    reads: TestDatabase, arguments: dict[str, Any], code: str | None
) -> None:
    """Naming the tenant's parameter, or passing a tenant, is refused before anything runs."""
    gateway = reads.gateway()
    call = {"sql": "SELECT id FROM orders", "purpose": "Probe", **arguments}
    result = gateway.invoke("sql.shop.query", call, context=ACME)
    assert result.status in (Status.INVALID_ARGUMENTS, Status.DENIED) and result.attempts == 0
    if code is not None:
        assert result.error_code == code
    else:
        assert result.reason_code == "SQL_CONSTRUCT_NOT_ALLOWED"


def _writer(db: TestDatabase, **writes: Any) -> Any:
    policy = db.policy(allow=("sql.shop", "sql_write.shop"), writes={"requires_approval": False, **writes})
    return db.gateway(policy=policy, env=db.env(**ACK))


def test_writes_touch_the_callers_rows_only(db: TestDatabase) -> None:
    """UPDATE and DELETE of another tenant's row change nothing; of one's own, exactly that row."""
    gateway = _writer(db)
    other = gateway.invoke(
        "sql_write.shop.execute",
        {
            "sql": "UPDATE orders SET status = 'void' WHERE customer = 'globex-customer' OR 1 = 1",
            "audit_as": "Void",
        },
        context=ACME,
    )
    assert other.status is Status.SUCCESS and other.content.rows_affected == 3
    assert db.rows(f"SELECT status FROM {db.prefix}orders WHERE tenant_id = 'globex' ORDER BY id") == [
        ("new",),
        ("paid",),
    ]
    deleted = gateway.invoke(
        "sql_write.shop.execute",
        {"sql": "DELETE FROM orders WHERE total > 0", "audit_as": "Clean"},
        context=GLOBEX,
    )
    assert deleted.content.rows_affected == 2
    assert db.rows(f"SELECT count(*) FROM {db.prefix}orders WHERE tenant_id = 'acme'") == [(3,)]


def test_inserts_carry_the_callers_tenant(db: TestDatabase) -> None:
    """An INSERT gets the context's tenant in the tenant column; the model cannot name it."""
    gateway = _writer(db)
    result = gateway.invoke(
        "sql_write.shop.execute",
        {
            "sql": "INSERT INTO orders (customer, total, status) VALUES (:c, 1, 'new'), ('dee', 2, 'new')",
            "params": {"c": "cat"},
            "audit_as": "Add",
        },
        context=ACME,
    )
    assert result.status is Status.SUCCESS and result.content.rows_affected == 2
    assert db.rows(
        f"SELECT customer, tenant_id FROM {db.prefix}orders WHERE customer IN ('cat', 'dee') ORDER BY 1"
    ) == [
        ("cat", "acme"),
        ("dee", "acme"),
    ]
    named = gateway.invoke(
        "sql_write.shop.execute",
        {
            "sql": "INSERT INTO orders (customer, total, status, tenant_id) VALUES ('x', 1, 'x', 'globex')",
            "audit_as": "Add",
        },
        context=ACME,
    )
    assert (named.status, named.reason_code, named.attempts) == (Status.DENIED, "SQL_TENANT_COLUMN", 0)


def test_a_write_reading_another_table_reads_the_callers_rows(db: TestDatabase) -> None:
    """The subquery of a write is filtered too: acme cannot use globex's customers to pick rows."""
    gateway = _writer(db)
    result = gateway.invoke(
        "sql_write.shop.execute",
        {
            "sql": "UPDATE orders SET status = 'vip' WHERE customer IN (SELECT name FROM customers)",
            "audit_as": "Mark VIPs",
        },
        context=ACME,
    )
    assert result.status is Status.SUCCESS and result.content.rows_affected == 1
    assert db.rows(f"SELECT customer FROM {db.prefix}orders WHERE status = 'vip'") == [("ann",)]
