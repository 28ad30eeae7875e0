"""The audit trail binds the normalised statement and its parameters, and summarises results.

INTENT_DECLARED summarises what governance decided on (database, kind,
tables, the normalised SQL, the parameters, secret-looking ones masked);
INVOCATION_RESPONSE holds the row count and the SHA-256 of the rows, never
a row. No value of any row, and no secret parameter, is in any event.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from sql_support import ACK, ACME, APPROVER, SECRETS, TestDatabase

from toolbox import Governance, Status, Tools
from toolbox.audit import AuditTrail, EventType, MemorySink, Redaction, verify_chain

ROW_VALUES = ("5500-0000-0000-0004", "bob", "shipped", "2026-01-05")


def _events(sink: MemorySink) -> list[dict[str, object]]:
    return [e.model_dump(mode="json") for e in sink.read_trace(ACME.run_id)]


def test_a_query_is_audited_by_its_statement_and_summarised_by_its_rows(reads: TestDatabase) -> None:
    """Intent: the normalised SQL and parameters. Response: rows=, bytes=, the hash of the rows."""
    sink = MemorySink()
    gateway = reads.gateway(sink=sink)
    sql = "select   customer, total from orders -- who paid\n where total > :min order by total"
    result = gateway.invoke(
        "sql.shop.query", {"sql": sql, "params": {"min": 50}, "purpose": "Top"}, context=ACME
    )
    assert result.status is Status.SUCCESS
    events = sink.read_trace(ACME.run_id)
    intent = next(e for e in events if e.type is EventType.INTENT_DECLARED)
    recorded = json.loads(intent.payload_summary or "{}")
    assert recorded["params"] == {"min": 50}
    assert recorded["sql"] == (  # as checked: kind and tables, then formatted; the comment is gone
        "-- SELECT orders\nSELECT\n  customer,\n  total\nFROM orders\n"
        "WHERE\n  total > :min\nORDER BY\n  total"
    )
    response = next(e for e in events if e.type is EventType.INVOCATION_RESPONSE)
    content = result.content
    assert response.payload_summary == f"rows=3 columns=2 bytes={content.result_bytes}"
    assert response.payload_hash == content.result_sha256
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    digest = hashlib.sha256(encode(list(content.columns)).encode())
    for row in content.rows:
        digest.update(b"\n" + encode(list(row)).encode())
    assert digest.hexdigest() == response.payload_hash  # anyone holding the rows can prove them
    stored = json.dumps(_events(sink))
    assert "bob" not in stored and '"cy"' not in stored  # no row value stored
    assert verify_chain(events) == []


def test_secret_parameters_are_masked_in_the_audit_trail(reads: TestDatabase) -> None:
    """A parameter named like a secret is bound and used, but stored masked (approvals show it masked)."""
    sink = MemorySink()
    gateway = reads.gateway(sink=sink)
    result = gateway.invoke(
        "sql.shop.query",
        {
            "sql": "SELECT id FROM orders WHERE customer = :api_key",
            "params": {"api_key": "sk-live-9f8e7d"},
            "purpose": "x",
        },
        context=ACME,
    )
    assert result.status is Status.SUCCESS
    assert "sk-live-9f8e7d" not in json.dumps(_events(sink))


def test_no_audit_event_holds_a_row(db: TestDatabase) -> None:
    """Across reads and a write with RETURNING, no stored event holds a row's value."""
    sink = MemorySink()
    policy = db.policy(allow=("sql.shop", "sql_write.shop"), writes={"requires_approval": False})
    gateway = db.gateway(policy=policy, sink=sink, env=db.env(**ACK))
    for sql in ("SELECT * FROM orders", "SELECT c.name FROM customers c"):
        assert (
            gateway.invoke("sql.shop.query", {"sql": sql, "purpose": "All"}, context=ACME).status
            is Status.SUCCESS
        )
    write = gateway.invoke(
        "sql_write.shop.execute",
        {
            "sql": "UPDATE orders SET status = 'audited' WHERE id = 1 RETURNING customer, created_at",
            "audit_as": "Mark",
        },
        context=ACME,
    )
    assert write.status is Status.SUCCESS and write.content.rows_affected == 1
    stored = json.dumps(_events(sink))
    for value in (*ROW_VALUES, *SECRETS):
        assert value not in stored
    responses = [e for e in sink.read_trace(ACME.run_id) if e.type is EventType.INVOCATION_RESPONSE]
    assert responses[-1].payload_summary.endswith("rows_affected=1")


@pytest.mark.parametrize(("mode", "summary"), [("HASH", False), ("NONE", False), ("SUMMARY", True)])
def test_the_trails_payload_mode_applies(reads: TestDatabase, mode: str, summary: bool) -> None:
    """HASH keeps only hashes, NONE nothing, SUMMARY both."""
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None, redaction=Redaction.of(payload=mode))
    with Tools.load(
        ACME, policy=reads.policy(), env=reads.env(), governance=Governance(audit=trail)
    ) as tools:
        tools.get("sql.shop").query("SELECT count(*) AS n FROM orders").purpose("Count").execute()
    (response,) = [e for e in sink.read_trace(ACME.run_id) if e.type is EventType.INVOCATION_RESPONSE]
    assert (response.payload_summary is not None) is summary
    assert (response.payload_hash is not None) is (mode != "NONE")


def test_the_typed_door_records_the_statement_params_and_rows_summary(reads: TestDatabase) -> None:
    """Typed calls after the first take the inline path: the same records, the params as called
    (a later change to the caller's dict is not recorded), a secret parameter masked."""
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None)
    sql = "SELECT customer FROM orders WHERE customer = :api_key OR id = :id"
    with Tools.load(
        ACME, policy=reads.policy(), env=reads.env(), governance=Governance(audit=trail)
    ) as tools:
        shop = tools.get("sql.shop")
        results = []
        for _ in range(3):
            params = {"api_key": "sk-live-9f8e7d", "id": 2}
            results.append(shop.query(sql, params).purpose("Look up").execute())
            params["id"] = 999  # after the call: what was recorded stays as it was called
    events = sink.read_trace(ACME.run_id)
    intents = [json.loads(e.payload_summary or "{}") for e in events if e.type is EventType.INTENT_DECLARED]
    assert [i["params"] for i in intents] == [{"api_key": "[REDACTED]", "id": 2}] * 3
    responses = [e for e in events if e.type is EventType.INVOCATION_RESPONSE]
    assert [(e.payload_summary, e.payload_hash) for e in responses] == [
        (f"rows={r.row_count} columns=1 bytes={r.result_bytes}", r.result_sha256) for r in results
    ]
    assert "sk-live-9f8e7d" not in json.dumps(_events(sink))
    assert verify_chain(events) == []


def test_rows_are_hashed_as_the_standard_json_encoder_writes_them() -> None:
    """The encoder made once writes what `json.JSONEncoder` writes; the cached column digest is the same."""
    from toolbox_sql._result import _ENCODE, collect, json_value

    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    values = [1, -(2**70), 1.5, 1e300, 'é " \n \u2028 \ud7ff', True, None, [1, [2, "x"]], {"k": {"v": 1}}]
    for value in (values, tuple(values), [json_value(v) for v in values], []):
        assert _ENCODE(value) == standard(value)
    with pytest.raises(ValueError, match="Out of range"):
        _ENCODE([float("nan")])
    rows = [(1, "a"), (2, "b")]
    for _ in range(2):  # the second call copies the cached digest of the columns
        result = collect(["id", "name"], rows, max_rows=10, max_bytes=1000)
        digest = hashlib.sha256(standard(["id", "name"]).encode())
        for row in rows:
            digest.update(b"\n" + standard(list(row)).encode())
        assert result.result_sha256 == digest.hexdigest()


def test_a_result_is_built_as_model_construct_builds_it() -> None:
    """`collect` sets a result's fields directly: the same model as `SqlResult.model_construct`'s."""
    from pydantic import ValidationError

    from toolbox_sql._result import SqlResult, collect

    made = collect(["id", "name"], [(1, "a"), (2, "b")], max_rows=1, max_bytes=1000, rows_affected=3)
    fields = {name: getattr(made, name) for name in SqlResult.model_fields}
    assert fields["truncated"] == "max_rows" and fields["rows"] == ((1, "a"),)
    constructed = SqlResult.model_construct(**fields)
    assert made == constructed and repr(made) == repr(constructed)
    assert made.model_fields_set == constructed.model_fields_set
    assert made.model_dump() == constructed.model_dump()  # the hash and size are excluded
    assert made.model_dump_json() == constructed.model_dump_json()
    assert made.model_copy(update={"row_count": 5}).row_count == 5 and made.row_count == 1
    assert made.__toolbox_audit_summary__() == constructed.__toolbox_audit_summary__()
    with pytest.raises(ValidationError):
        made.row_count = 2  # frozen, as a validated result is


def test_an_approval_request_shows_the_statement_and_masks_secrets(db: TestDatabase) -> None:
    """The approver reads the formatted statement, the tables and kind; a secret parameter is masked."""
    policy = db.policy(allow=("sql.shop", "sql_write.shop"), writes={})
    gateway = db.gateway(policy=policy, env=db.env(**ACK))
    sql = (
        "UPDATE orders SET status = :status, customer = :customer WHERE id = :id AND total > "
        "(SELECT avg(total) FROM orders) AND status <> :password"
    )
    params = {"status": "void", "customer": "ann", "id": 1, "password": "hunter2"}
    asked = gateway.invoke(
        "sql_write.shop.execute", {"sql": sql, "params": params, "audit_as": "Void"}, context=ACME
    )
    shown = dict(asked.approval.arguments)
    assert shown["sql"].startswith(
        "-- UPDATE orders\nUPDATE orders SET status = :status, customer = :customer\nWHERE"
    )
    assert "SELECT\n      AVG(total)" in shown["sql"]  # the whole statement, over several lines
    assert shown["params"]["password"] != "hunter2" and shown["params"]["id"] == 1
    grant = APPROVER.grant(asked.approval, approved_by="lead")
    done = gateway.invoke(
        "sql_write.shop.execute",
        {"sql": sql, "params": params, "audit_as": "Void"},
        context=ACME,
        approval=grant,
    )
    assert done.status is Status.SUCCESS  # the masked copy was for display; the grant binds the real value
