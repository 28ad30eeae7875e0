"""Hostile SQL, as a model might send it, against real PostgreSQL and SQLite: every statement is refused.

For each input, on each engine: the by-name call is DENIED with the expected
reason code, the message names the offending node, the tool's code ran zero
times (nothing reached the database), the audit trail holds the DENY
decision, and a checksum of every table, the schema and the sequences is the
same afterwards. The typed door refuses the same inputs with the same codes.
"""

from __future__ import annotations

import pytest
from sql_support import ACK, ACME, TestDatabase

from toolbox import Status, Tools
from toolbox.audit import EventType, MemorySink
from toolbox_sql import SqlDeniedError

UNPARSABLE = "SQL_UNPARSABLE"
ONE = "SQL_NOT_ONE_STATEMENT"
STATEMENT = "SQL_STATEMENT_NOT_ALLOWED"
CONSTRUCT = "SQL_CONSTRUCT_NOT_ALLOWED"
TABLE = "SQL_TABLE_NOT_ALLOWED"
COLUMN = "SQL_COLUMN_NOT_ALLOWED"
FUNCTION = "SQL_FUNCTION_NOT_ALLOWED"

# (case id, SQL, reason codes accepted: one engine's parser may classify a text differently, never allow it)
HOSTILE: list[tuple[str, str, set[str]]] = [
    # stacked statements, and comments hiding a second one
    ("stacked", "SELECT id FROM orders; DROP TABLE orders", {ONE}),
    ("stacked-trailing", "SELECT id FROM orders; DELETE FROM orders;", {ONE}),
    ("line-comment-hides", "SELECT id FROM orders -- just a comment\n; DELETE FROM orders", {ONE}),
    ("block-comment-hides", "SELECT id FROM orders /* ; */ ; DELETE FROM orders", {ONE}),
    ("comment-then-statement", "/* SELECT 1 */ DELETE FROM orders", {STATEMENT}),
    ("fullwidth-semicolon", "SELECT id FROM orders\uff1b DROP TABLE orders", {UNPARSABLE, ONE}),
    ("backslash-quote", "SELECT id FROM orders WHERE customer = 'a\\'; DELETE FROM orders; --'", {ONE}),
    # writes in disguise
    ("select-into", "SELECT * INTO pwned_copy FROM orders", {CONSTRUCT}),
    ("select-into-temp", "SELECT id INTO TEMP pwned_tmp FROM orders", {CONSTRUCT}),
    ("writable-cte-delete", "WITH d AS (DELETE FROM orders RETURNING id) SELECT id FROM d", {CONSTRUCT}),
    (
        "writable-cte-update",
        "WITH u AS (UPDATE orders SET status = 'x' RETURNING id) SELECT id FROM u",
        {CONSTRUCT},
    ),
    (
        "writable-cte-insert",
        "WITH i AS (INSERT INTO orders (customer) VALUES ('x') RETURNING id) SELECT 1",
        {CONSTRUCT},
    ),
    ("for-update", "SELECT id FROM orders FOR UPDATE", {CONSTRUCT}),
    ("delete", "DELETE FROM orders", {STATEMENT}),
    ("update", "UPDATE orders SET status = 'x'", {STATEMENT}),
    ("insert", "INSERT INTO orders (customer, total, status) VALUES ('x', 1, 'x')", {STATEMENT}),
    ("drop", "DROP TABLE orders", {STATEMENT}),
    ("truncate", "TRUNCATE orders", {STATEMENT}),
    ("create", "CREATE TABLE pwned (a INT)", {STATEMENT}),
    ("alter", "ALTER TABLE orders ADD COLUMN pwned INT", {STATEMENT}),
    ("grant", "GRANT ALL ON orders TO PUBLIC", {STATEMENT, UNPARSABLE}),
    ("transaction", "BEGIN; DELETE FROM orders; COMMIT", {ONE}),
    ("do-block", "DO $$ BEGIN DELETE FROM orders; END $$", {STATEMENT, UNPARSABLE}),
    ("call", "CALL pwned()", {STATEMENT}),
    ("vacuum", "VACUUM", {STATEMENT, UNPARSABLE}),
    ("lock", "LOCK TABLE orders", {STATEMENT, UNPARSABLE}),
    ("prepare", "PREPARE p AS DELETE FROM orders", {STATEMENT, UNPARSABLE}),
    ("listen-notify", "NOTIFY pwned, 'x'", {STATEMENT, UNPARSABLE}),
    # functions with side effects, sleeps, files, other servers
    ("pg-sleep", "SELECT pg_sleep(100)", {FUNCTION}),
    ("pg-sleep-in-where", "SELECT id FROM orders WHERE pg_sleep(100) IS NOT NULL", {FUNCTION}),
    ("pg-sleep-as-table", "SELECT id FROM orders, pg_sleep(100)", {FUNCTION, TABLE}),
    ("qualified-sleep", "SELECT pg_catalog.pg_sleep(100)", {FUNCTION, CONSTRUCT}),
    ("nextval", "SELECT nextval('orders_id_seq')", {FUNCTION}),
    ("set-config", "SELECT set_config('default_transaction_read_only', 'off', false)", {FUNCTION}),
    ("pg-read-file", "SELECT pg_read_file('/etc/passwd')", {FUNCTION}),
    ("lo-import", "SELECT lo_import('/etc/passwd')", {FUNCTION}),
    ("dblink", "SELECT * FROM dblink('host=127.0.0.1', 'DROP TABLE orders') AS t(a int)", {FUNCTION, TABLE}),
    ("terminate", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity", {FUNCTION, TABLE}),
    ("load-extension", "SELECT load_extension('/tmp/evil.so')", {FUNCTION}),
    ("readfile", "SELECT readfile('/etc/passwd')", {FUNCTION}),
    ("writefile", "SELECT writefile('/tmp/pwned', 'x')", {FUNCTION}),
    ("version", "SELECT version()", {FUNCTION}),
    ("current-setting", "SELECT current_setting('data_directory')", {FUNCTION}),
    ("regclass-cast", "SELECT 'orders'::regclass", {CONSTRUCT, "SQL_TYPE_NOT_ALLOWED"}),
    # system catalogs and tables outside the profile
    ("pg-authid", "SELECT rolname, rolpassword FROM pg_catalog.pg_authid", {TABLE}),
    ("pg-user", "SELECT usename FROM pg_user", {TABLE}),
    ("pg-shadow", "SELECT * FROM pg_shadow", {TABLE}),
    ("information-schema", "SELECT table_name FROM information_schema.tables", {TABLE}),
    ("sqlite-master", "SELECT sql FROM sqlite_master", {TABLE}),
    ("sqlite-schema", "SELECT name FROM main.sqlite_schema", {TABLE}),
    ("temp-schema", "SELECT id FROM temp.orders", {TABLE}),
    ("other-schema", "SELECT id FROM public_other.orders", {TABLE}),
    ("payroll", "SELECT salary FROM payroll", {TABLE}),
    ("union-payroll", "SELECT customer FROM orders UNION SELECT employee FROM payroll", {TABLE}),
    ("subquery-payroll", "SELECT id FROM orders WHERE total < (SELECT max(salary) FROM payroll)", {TABLE}),
    ("cte-payroll", "WITH p AS (SELECT salary FROM payroll) SELECT salary FROM p", {TABLE}),
    ("cte-shadows-table", "WITH orders AS (SELECT salary AS id FROM payroll) SELECT id FROM orders", {TABLE}),
    # columns outside the profile, quoting and unicode tricks
    ("hidden-column", "SELECT card_number FROM orders", {COLUMN}),
    ("tenant-column", "SELECT tenant_id FROM orders", {COLUMN}),
    ("tenant-in-where", "SELECT id FROM orders WHERE tenant_id = 'globex'", {COLUMN}),
    ("quoted-hidden", 'SELECT "card_number" FROM "orders"', {COLUMN}),
    ("upper-quoted", 'SELECT "CARD_NUMBER" FROM orders', {COLUMN}),
    ("email", "SELECT email FROM customers", {COLUMN}),
    ("rowid", "SELECT rowid FROM orders", {COLUMN}),
    ("ctid", "SELECT ctid, xmin FROM orders", {COLUMN}),
    ("cyrillic-table", "SELECT id FROM \u043erders", {TABLE, UNPARSABLE}),
    ("homoglyph-quoted", 'SELECT id FROM "ord\u0435rs"', {TABLE}),
    ("zero-width", "SELECT id FROM ord\u200bers", {TABLE, UNPARSABLE}),
    ("unicode-escape-identifier", 'SELECT U&"card\\005fnumber" FROM orders', {COLUMN, UNPARSABLE, CONSTRUCT}),
    ("dollar-quoted-semicolon", "SELECT $$;$$; DROP TABLE orders", {ONE, UNPARSABLE}),
    # EXPLAIN that runs the statement
    ("explain-analyze-delete", "EXPLAIN ANALYZE DELETE FROM orders", {CONSTRUCT}),
    ("explain-analyze-paren", "EXPLAIN (ANALYZE) DELETE FROM orders", {CONSTRUCT}),
    ("explain-analyze-select", "EXPLAIN ANALYZE SELECT id FROM orders", {CONSTRUCT}),
    ("explain-delete", "EXPLAIN DELETE FROM orders", {CONSTRUCT}),
    ("explain-stacked", "EXPLAIN SELECT id FROM orders; DELETE FROM orders", {ONE}),
    # session and server state
    ("set-role", "SET ROLE postgres", {STATEMENT}),
    ("session-authorization", "SET SESSION AUTHORIZATION postgres", {STATEMENT}),
    ("reset-role", "RESET ROLE", {STATEMENT, UNPARSABLE}),
    ("read-write", "SET TRANSACTION READ WRITE", {STATEMENT}),
    ("default-read-only-off", "SET default_transaction_read_only = off", {STATEMENT}),
    ("copy-program", "COPY orders TO PROGRAM 'touch /tmp/pwned'", {STATEMENT}),
    ("copy-from-file", "COPY orders FROM '/etc/passwd'", {STATEMENT}),
    ("copy-query", "COPY (SELECT id FROM orders) TO STDOUT", {STATEMENT, UNPARSABLE}),
    ("attach", "ATTACH DATABASE 'pwned.db' AS pwned", {STATEMENT, UNPARSABLE}),
    ("detach", "DETACH DATABASE main", {STATEMENT, UNPARSABLE}),
    ("pragma-writable-schema", "PRAGMA writable_schema = 1", {STATEMENT}),
    ("pragma-query-only", "PRAGMA query_only = 0", {STATEMENT}),
    ("pragma-table-info", "PRAGMA table_info(orders)", {STATEMENT}),
    # placeholders that are not the caller's to bind
    ("positional", "SELECT id FROM orders WHERE id = ?", {CONSTRUCT}),
    ("dollar-param", "SELECT id FROM orders WHERE id = $1", {CONSTRUCT, COLUMN}),
    ("tenant-param", "SELECT id FROM orders WHERE customer = :toolbox_tenant", {CONSTRUCT}),
    (
        "recursive",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r",
        {CONSTRUCT},
    ),
    # bad, huge, nested, encoded
    ("empty", "", {ONE}),
    ("only-comment", "-- nothing", {ONE}),
    ("nul", "SELECT id FROM orders\x00; DROP TABLE orders", {UNPARSABLE}),
    ("unterminated", "SELECT 'abc FROM orders", {UNPARSABLE}),
    ("nested", "SELECT " + "(" * 300 + "1" + ")" * 300, {UNPARSABLE}),
    ("huge", "SELECT id FROM orders WHERE customer IN (" + ",".join(["'x'"] * 10_000) + ")", {UNPARSABLE}),
    ("binary-garbage", "\udcff\udcfe SELECT", {UNPARSABLE}),
]


@pytest.mark.parametrize(
    ("sql", "codes"), [pytest.param(sql, codes, id=case) for case, sql, codes in HOSTILE]
)
def test_hostile_query_is_refused_by_name(
    reads: TestDatabase, runs: list[str], sql: str, codes: set[str]
) -> None:
    """By name: DENIED, the expected code, zero runs, the DENY decision audited, nothing changed."""
    before = reads.checksum()
    sink = MemorySink()
    gateway = reads.gateway(sink=sink)
    result = gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "Probe"}, context=ACME)
    assert result.status is Status.DENIED, result
    assert result.reason_code in codes, (result.reason_code, result.message)
    assert result.rule is not None and result.rule.startswith("sql:")
    assert result.attempts == 0 and runs == []
    assert result.message
    decisions = [
        e
        for e in sink.read_trace(ACME.run_id)
        if e.type is EventType.GOVERNANCE_DECISION and e.decision == "DENY"
    ]
    assert [(e.reason_code, e.tool) for e in decisions] == [(result.reason_code, "sql.shop")]
    assert result.rule in decisions[0].rule_ids
    assert reads.checksum() == before


@pytest.mark.parametrize(
    ("sql", "codes"), [pytest.param(sql, codes, id=case) for case, sql, codes in HOSTILE]
)
def test_hostile_query_is_refused_typed(
    reads: TestDatabase, runs: list[str], sql: str, codes: set[str]
) -> None:
    """Typed door: SqlDeniedError before any intent, the same codes, in the trace and the audit trail."""
    sink = MemorySink()
    gateway = reads.gateway(sink=sink)
    with Tools(gateway.catalog, ACME) as tools, pytest.raises(SqlDeniedError) as caught:
        tools.get("sql.shop").query(sql)
    assert caught.value.reason_code in codes
    assert runs == []
    assert [d.reason_code for d in ACME.trace.denials("sql.shop")][-1] == caught.value.reason_code
    decisions = [e for e in sink.read_trace(ACME.run_id) if e.type is EventType.GOVERNANCE_DECISION]
    assert decisions[-1].decision == "DENY" and decisions[-1].reason_code == caught.value.reason_code


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id FROM orders; DELETE FROM orders",
        "WITH d AS (DELETE FROM orders RETURNING id) SELECT id FROM d",
        "DROP TABLE orders",
        "SELECT pg_sleep(100)",
        "EXPLAIN ANALYZE DELETE FROM orders",
        "SET ROLE postgres",
    ],
)
def test_hostile_statements_do_not_pass_execute_either(
    reads: TestDatabase, runs: list[str], sql: str
) -> None:
    """execute refuses the same statements (its own rules: one write of an allowed table)."""
    before = reads.checksum()
    policy = reads.policy(allow=("sql.shop", "sql_write.shop"), writes={})
    gateway = reads.gateway(policy=policy, env=reads.env(**ACK))
    result = gateway.invoke("sql_write.shop.execute", {"sql": sql, "audit_as": "Probe"}, context=ACME)
    assert result.status is Status.DENIED and result.reason_code is not None
    assert result.reason_code.startswith("SQL_") and result.attempts == 0 and runs == []
    assert reads.checksum() == before


def test_nested_comment_is_read_as_each_engine_reads_it(reads: TestDatabase, runs: list[str]) -> None:
    """PostgreSQL nests block comments, SQLite does not; sqlglot reads each dialect the same way.

    On PostgreSQL the text is one SELECT (the DELETE is inside the comment), and
    what runs is that SELECT regenerated without the comment; SQLite sees a
    second statement (and a stray ``*/``) and refuses the text. Either way nothing is deleted.
    """
    before = reads.checksum()
    gateway = reads.gateway()
    sql = "SELECT id FROM orders /* /* */ ; DELETE FROM orders; */"
    result = gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "Probe"}, context=ACME)
    if reads.kind == "postgres":
        assert result.status is Status.SUCCESS and result.content.row_count == 3
        assert runs == ["SELECT"]  # one statement ran: the SELECT, regenerated without the comment
    else:
        assert result.status is Status.DENIED and result.reason_code in (ONE, UNPARSABLE) and runs == []
    assert reads.checksum() == before
