"""Ordinary analytics queries pass, on both engines, and return the caller's tenant's rows only.

The allowlist is there to refuse what is dangerous, not what an analyst
writes every day: aggregates, joins, subqueries, WITH, UNION, CASE, LIKE,
windows, casts, placeholders of every scalar type, literals holding ``%`` and
``:``, and EXPLAIN.
"""

from __future__ import annotations

from typing import Any

import pytest
from sql_support import ACME, TestDatabase

from toolbox import Status

# (id, SQL, params, expected rows as the acme tenant sees them)
QUERIES: list[tuple[str, str, dict[str, Any], list[list[Any]]]] = [
    ("count", "SELECT count(*) AS n FROM orders", {}, [[3]]),
    (
        "where-param",
        "SELECT customer FROM orders WHERE total > :min ORDER BY customer",
        {"min": 100},
        [["ann"], ["cy"]],
    ),
    (
        "group-having",
        "SELECT status, count(*) AS n FROM orders GROUP BY status HAVING count(*) >= 1 ORDER BY status",
        {},
        [["new", 1], ["paid", 1], ["shipped", 1]],
    ),
    (
        "left-join",
        "SELECT o.customer, c.name FROM orders o LEFT JOIN customers c ON c.name = o.customer ORDER BY o.id",
        {},
        [["ann", "ann"], ["bob", None], ["cy", None]],
    ),
    (
        "in-subquery",
        "SELECT customer FROM orders WHERE customer IN (SELECT name FROM customers)",
        {},
        [["ann"]],
    ),
    (
        "exists-correlated",
        "SELECT o.customer FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.name = o.customer)",
        {},
        [["ann"]],
    ),
    (
        "with",
        "WITH big AS (SELECT customer, total FROM orders WHERE total >= 100) "
        "SELECT customer FROM big ORDER BY total DESC",
        {},
        [["cy"], ["ann"]],
    ),
    (
        "union",
        "SELECT customer AS who FROM orders UNION SELECT name FROM customers ORDER BY who",
        {},
        [["ann"], ["bob"], ["cy"]],
    ),
    (
        "case",
        "SELECT customer, CASE WHEN total > 100 THEN 'big' ELSE 'small' END AS size FROM orders ORDER BY id",
        {},
        [["ann", "big"], ["bob", "small"], ["cy", "big"]],
    ),
    (
        "coalesce-null",
        "SELECT coalesce(NULL, customer) AS c FROM orders WHERE id = :id",
        {"id": 1},
        [["ann"]],
    ),
    (
        "like-not-like",
        "SELECT customer FROM orders WHERE customer LIKE 'a%' OR status NOT LIKE '%a%' ORDER BY customer",
        {},
        [["ann"], ["bob"], ["cy"]],
    ),
    (
        "is-not-null-between-in",
        "SELECT customer FROM orders WHERE created_at IS NOT NULL AND total BETWEEN 50 AND 150 "
        "AND status IN ('paid', 'new') ORDER BY customer",
        {},
        [["ann"], ["bob"]],
    ),
    (
        "distinct-limit-offset",
        "SELECT DISTINCT status FROM orders ORDER BY status LIMIT 2 OFFSET 1",
        {},
        [["paid"], ["shipped"]],
    ),
    (
        "window",
        "SELECT customer, row_number() OVER (ORDER BY total DESC) AS r FROM orders ORDER BY r",
        {},
        [["cy", 1], ["ann", 2], ["bob", 3]],
    ),
    ("literal-colon-percent", "SELECT ':x' AS a, '50%' AS b, 'it''s' AS c", {}, [[":x", "50%", "it's"]]),
    (
        "concat-lower-length",
        "SELECT lower(customer) || '!' AS s, length(status) AS n FROM orders WHERE id = 2",
        {},
        [["bob!", 3]],
    ),
    ("arithmetic", "SELECT id * 2 + 1 AS x FROM orders WHERE id = :id", {"id": 3}, [[7]]),
    ("cast", "SELECT CAST(id AS TEXT) || 'x' AS t FROM orders WHERE id = 1", {}, [["1x"]]),
    (
        "scalar-params",
        "SELECT customer FROM orders WHERE status <> :skip AND total >= :low AND id < :high ORDER BY id",
        {"skip": "new", "low": 100.25, "high": 10},
        [["ann"], ["cy"]],
    ),
    (
        "parameter-twice",
        "SELECT customer FROM orders WHERE customer = :who OR status = :who",
        {"who": "bob"},
        [["bob"]],
    ),
    ("no-from", "SELECT 1 AS one", {}, [[1]]),
    (
        "max-min-sum",
        "SELECT max(id) AS hi, min(id) AS lo, count(DISTINCT status) AS k FROM orders",
        {},
        [[3, 1, 3]],
    ),
]


def _plain(value: Any) -> Any:
    """Decimals come back as text on PostgreSQL: compare them as numbers."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


@pytest.mark.parametrize(
    ("sql", "params", "expected"), [pytest.param(s, p, e, id=i) for i, s, p, e in QUERIES]
)
def test_everyday_queries_pass(
    reads: TestDatabase, sql: str, params: dict[str, Any], expected: list[list[Any]]
) -> None:
    """The query runs, on the caller's tenant's rows, and changes nothing."""
    before = reads.checksum()
    gateway = reads.gateway()
    result = gateway.invoke(
        "sql.shop.query", {"sql": sql, "params": params, "purpose": "Report"}, context=ACME
    )
    assert result.status is Status.SUCCESS, result.message
    assert [[_plain(v) for v in row] for row in result.content.rows] == expected
    assert result.content.truncated is None
    assert reads.checksum() == before


def test_explain_passes_and_is_only_a_plan(reads: TestDatabase) -> None:
    """EXPLAIN (PostgreSQL: and VERBOSE; SQLite: QUERY PLAN) shows a plan and runs nothing."""
    before = reads.checksum()
    gateway = reads.gateway()
    forms = ["EXPLAIN SELECT id FROM orders WHERE total > :t"]
    forms.append(
        "EXPLAIN VERBOSE SELECT id FROM orders"
        if reads.kind == "postgres"
        else "EXPLAIN QUERY PLAN SELECT id FROM orders"
    )
    for sql in forms:
        params = {"t": 1} if ":t" in sql else {}
        result = gateway.invoke(
            "sql.shop.query", {"sql": sql, "params": params, "purpose": "Plan"}, context=ACME
        )
        assert result.status is Status.SUCCESS, result.message
        assert result.content.row_count > 0
    assert reads.checksum() == before


def test_dates_in_each_dialect(reads: TestDatabase) -> None:
    """Date functions of each engine's own dialect are allowed by the default list."""
    gateway = reads.gateway()
    sql = (
        "SELECT date_trunc('month', CAST(created_at AS TIMESTAMP)) AS m FROM orders WHERE id = 1"
        if reads.kind == "postgres"
        else "SELECT strftime('%Y-%m', created_at) AS m FROM orders WHERE id = 1"
    )
    result = gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "By month"}, context=ACME)
    assert result.status is Status.SUCCESS, result.message
    assert str(result.content.rows[0][0]).startswith("2026-01")


def test_star_expands_to_the_profile_columns(reads: TestDatabase) -> None:
    """SELECT * returns the allowed columns only: no card number, no tenant."""
    gateway = reads.gateway()
    result = gateway.invoke("sql.shop.query", {"sql": "SELECT * FROM orders", "purpose": "All"}, context=ACME)
    assert result.status is Status.SUCCESS
    assert result.content.columns == ("id", "customer", "total", "status", "created_at")
    o = gateway.invoke("sql.shop.query", {"sql": "SELECT o.* FROM orders o", "purpose": "All"}, context=ACME)
    assert o.content.columns == result.content.columns
