"""Results that summarise themselves: the audit trail stores their summary and hash, never the content.

Every path a call can finish on is covered: the typed door's inline path and
the full chain, the by-name route of a ``MEMORY_ONLY`` function and of a
class-based tool, STRICT and ASYNC trails, memory and SQLite sinks, and the
payload modes (SUMMARY, HASH, NONE).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

from toolbox import (
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    OperationDescriptor,
    ReadIntent,
    RiskClass,
    Status,
    ToolDescriptor,
    ToolProvider,
    ToolRuntime,
    Tools,
    tool,
)
from toolbox.audit import AuditMode, AuditTrail, MemorySink, Redaction, SqliteSink, verify_chain
from toolbox.governance import RetryPolicy
from toolbox.pipeline._result_summary import result_summary, settled_inline

SECRET = "row-value-that-must-not-be-stored"


class Rows:
    """A result holding values, that tells the audit trail only how many and their hash."""

    def __init__(self, values: list[str]) -> None:
        self.values = values

    def __toolbox_audit_summary__(self) -> tuple[str, str]:
        return f"rows={len(self.values)}", hashlib.sha256("\n".join(self.values).encode()).hexdigest()


class Broken:
    def __toolbox_audit_summary__(self) -> tuple[str, str]:
        raise RuntimeError("cannot summarise")


DIGEST = hashlib.sha256(SECRET.encode()).hexdigest()

READER = ToolDescriptor(
    name="reader",
    version="1",
    risk=RiskClass.MEMORY_ONLY,
    operations=(
        OperationDescriptor(name="read", effect=Effect.READ_ONLY),
        OperationDescriptor(name="broken", effect=Effect.READ_ONLY),
    ),
)


class Reader:
    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def read(self, key: str) -> ReadIntent[Rows]:
        return self._runtime.read_intent("read", lambda: Rows([SECRET]), arguments={"key": key})

    def broken(self) -> ReadIntent[Broken]:
        return self._runtime.read_intent("broken", Broken, arguments={})


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def lookup(key: str) -> Rows:
    """Look a key up."""
    return Rows([SECRET])


PROVIDER = ToolProvider(tool_type=Reader, descriptor=READER)
CONTEXT = ExecutionContext(tenant="acme", principal="ann")


def _responses(sink: Any, run_id: str) -> list[Any]:
    return [e for e in sink.read_trace(run_id) if e.type.value == "INVOCATION_RESPONSE"]


def _trail(sink: Any, **options: Any) -> Governance:
    return Governance(audit=AuditTrail(sink, fallback_path=None, **options))


def test_typed_door_records_the_summary_not_the_rows():
    """The typed door stores the summary on every call, the inline path's as the chain's."""
    sink = MemorySink()
    tools = Tools.load(CONTEXT, providers=[PROVIDER], discover=False, env={}, governance=_trail(sink))
    for _ in range(3):  # the first call makes the plan; later ones take the inline path
        assert tools.get(Reader).read("k").purpose("Read").execute().values == [SECRET]
    responses = _responses(sink, CONTEXT.run_id)
    assert [(e.payload_summary, e.payload_hash) for e in responses] == [("rows=1", DIGEST)] * 3
    assert SECRET not in repr(sink.read_trace(CONTEXT.run_id))
    assert verify_chain(sink.read_trace(CONTEXT.run_id)) == []


class _PassThrough:
    """An interceptor that allows everything: its presence keeps typed calls on the full chain."""

    name = "pass_through"
    per_attempt = False

    def __call__(self, invocation: Any) -> None:
        return None


def _typed_events(monkeypatch: Any, *, full_chain: bool) -> list[dict[str, Any]]:
    from toolbox.pipeline._chain import Pipeline

    sink = MemorySink()
    trail = AuditTrail(sink, fallback_path=None)
    governance = Governance(audit=trail, interceptors=[_PassThrough()] if full_chain else [])
    context = ExecutionContext(tenant="acme", principal="ann")
    tools = Tools.load(context, providers=[PROVIDER], discover=False, env={}, governance=governance)
    tools.get(Reader).read("k").purpose("Read").execute()  # the first call makes the plan
    with monkeypatch.context() as patch:
        if not full_chain:

            def refuse(*args: Any) -> Any:
                raise AssertionError("the full chain finished the call")

            patch.setattr(Pipeline, "continue_returned", refuse)
            patch.setattr(Pipeline, "run", refuse)
        assert tools.get(Reader).read("k").purpose("Read").execute().values == [SECRET]
    records = sink.read_trace(context.run_id)
    assert verify_chain(records) == []
    volatile = {"event_id", "timestamp", "hash", "previous_hash", "trace_id", "correlation_id", "duration"}
    return [{k: v for k, v in e.model_dump().items() if k not in volatile} for e in records]


def test_the_typed_inline_path_records_the_summary_as_the_chain_does(monkeypatch):
    """The inline path stores a summarised result itself: the same events as the full chain's."""
    inline = _typed_events(monkeypatch, full_chain=False)
    assert inline == _typed_events(monkeypatch, full_chain=True)
    assert [(e["payload_summary"], e["payload_hash"]) for e in inline[3::4]] == [("rows=1", DIGEST)] * 2
    assert SECRET not in repr(inline)


class TransientRows(Rows):
    def __toolbox_transient__(self) -> bool:
        return True


def test_a_transient_summarised_result_is_retried_by_the_chain():
    """A summarised result that says it is transient leaves the inline path: the chain retries it."""
    results: list[Rows] = []

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def flaky(key: str) -> Rows:
        """Transient rows on every other call."""
        results.append(TransientRows(["busy"]) if len(results) % 2 == 0 else Rows([SECRET]))
        return results[-1]

    sink = MemorySink()
    governance = Governance(
        audit=AuditTrail(sink, fallback_path=None), retry=RetryPolicy(base_delay=0, max_delay=0)
    )
    gateway = Gateway.load(providers=[flaky], discover=False, env={}, governance=governance)
    context = ExecutionContext(tenant="acme", principal="ann")
    typed = gateway.tools_for(context).get(flaky)
    for _ in range(2):  # the second call takes the inline path, which hands the transient rows on
        assert typed.call("k").purpose("Read").execute().values == [SECRET]
    assert len(results) == 4
    responses = _responses(sink, context.run_id)
    assert [(e.attempt, e.payload_summary, e.payload_hash) for e in responses] == [(2, "rows=1", DIGEST)] * 2
    gateway.close()


@pytest.mark.parametrize("name", ["reader.read", "lookup"])
def test_by_name_routes_record_the_summary(name):
    """The by-name routes (a class-based tool, a @tool function) leave such a result to the chain."""
    sink = MemorySink()
    gateway = Gateway.load(providers=[PROVIDER, lookup], discover=False, env={}, governance=_trail(sink))
    context = ExecutionContext(tenant="acme", principal="ann")
    for _ in range(3):  # routes are compiled after the first dispatched call
        result = gateway.invoke(name, {"key": "k", "purpose": "Read"}, context=context)
        assert result.status is Status.SUCCESS and result.content.values == [SECRET]
    assert [(e.payload_summary, e.payload_hash) for e in _responses(sink, context.run_id)] == [
        ("rows=1", DIGEST)
    ] * 3
    asyncio.run(gateway.ainvoke(name, {"key": "k", "purpose": "Read"}, context=context))
    assert _responses(sink, context.run_id)[-1].payload_summary == "rows=1"
    gateway.close()


@pytest.mark.parametrize(("mode", "expected"), [("HASH", (None, DIGEST)), ("NONE", (None, None))])
def test_payload_mode_applies_to_summaries(mode, expected):
    """HASH stores only the hash, NONE neither."""
    sink = MemorySink()
    governance = _trail(sink, redaction=Redaction.of(payload=mode))
    tools = Tools.load(CONTEXT, providers=[PROVIDER], discover=False, env={}, governance=governance)
    tools.get(Reader).read("k").purpose("Read").execute()
    (response,) = _responses(sink, CONTEXT.run_id)
    assert (response.payload_summary, response.payload_hash) == expected


class LongRows(Rows):
    def __toolbox_audit_summary__(self) -> tuple[str, str]:
        return "x" * 5000, DIGEST


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def long_lookup(key: str) -> LongRows:
    """Look a key up; the summary is long."""
    return LongRows([SECRET])


def test_a_long_summary_is_cut_to_max_summary():
    """A summary is cut to 1,000 characters, then to the trail's max_summary; the hash is kept whole."""
    assert result_summary(LongRows([])) == ("x" * 1000, DIGEST)
    sink = MemorySink()
    governance = _trail(sink, redaction=Redaction.of(max_summary=32))
    gateway = Gateway.load(providers=[long_lookup], discover=False, env={}, governance=governance)
    context = ExecutionContext(tenant="acme", principal="ann")
    result = gateway.invoke("long_lookup", {"key": "k", "purpose": "Read"}, context=context)
    assert result.status is Status.SUCCESS
    (response,) = _responses(sink, context.run_id)
    assert response.payload_summary == "x" * 31 + "\u2026" and response.payload_hash == DIGEST
    gateway.close()


def test_a_broken_summary_is_left_out_and_the_call_succeeds():
    """A result whose summary raises is recorded without one; the caller still gets it."""
    sink = MemorySink()
    tools = Tools.load(CONTEXT, providers=[PROVIDER], discover=False, env={}, governance=_trail(sink))
    assert isinstance(tools.get(Reader).broken().purpose("Read").execute(), Broken)
    (response,) = _responses(sink, CONTEXT.run_id)
    assert response.status == "SUCCESS" and (response.payload_summary, response.payload_hash) == (None, None)


def test_plain_results_stay_on_the_fast_paths():
    """Plain values and results without the probe settle inline, as before."""
    assert settled_inline(3) and settled_inline({"a": 1}) and settled_inline(object())
    assert not settled_inline(Rows([]))
    assert result_summary({"a": 1}) is None and result_summary(object()) is None


@pytest.mark.parametrize("mode", [AuditMode.STRICT, AuditMode.ASYNC])
def test_sqlite_sink_stores_the_summary(tmp_path, mode):
    """A durable sink stores the summary in both modes (ASYNC keeps such a closing as a batch)."""
    sink = SqliteSink(str(tmp_path / "audit.db"))
    trail = AuditTrail(sink, mode=mode, fallback_path=None)
    tools = Tools.load(
        CONTEXT, providers=[PROVIDER], discover=False, env={}, governance=Governance(audit=trail)
    )
    for _ in range(2):
        tools.get(Reader).read("k").purpose("Read").execute()
    trail.flush()
    records = sink.read_trace(CONTEXT.run_id)
    assert [(e.payload_summary, e.payload_hash) for e in _responses(sink, CONTEXT.run_id)] == [
        ("rows=1", DIGEST)
    ] * 2
    assert verify_chain(records) == []
    trail.close()
