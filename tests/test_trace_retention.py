"""A context's trace keeps its newest records only: bounded memory for long-lived contexts."""

from __future__ import annotations

import gc
import threading

import pytest
from pydantic import ValidationError

import audit_scale_support as support
from toolbox import DenialRecord, ExecutionContext, Status
from toolbox.audit import AuditTrail, MemorySink
from toolbox.foundations._context import DEFAULT_TRACE_RETENTION, OperationRecord, Trace
from toolbox_test_support.heap import collector_sees_only_new_objects


def test_the_default_retention_is_bounded() -> None:
    context = ExecutionContext(tenant="t", principal="p")
    assert context.trace_retention == DEFAULT_TRACE_RETENTION == context.trace.retention == 10_000
    assert "trace_retention" not in context.model_dump()


def test_a_trace_keeps_its_newest_records_and_the_audit_trail_keeps_every_call() -> None:
    sink = MemorySink()
    gateway = support.governed(AuditTrail(sink, fallback_path=None))
    context = ExecutionContext(tenant="t", principal="p", trace_retention=3)
    results = [
        gateway.invoke("add", {"a": n, "b": 0, "purpose": f"call {n}"}, context=context) for n in range(7)
    ]
    assert all(r.status is Status.SUCCESS for r in results)
    kept = context.trace.operations()
    assert [r.intent_text for r in kept] == ["call 4", "call 5", "call 6"]
    assert len(context.trace) == 3
    requests = [r for r in sink.read_trace(context.run_id) if r.type.value == "INVOCATION_REQUEST"]
    assert len(requests) == 7  # the durable record is complete


def test_unbounded_on_request_and_inherited_by_delegates() -> None:
    context = ExecutionContext(tenant="t", principal="p", trace_retention=None)
    for n in range(DEFAULT_TRACE_RETENTION + 5):
        context.trace.append(DenialRecord("x", "DENIED", str(n)))
    assert len(context.trace) == DEFAULT_TRACE_RETENTION + 5
    assert context.delegate().trace.retention is None
    narrow = ExecutionContext(tenant="t", principal="p", trace_retention=2)
    assert narrow.delegate(budget=1).trace.retention == 2
    assert narrow.model_copy().trace_retention == 2


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10", 10**0 - 1])
def test_bad_retention_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError, match="trace retention must be a positive integer or None"):
        ExecutionContext(tenant="t", principal="p", trace_retention=bad)
    with pytest.raises(ValueError, match="trace retention"):
        Trace(bad)  # type: ignore[arg-type]


def test_concurrent_appends_and_snapshots_stay_consistent() -> None:
    """8 writers and a reader: no error, never more than the retention, the newest kept."""
    trace = Trace(100)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(5_000):
                trace.append(OperationRecord("t", "op", "read", f"{n}-{i}", None))
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            for _ in range(2_000):
                assert len(trace.records()) <= 100
                trace.operations("t")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    threads.append(threading.Thread(target=read))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(trace) == 100


# -- compact records of calls that ended on the by-name fast path -------------------------


def test_a_routed_call_leaves_one_compact_record_read_back_like_the_chains() -> None:
    """The fast path's record equals the full chain's, field for field (times aside)."""
    with collector_sees_only_new_objects():
        gateway = support.governed(AuditTrail(MemorySink(), fallback_path=None))
        context = ExecutionContext(tenant="t", principal="p", trace_retention=None)
        results = [
            gateway.invoke("add", {"a": n, "b": 1, "purpose": "Sum"}, context=context) for n in range(50)
        ]
        assert all(r.status is Status.SUCCESS for r in results)
        records = context.trace.operations()
        assert len(records) == 50  # each call recorded exactly once, chain-run or routed
        chain_record, routed = records[0], records[-1]  # the first call compiled the route
        assert isinstance(routed, OperationRecord)
        for field in OperationRecord.FIELDS:
            if field not in ("declared_at", "started_at", "ended_at", "duration"):
                assert getattr(routed, field) == getattr(chain_record, field), field
        assert (routed.status, routed.attempts, routed.warnings) == ("SUCCESS", 1, ())
        assert routed.started_at == routed.declared_at <= routed.ended_at
        assert routed.duration == routed.ended_at - routed.declared_at
        assert routed.as_dict()["intent_text"] == "Sum" and "DECLARED" not in repr(routed)
        # What the trace keeps of routed calls is plain values the collector stops tracking: once the
        # name's shape is untracked (its first collection), each record at its own first collection.
        gc.collect()
        for n in range(50):
            gateway.invoke("add", {"a": n, "b": 2, "purpose": "Sum"}, context=context)
        gc.collect()
        kept = list(context.trace._records)  # test-only peek
        compact = [entry for entry in kept if type(entry) is tuple]
        assert len(compact) >= 95 and not any(gc.is_tracked(entry) for entry in compact)


def test_a_routed_call_that_fails_is_recorded_once_by_the_chain() -> None:
    """A call the fast path hands to the full chain (its tool raised) gets one full record, not two."""
    from toolbox import Effect, Gateway, Governance, RiskClass, tool

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def invert(x: int) -> float:
        """1 / x."""
        return 1 / x

    trail = AuditTrail(MemorySink(), fallback_path=None)
    gateway = Gateway.load(providers=[invert], discover=False, env={}, governance=Governance(audit=trail))
    context = ExecutionContext(tenant="t", principal="p", trace_retention=None)
    for n in range(1, 6):
        assert (
            gateway.invoke("invert", {"x": n, "purpose": "Invert"}, context=context).status is Status.SUCCESS
        )
    result = gateway.invoke("invert", {"x": 0, "purpose": "Invert"}, context=context)
    records = context.trace.operations()
    assert len(records) == 6
    assert result.status is not Status.SUCCESS
    assert (records[-1].status, records[-1].attempts) == (result.status.value, 1)
    assert records[-1].error_type == "ZeroDivisionError"


def test_compact_records_respect_the_retention() -> None:
    gateway = support.governed(AuditTrail(MemorySink(), fallback_path=None))
    context = ExecutionContext(tenant="t", principal="p", trace_retention=5)
    for n in range(40):
        gateway.invoke("add", {"a": n, "b": 0, "purpose": f"call {n}"}, context=context)
    assert [r.intent_text for r in context.trace.operations()] == [f"call {n}" for n in range(35, 40)]
