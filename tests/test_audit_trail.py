"""The audit trail: events, modes, faults, ordering, redaction, read-back."""

import asyncio
import json
import threading
import time

import pytest

from audit_faults import FlakySink
from governed_tools import PROVIDER, Billing
from toolbox import ExecutionContext, Gateway, Governance, Status, ToolPolicy, ToolPolicyDeniedError
from toolbox.audit import (
    AuditMode,
    AuditTrail,
    EventType,
    JsonlSink,
    MemorySink,
    Redaction,
    verify_chain,
)
from toolbox.errors import AuditIncompleteError, ConfigurationError
from toolbox.governance import Decision, RetryPolicy

LOOKUP = {"invoice_id": 7, "purpose": "Answer the customer"}
CHARGE = {"amount": 40, "audit_as": "Charge the approved order"}


def gateway_with(trail, **governance):
    governance.setdefault("retry", RetryPolicy(base_delay=0, max_delay=0))
    return Gateway.load(
        policy=ToolPolicy.standard().allow("billing"),
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(audit=trail, **governance),
    )


def ctx(**fields):
    fields.setdefault("tenant", "tenant-a")
    fields.setdefault("principal", "alice")
    return ExecutionContext(**fields)


def types(records):
    return [(r.type.value, r.status) for r in records]


def test_success_events_in_order(tmp_path):
    """A successful call: intent, decision, request, response; sequence 1..4; chain intact."""
    sink = MemorySink()
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")), ctx()
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    records = sink.read_trace(context.run_id)
    assert types(records) == [
        ("INTENT_DECLARED", None),
        ("GOVERNANCE_DECISION", None),
        ("INVOCATION_REQUEST", None),
        ("INVOCATION_RESPONSE", "SUCCESS"),
    ]
    assert [r.sequence for r in records] == [1, 2, 3, 4]
    first = records[0]
    assert (first.tool, first.operation, first.intent_kind, first.intent_text) == (
        "billing",
        "lookup_invoice",
        "purpose",
        "Answer the customer",
    )
    assert (first.tenant, first.principal, first.risk, first.effect) == (
        "tenant-a",
        "alice",
        "EXTERNAL_RESOURCE",
        "READ_ONLY",
    )
    assert first.correlation_id == context.correlation_id and first.payload_hash
    assert records[3].attempt == 1 and records[3].duration is not None
    assert verify_chain(records) == []


def test_both_doors_emit_the_same_events(tmp_path):
    """Typed and by-name calls of one operation leave the same event shapes."""
    sink = MemorySink()
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=None)), ctx()
    gateway.tools_for(context).get(Billing).lookup_invoice(7).purpose("Same").execute()
    gateway.invoke("billing.lookup_invoice", {"invoice_id": 7, "purpose": "Same"}, context=context)
    records = sink.read_trace(context.run_id)
    volatile = {"event_id", "sequence", "timestamp", "previous_hash", "hash", "duration"}
    typed = [{k: v for k, v in r.model_dump().items() if k not in volatile} for r in records[:4]]
    by_name = [{k: v for k, v in r.model_dump().items() if k not in volatile} for r in records[4:]]
    assert typed == by_name


def test_every_outcome_is_recorded(tmp_path):
    """Denials of every kind, invalid arguments, tool exceptions and untrusted calls are events."""
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None)
    gateway = gateway_with(
        trail, authorizers=[lambda t, o, c, a: Decision.deny("no") if o == "charge" else Decision.allow()]
    )
    context = ctx()
    gateway.tools_for(context).get(Billing).script = [KeyError("bug")]
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)  # tool exception
    gateway.invoke("billing.lookup_invoice", {"purpose": "x"}, context=context)  # invalid
    gateway.invoke("billing.charge", CHARGE, context=context)  # auth denied
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=None)  # untrusted
    denied_tools = Gateway.load(
        providers=[PROVIDER], discover=False, env={}, governance=Governance(audit=trail)
    )
    with pytest.raises(ToolPolicyDeniedError):
        denied_tools.tools_for(context).get(Billing)  # policy denial at get()
    responses = [
        (r.status, r.reason_code)
        for r in sink.read_trace(context.run_id)
        if r.type is EventType.INVOCATION_RESPONSE
    ]
    assert responses == [
        ("ERROR", "KeyError"),
        ("INVALID_ARGUMENTS", "INVALID_ARGUMENTS"),
        ("DENIED", "AUTH_DENIED"),
    ]
    decisions = [
        (r.decision, r.reason_code)
        for r in sink.read_trace(context.run_id)
        if r.type is EventType.GOVERNANCE_DECISION
    ]
    assert ("DENY", "AUTH_DENIED") in decisions and ("INVALID", "INVALID_ARGUMENTS") in decisions
    assert ("DENY", "POLICY_DENIED") in decisions
    untrusted = sink.read_trace("unattributed")
    assert [(r.type.value, r.reason_code) for r in untrusted] == [("SYSTEM_ERROR", "NO_TRUSTED_CONTEXT")]


def test_strict_failed_write_before_is_denied(tmp_path):
    """STRICT: a failed write before the operation is DENIED/AUDIT_UNAVAILABLE with zero executions."""
    sink = FlakySink()
    sink.failing = True
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")), ctx()
    tool = gateway.tools_for(context).get(Billing)
    result = gateway.invoke("billing.charge", CHARGE, context=context)
    assert (result.status, result.reason_code, tool.calls) == (Status.DENIED, "AUDIT_UNAVAILABLE", [])
    kept = [json.loads(line) for line in (tmp_path / "fb.jsonl").read_text().splitlines()]
    assert [e["type"] for e in kept][-1] == "INVOCATION_RESPONSE" and kept[-1][
        "reason_code"
    ] == "AUDIT_UNAVAILABLE"


def test_strict_failed_write_after_keeps_status_and_fallback(tmp_path):
    """STRICT: a failed write after the operation keeps its status, flags it, and keeps the event."""
    sink = FlakySink()
    sink.fail_after = 1  # the opening batch is stored, the response is not
    fallback = tmp_path / "fb.jsonl"
    trail = AuditTrail(sink, fallback_path=fallback)
    gateway, context = gateway_with(trail), ctx()
    tool = gateway.tools_for(context).get(Billing)
    result = gateway.invoke("billing.charge", CHARGE, context=context)
    assert (result.status, result.audit_failed, len(tool.calls)) == (Status.SUCCESS, True, 1)
    assert json.loads(fallback.read_text().splitlines()[0])["type"] == "INVOCATION_RESPONSE"
    sink.fail_after = None
    assert trail.replay_fallback() == 1
    assert fallback.read_text() == ""
    assert types(sink.read_trace(context.run_id))[-1] == ("INVOCATION_RESPONSE", "SUCCESS")
    assert verify_chain(sink.read_trace(context.run_id)) == []


def test_strict_typed_door_says_the_effect_happened(tmp_path):
    """The typed door raises AuditIncompleteError, saying the operation ran, with its content."""
    sink = FlakySink()
    sink.fail_after = 1
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")), ctx()
    tool = gateway.tools_for(context).get(Billing)
    with pytest.raises(AuditIncompleteError, match="effect happened") as info:
        tool.charge(40).audit_as("Charge").execute()
    assert (info.value.status, info.value.content) == (
        "SUCCESS",
        {"ok": True, "amount": 40, "currency": "EUR"},
    )
    assert len(tool.calls) == 1


def test_best_effort_logs_and_continues(tmp_path, caplog):
    """BEST_EFFORT: a failed write logs a warning and the call runs normally."""
    sink = FlakySink()
    sink.failing = True
    gateway, context = gateway_with(AuditTrail(sink, mode="BEST_EFFORT", fallback_path=None)), ctx()
    tool = gateway.tools_for(context).get(Billing)
    with caplog.at_level("WARNING", logger="toolbox.audit"):
        result = gateway.invoke("billing.charge", CHARGE, context=context)
    assert (result.status, result.audit_failed, len(tool.calls)) == (Status.SUCCESS, False, 1)
    assert "audit write failed" in caplog.text


def test_async_drains_on_close(tmp_path):
    """ASYNC: events are written in the background; close() drains every accepted event, in order."""
    sink = MemorySink()
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=None)
    gateway, context = gateway_with(trail), ctx()
    for _ in range(50):
        assert gateway.invoke("billing.lookup_invoice", LOOKUP, context=context).status is Status.SUCCESS
    trail.close()
    records = sink.read_trace(context.run_id)
    assert [r.sequence for r in records] == list(range(1, 201))
    assert verify_chain(records) == []


def test_async_queue_full_fails_closed(tmp_path):
    """ASYNC with the queue full: the call is refused with zero executions; accepted events survive."""
    gate = threading.Event()

    class SlowSink(FlakySink):
        def append(self, events):
            gate.wait(5)
            super().append(events)

    sink = SlowSink()
    trail = AuditTrail(sink, mode="ASYNC", queue_size=2, fallback_path=tmp_path / "fb.jsonl")
    gateway, context = gateway_with(trail), ctx()
    tool = gateway.tools_for(context).get(Billing)
    results = [gateway.invoke("billing.lookup_invoice", LOOKUP, context=context) for _ in range(6)]
    refused = [r for r in results if r.reason_code == "AUDIT_UNAVAILABLE"]
    assert refused, "a full queue must refuse calls"
    assert len(tool.calls) == sum(r.status is Status.SUCCESS for r in results)
    gate.set()
    trail.close()
    stored = sink.inner.read_trace(context.run_id)
    assert [r.sequence for r in stored] == list(range(1, len(stored) + 1))
    accepted_requests = sum(1 for r in stored if r.type is EventType.INVOCATION_REQUEST)
    assert accepted_requests == len(tool.calls)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the crash is the point
def test_async_dead_writer_fails_closed(tmp_path):
    """ASYNC: once the writer thread is gone, the next invocation is refused with zero executions."""
    trail = AuditTrail(MemorySink(), mode="ASYNC", fallback_path=None)
    gateway, context = gateway_with(trail), ctx()
    trail._queue.put(_Crash())  # the writer dies on a batch it cannot handle
    trail._writer.join(5)
    assert not trail.healthy
    tool = gateway.tools_for(context).get(Billing)
    result = gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    assert (result.reason_code, tool.calls) == ("AUDIT_UNAVAILABLE", [])


class _Crash:
    """Not a list of events: iterating it kills the writer thread."""

    def __iter__(self):
        raise SystemExit


def test_async_failed_write_keeps_events_and_fails_closed(tmp_path):
    """ASYNC: a write that fails in the writer goes to the fallback file; later calls are refused."""
    sink = FlakySink()
    sink.failing = True
    fallback = tmp_path / "fb.jsonl"
    trail = AuditTrail(sink, mode="ASYNC", fallback_path=fallback)
    gateway, context = gateway_with(trail), ctx()
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    trail.flush()
    assert len(fallback.read_text().splitlines()) >= 3
    assert (
        gateway.invoke("billing.lookup_invoice", LOOKUP, context=context).reason_code == "AUDIT_UNAVAILABLE"
    )
    trail.close()


def test_concurrent_threads_and_tasks_one_trace(tmp_path):
    """Concurrent invocations on one trace (threads and asyncio tasks): sequences gap-free, unique."""
    sink = JsonlSink(tmp_path / "audit.jsonl")
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=None)), ctx()
    threads = [
        threading.Thread(
            target=lambda: [
                gateway.invoke("billing.lookup_invoice", LOOKUP, context=context) for _ in range(10)
            ]
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def tasks():
        await asyncio.gather(
            *(gateway.ainvoke("billing.lookup_invoice", LOOKUP, context=context) for _ in range(40))
        )

    asyncio.run(tasks())
    records = sink.read_trace(context.run_id)
    assert [r.sequence for r in records] == list(range(1, 4 * 120 + 1))
    assert len({r.event_id for r in records}) == len(records)
    assert verify_chain(records) == []


def test_redaction_and_hash_before_truncation(tmp_path):
    """Secrets never reach storage; summaries are bounded; the hash covers the full payload."""
    sink = MemorySink()
    trail = AuditTrail(
        sink, fallback_path=None, redaction=Redaction(keys=frozenset({"note"}), max_summary=40)
    )
    gateway, context = gateway_with(trail), ctx()
    long_a = {"invoice_id": 1, "note": "private", "audit_as": "Note"}
    gateway.invoke("billing.update_note", long_a, context=context)
    first = sink.read_trace(context.run_id)[0]
    assert "private" not in first.payload_summary and "[REDACTED]" in first.payload_summary
    a = {"amount": 1, "currency": "E" * 100, "audit_as": "x"}
    b = {"amount": 1, "currency": "E" * 99 + "F", "audit_as": "x"}
    gateway.invoke("billing.charge", a, context=context)
    gateway.invoke("billing.charge", b, context=context)
    intents = [r for r in sink.read_trace(context.run_id) if r.type is EventType.INTENT_DECLARED][1:]
    assert intents[0].payload_summary == intents[1].payload_summary, "both truncated to the same text"
    assert len(intents[0].payload_summary) == 40
    assert intents[0].payload_hash != intents[1].payload_hash, "the hash covers the full payload"


def test_hash_only_and_none_modes():
    """payload=HASH stores only the hash; NONE stores neither."""
    for mode, has_summary, has_hash in (("HASH", False, True), ("NONE", False, False)):
        sink = MemorySink()
        trail = AuditTrail(sink, fallback_path=None, redaction=Redaction.of(payload=mode))
        gateway, context = gateway_with(trail), ctx()
        gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
        first = sink.read_trace(context.run_id)[0]
        assert (first.payload_summary is not None, first.payload_hash is not None) == (has_summary, has_hash)


def test_http_secrets_never_stored():
    """Authorization headers, cookies, userinfo and token query values never reach an event."""
    from toolbox.audit import Redaction as R

    summary, _ = R().payload_fields(
        {
            "headers": {
                "Authorization": "Bearer abc",
                "Cookie": "sid=1",
                "Set-Cookie": "a=b",
                "Proxy-Authorization": "Basic x",
                "X-Api-Key": "k",
            },
            "url": "https://user:pw@api.example.com/x?access_token=t0k&page=2",
            "raw": "Bearer eyJhbGciOi",
        }
    )
    for secret in ("abc", "sid=1", "a=b", "Basic x", '"k"', "pw@", "t0k", "eyJhbGciOi"):
        assert secret not in summary, secret
    assert "page=2" in summary


def test_read_back_is_scoped():
    """Read-back returns only the caller's tenant unless the principal is an auditor."""
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None)
    gateway = gateway_with(trail)
    a, b = ctx(tenant="tenant-a"), ctx(tenant="tenant-b", principal="bob")
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=a)
    gateway.invoke("billing.charge", CHARGE, context=b)
    assert trail.read_trace(b.run_id, context=a) == []
    assert len(trail.read_trace(b.run_id, context=b)) == 4
    auditor = ctx(tenant="ops", principal="carol", roles={"auditor"})
    assert len(trail.read_trace(a.run_id, context=auditor)) == 4
    assert {r.tenant for r in trail.query(context=a)} == {"tenant-a"}
    assert {r.tenant for r in trail.query(context=auditor)} == {"tenant-a", "tenant-b"}
    assert [r.tool for r in trail.query(context=auditor, principal="bob", status="SUCCESS")] == ["billing"]
    assert (
        trail.query(
            context=auditor, since=__import__("datetime").datetime.now(__import__("datetime").timezone.utc)
        )
        == []
    )
    assert trail.verify(a.run_id, context=auditor) == []
    with pytest.raises(PermissionError):
        trail.verify(a.run_id, context=a)


def test_bad_configuration():
    """Unknown modes and non-sinks are configuration errors."""
    with pytest.raises(ConfigurationError, match="unknown audit mode"):
        AuditTrail(MemorySink(), mode="SOMETIMES")
    with pytest.raises(ConfigurationError, match="not an audit sink"):
        AuditTrail(object())  # type: ignore[arg-type]


def test_policy_file_audit_section(tmp_path):
    """[audit] in the policy file builds the trail; its errors name the key."""
    from toolbox.errors import PolicyFileError

    path = tmp_path / "policy.toml"
    store = tmp_path / "audit.jsonl"
    path.write_text(
        f'version = 1\n[allow]\ntools = ["billing"]\n[audit]\nmode = "STRICT"\n'
        f'fallback = "{tmp_path / "fb"}"\n'
        f'[[audit.sinks]]\ntype = "jsonl"\npath = "{store}"\n',
        encoding="utf-8",
    )
    gateway = Gateway.load(policy=ToolPolicy.from_file(path), providers=[PROVIDER], discover=False, env={})
    context = ctx()
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    assert len(JsonlSink(store).read_trace(context.run_id)) == 4
    for text, message in (
        ('version = 1\n[audit]\nmode = "OFTEN"\n[[audit.sinks]]\ntype = "memory"\n', "audit.mode"),
        ("version = 1\n[audit]\nsinks = []\n", "at least one"),
        ('version = 1\n[audit]\n[[audit.sinks]]\ntype = "s3"\n', r"audit.sinks\[0\]"),
        (
            'version = 1\n[audit]\n[[audit.sinks]]\ntype = "postgres"\nurl = "postgresql://u:p@h/db"\n',
            "unknown key",
        ),
    ):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(PolicyFileError, match=message):
            ToolPolicy.from_file(path)


def test_strict_write_happens_before_the_operation():
    """In STRICT mode the request event is stored before the tool runs."""
    sink = MemorySink()
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=None)), ctx()
    seen = []
    gateway.tools_for(context).get(Billing).on_call = lambda: seen.append(
        types(sink.read_trace(context.run_id))
    )
    gateway.invoke("billing.charge", CHARGE, context=context)
    assert seen == [[("INTENT_DECLARED", None), ("GOVERNANCE_DECISION", None), ("INVOCATION_REQUEST", None)]]
    time.sleep(0)


def test_strict_postgres_unreachable_is_denied(tmp_path):
    """STRICT with PostgreSQL unreachable (a closed port): DENIED/AUDIT_UNAVAILABLE, zero executions."""
    from toolbox.audit import PostgresSink

    sink = PostgresSink("postgresql+psycopg://postgres:pw@127.0.0.1:1/test", connect_timeout=2)
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")), ctx()
    tool = gateway.tools_for(context).get(Billing)
    result = gateway.invoke("billing.charge", CHARGE, context=context)
    assert (result.status, result.reason_code, tool.calls) == (Status.DENIED, "AUDIT_UNAVAILABLE", [])
    assert "pw" not in result.message


def test_strict_sqlite_read_only_path_is_denied(tmp_path):
    """STRICT with a SQLite file on an unwritable path: DENIED/AUDIT_UNAVAILABLE, zero executions."""
    from toolbox.audit import SqliteSink

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where a directory should be", encoding="utf-8")
    sink = SqliteSink(blocker / "audit.db")
    gateway, context = gateway_with(AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl")), ctx()
    tool = gateway.tools_for(context).get(Billing)
    result = gateway.invoke("billing.charge", CHARGE, context=context)
    assert (result.status, result.reason_code, tool.calls) == (Status.DENIED, "AUDIT_UNAVAILABLE", [])


def test_strict_sqlite_records_both_doors(tmp_path):
    """The embedded default store keeps a verified chain across typed and by-name calls."""
    from toolbox.audit import SqliteSink

    sink = SqliteSink(tmp_path / "audit.db")
    trail = AuditTrail(sink, fallback_path=None)
    gateway, context = gateway_with(trail), ctx()
    gateway.tools_for(context).get(Billing).charge(5).audit_as("Charge").execute()
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    records = trail.read_trace(context.run_id, context=context)
    assert [r.sequence for r in records] == list(range(1, 9))
    assert verify_chain(records) == []
    trail.close()


def test_role_and_key_lists_must_be_lists():
    """A plain string for auditor_roles or redact_keys is refused (it would be read letter by letter)."""
    with pytest.raises(ConfigurationError, match="auditor_roles"):
        AuditTrail(MemorySink(), auditor_roles="auditor")
    with pytest.raises(ConfigurationError, match="redact_keys"):
        Redaction.of(keys="ssn")
    from toolbox.audit._config import check_config

    with pytest.raises(ConfigurationError, match="auditor_roles"):
        check_config({"auditor_roles": "auditor", "sinks": [{"type": "memory"}]}, source="p")


def test_refused_call_with_failed_audit_is_a_denial_not_an_effect(tmp_path):
    """A refused call whose record could not be written raises the denial, never 'the effect happened'."""
    sink = FlakySink()
    sink.failing = True
    gateway = gateway_with(
        AuditTrail(sink, fallback_path=tmp_path / "fb.jsonl"), authorizers=[lambda *a: Decision.deny("no")]
    )
    context = ctx()
    tool = gateway.tools_for(context).get(Billing)
    with pytest.raises(__import__("toolbox").ToolDeniedError) as info:
        tool.charge(5).audit_as("Charge").execute()
    assert not isinstance(info.value, AuditIncompleteError) and tool.calls == []


def test_unknown_names_and_access_refusals_are_audited_once():
    """Unresolvable names leave an event; a by-name access refusal leaves one decision, not two."""
    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None)
    gateway = Gateway.load(providers=[PROVIDER], discover=False, env={}, governance=Governance(audit=trail))
    context = ctx()
    gateway.invoke("nothing.here", {}, context=context)
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)  # policy-denied by name
    decisions = [
        (r.name, r.reason_code)
        for r in sink.read_trace(context.run_id)
        if r.type is EventType.GOVERNANCE_DECISION
    ]
    assert decisions == [("nothing.here", "TOOL_UNAVAILABLE"), ("billing.lookup_invoice", "POLICY_DENIED")]
    assert context.trace.denials() == [], "the operation record carries the denial"


def test_policy_file_trail_is_shared_and_reachable(tmp_path):
    """Loading one policy twice reuses its trail (one writer per store); gateway.audit exposes it."""
    path = tmp_path / "policy.toml"
    path.write_text(
        f'version = 1\n[allow]\ntools = ["billing"]\n[audit]\nfallback = "{tmp_path / "fb"}"\n'
        f'[[audit.sinks]]\ntype = "jsonl"\npath = "{tmp_path / "a.jsonl"}"\n',
        encoding="utf-8",
    )
    first = Gateway.load(policy=ToolPolicy.from_file(path), providers=[PROVIDER], discover=False, env={})
    second = Gateway.load(policy=ToolPolicy.from_file(path), providers=[PROVIDER], discover=False, env={})
    assert first.audit is not None and first.audit is second.audit
    context = ctx()
    first.invoke("billing.lookup_invoice", LOOKUP, context=context)
    second.invoke("billing.lookup_invoice", LOOKUP, context=context)
    records = JsonlSink(tmp_path / "a.jsonl").read_trace(context.run_id)
    assert [r.sequence for r in records] == list(range(1, 9)) and verify_chain(records) == []


def test_memory_and_jsonl_sinks_filter_by_operation(tmp_path):
    """``AuditQuery(operation=...)`` narrows to one ``tool.operation`` in every sink."""
    from toolbox.audit import AuditEvent, AuditQuery, EventType, JsonlSink, MemorySink

    for sink in (MemorySink(), JsonlSink(tmp_path / "audit.jsonl")):
        sink.append(
            [
                AuditEvent(
                    EventType.INVOCATION_REQUEST, trace_id="a", name="http.get", tool="http", operation="get"
                ),
                AuditEvent(
                    EventType.INVOCATION_REQUEST,
                    trace_id="b",
                    name="http.post",
                    tool="http",
                    operation="post",
                ),
            ]
        )
        assert [r.trace_id for r in sink.query(AuditQuery(tool="http", operation="post"))] == ["b"]
        assert [r.trace_id for r in sink.query(AuditQuery(tool="http"))] == ["a", "b"]
