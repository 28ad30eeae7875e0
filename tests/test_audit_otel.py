"""OtelHook: one span per invocation through opentelemetry-api, with the audit event's attributes."""

import subprocess
import sys
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import toolbox
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, ToolPolicy, Tools, tool
from toolbox.audit import AuditTrail, EventType, MemorySink, OtelHook, Redaction
from toolbox.testing import fake_provider

SECRET = "s3cr3t"
PURPOSE = "Find the customer's open orders"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def lookup(query: str, token: str) -> dict:
    """Look an order up."""
    return {"query": query}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
def explode(reason: str) -> None:
    """Fail on purpose."""
    raise RuntimeError(f"boom {reason}")


@pytest.fixture
def provider():
    """An SDK tracer provider with an in-memory exporter; the global provider is left alone."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer_provider.exporter = exporter
    yield tracer_provider
    tracer_provider.shutdown()


def gateway(provider, **governance):
    hooks = [OtelHook(tracer=provider.get_tracer("t"), redaction=governance.pop("redaction", None))]
    return Gateway.load(
        providers=[lookup, explode, fake_provider("acme-fake")],
        discover=False,
        env={},
        governance=Governance(audit_hooks=hooks, **governance),
    )


def ctx(**fields):
    fields.setdefault("tenant", "tenant-a")
    fields.setdefault("principal", "alice")
    return ExecutionContext(**fields)


def spans(provider):
    return provider.exporter.get_finished_spans()


def only_span(provider):
    finished = spans(provider)
    assert len(finished) == 1, finished
    return finished[0]


def assert_no_secret(provider):
    for span in spans(provider):
        for key, value in span.attributes.items():
            assert SECRET not in str(value), key
        assert SECRET not in span.name
        assert SECRET not in (span.status.description or "")
        assert not span.events


ARGS = {"query": "orders", "token": SECRET, "purpose": PURPOSE}


def test_success_span_has_the_event_attributes(provider):
    """A successful call gives one ``execute_tool`` span with toolbox.* attributes, status UNSET."""
    gw, context = gateway(provider), ctx(roles=frozenset({"support"}))
    before = time.time_ns()
    result = gw.invoke("lookup", ARGS, context=context)
    assert result.status is Status.SUCCESS
    span = only_span(provider)
    assert span.name == "execute_tool lookup"
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    attributes = dict(span.attributes)
    payload_hash = attributes.pop("toolbox.payload_hash")
    assert len(payload_hash) == 64
    gen_ai = {key: attributes.pop(key) for key in list(attributes) if not key.startswith("toolbox.")}
    assert gen_ai == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look an order up.",
    }
    assert attributes == {
        "toolbox.tool": "lookup",
        "toolbox.operation": "call",
        "toolbox.name": "lookup",
        "toolbox.status": "SUCCESS",
        "toolbox.decision": "ALLOW",
        "toolbox.effect": "READ_ONLY",
        "toolbox.risk": "MEMORY_ONLY",
        "toolbox.intent_kind": "purpose",
        "toolbox.intent_text": PURPOSE,
        "toolbox.tenant": "tenant-a",
        "toolbox.principal": "alice",
        "toolbox.trace_id": context.run_id,
        "toolbox.correlation_id": context.correlation_id,
        "toolbox.attempts": 1,
    }
    assert before <= span.start_time <= span.end_time <= time.time_ns()
    assert_no_secret(provider)


def test_delegated_run_span_names_its_parent_and_scope_denials(provider):
    """A delegated context's span carries toolbox.parent_run_id; an out-of-scope call is an ERROR span."""
    gw, parent = gateway(provider), ctx()
    child = parent.delegate(tools=["lookup"])
    assert gw.invoke("lookup", ARGS, context=child).status is Status.SUCCESS
    assert gw.invoke("explode", {"reason": "x", "audit_as": "Fail"}, context=child).status is Status.DENIED
    first, second = spans(provider)
    assert first.attributes["toolbox.parent_run_id"] == parent.run_id
    assert first.attributes["toolbox.trace_id"] == child.run_id
    assert second.attributes["toolbox.reason_code"] == "DELEGATION_SCOPE"
    assert second.status.status_code is StatusCode.ERROR


def test_span_starts_at_dispatch(provider):
    """The span starts when the operation was dispatched (record.started_at), in nanoseconds."""
    gw, context = gateway(provider), ctx()
    gw.invoke("lookup", ARGS, context=context)
    record = context.trace.operations("lookup")[-1]
    span = only_span(provider)
    assert record.started_at is not None
    assert span.start_time == int(record.started_at * 1_000_000_000)


def test_denied_span_is_an_error_without_the_reason_text(provider):
    """An authorizer denial gives a DENIED span with status ERROR and the reason code, attempts 0."""
    gw, context = (
        gateway(provider, authorizers=[lambda *a: toolbox.governance.Decision.deny("no " + SECRET)]),
        ctx(),
    )
    result = gw.invoke("lookup", ARGS, context=context)
    assert result.status is Status.DENIED
    span = only_span(provider)
    assert span.name == "execute_tool lookup"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == f"DENIED: {result.reason_code}"
    assert span.attributes["toolbox.status"] == "DENIED"
    assert span.attributes["toolbox.decision"] == "DENY"
    assert span.attributes["toolbox.reason_code"] == result.reason_code == "AUTH_DENIED"
    assert span.attributes["toolbox.attempts"] == 0
    assert span.attributes["toolbox.rule_ids"] == (result.rule,)
    assert span.start_time <= span.end_time
    assert_no_secret(provider)


def test_invalid_arguments_span(provider):
    """A validation failure gives an INVALID_ARGUMENTS span with its error code and status ERROR."""
    gw, context = gateway(provider), ctx()
    result = gw.invoke("lookup.call", {"query": 3, "token": SECRET, "purpose": PURPOSE}, context=context)
    assert result.status is Status.INVALID_ARGUMENTS
    span = only_span(provider)
    assert span.name == "execute_tool lookup"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "INVALID_ARGUMENTS: INVALID_ARGUMENTS"
    assert span.attributes["toolbox.name"] == "lookup.call"
    assert span.attributes["toolbox.status"] == "INVALID_ARGUMENTS"
    assert span.attributes["toolbox.decision"] == "INVALID"
    assert span.attributes["toolbox.error_code"] == result.error_code == "string_type"
    assert span.attributes["toolbox.attempts"] == 0
    assert_no_secret(provider)


def test_tool_error_span_names_the_error_code_not_the_message(provider):
    """A failing tool gives an ERROR span carrying the error code, never the exception message."""
    gw, context = gateway(provider), ctx()
    result = gw.invoke("explode", {"reason": SECRET, "audit_as": "Test the failure path"}, context=context)
    assert result.status is Status.ERROR
    span = only_span(provider)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ERROR: RuntimeError"
    assert span.attributes["toolbox.error_code"] == "RuntimeError"
    assert span.attributes["toolbox.effect"] == "UNSAFE"
    assert span.attributes["toolbox.intent_kind"] == "audit_as"
    assert_no_secret(provider)


def test_one_span_per_invocation_and_secret_never_in_attributes(provider):
    """Every call gives exactly one span; the token argument is in none of them."""
    gw, context = gateway(provider), ctx()
    gw.invoke("lookup", ARGS, context=context)
    gw.invoke("lookup", {**ARGS, "query": f"Bearer {SECRET}"}, context=context)
    gw.invoke(
        "lookup", {**ARGS, "query": f"https://user:{SECRET}@example.com/?api_key={SECRET}"}, context=context
    )
    gw.invoke("acme-fake.read", {"value": {"password": SECRET}, "purpose": PURPOSE}, context=context)
    assert [s.name for s in spans(provider)] == ["execute_tool lookup"] * 3 + ["execute_tool acme-fake__read"]
    assert_no_secret(provider)


def test_payload_hash_matches_the_audit_event(provider):
    """With the trail's redaction, the span's payload hash is the one stored in the audit event."""
    sink = MemorySink()
    redaction = Redaction.of(["query"])
    trail = AuditTrail(sink, fallback_path=None, redaction=redaction)
    gw, context = gateway(provider, audit=trail, redaction=redaction), ctx()
    gw.invoke("lookup", ARGS, context=context)
    declared = next(r for r in sink.records if r.type is EventType.INTENT_DECLARED)
    span = only_span(provider)
    assert span.attributes["toolbox.payload_hash"] == declared.payload_hash
    assert span.attributes["toolbox.trace_id"] == declared.trace_id
    assert span.attributes["toolbox.correlation_id"] == declared.correlation_id


def test_payload_mode_none_leaves_out_the_hash(provider):
    """PayloadMode NONE: no payload attribute at all."""
    gw, context = gateway(provider, redaction=Redaction.of(payload="NONE")), ctx()
    gw.invoke("lookup", ARGS, context=context)
    assert "toolbox.payload_hash" not in only_span(provider).attributes


def test_span_is_a_child_of_the_current_span(provider):
    """Inside an application span, the toolbox span is its child (same OpenTelemetry trace)."""
    gw, context = gateway(provider), ctx()
    with provider.get_tracer("app").start_as_current_span("handle request") as parent:
        gw.invoke("lookup", ARGS, context=context)
    child, outer = spans(provider)
    assert outer.name == "handle request"
    assert child.parent is not None
    assert child.parent.span_id == parent.get_span_context().span_id
    assert child.context.trace_id == parent.get_span_context().trace_id


def test_typed_door_gives_a_span_too(provider):
    """The typed door runs the same hooks."""
    context = ctx()
    tools = Tools.load(
        context,
        policy=ToolPolicy.standard(),
        providers=[lookup],
        discover=False,
        env={},
        governance=Governance(audit_hooks=[OtelHook(tracer=provider.get_tracer("t"))]),
    )
    assert tools.get(lookup).call("orders", SECRET).purpose(PURPOSE).execute() == {"query": "orders"}
    span = only_span(provider)
    assert (span.name, span.attributes["toolbox.status"]) == ("execute_tool lookup", "SUCCESS")
    assert_no_secret(provider)


def test_on_request_never_refuses():
    """on_request returns None: tracing never blocks a call."""
    assert OtelHook().on_request(object()) is None  # type: ignore[arg-type]


def test_tracing_failure_never_breaks_the_call(caplog):
    """A tracer that raises is logged as a warning; the call still succeeds."""

    class BrokenTracer:
        def start_span(self, *args, **kwargs):
            raise RuntimeError(f"exporter down {SECRET}")

    gw = Gateway.load(
        providers=[lookup],
        discover=False,
        env={},
        governance=Governance(audit_hooks=[OtelHook(tracer=BrokenTracer())]),
    )
    result = gw.invoke("lookup", ARGS, context=ctx())
    assert result.status is Status.SUCCESS
    assert "OpenTelemetry span not recorded (RuntimeError)" in caplog.text
    assert SECRET not in caplog.text


def test_default_tracer_uses_the_api_without_a_provider():
    """Without a tracer, the API's (no-op unless configured) global tracer is used; calls work."""
    gw = Gateway.load(
        providers=[lookup], discover=False, env={}, governance=Governance(audit_hooks=[OtelHook()])
    )
    assert gw.invoke("lookup", ARGS, context=ctx()).status is Status.SUCCESS


def test_missing_opentelemetry_raises_an_install_hint(monkeypatch):
    """Without opentelemetry installed, building the hook says what to install."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(ImportError, match=r'pip install "toolbox-registry\[otel\]"'):
        OtelHook()


def test_only_the_api_is_imported():
    """Importing and using the hook loads opentelemetry.trace, never the SDK."""
    code = (
        "import sys\n"
        "from toolbox.audit.sinks._otel import OtelHook\n"
        "OtelHook()\n"
        "assert 'opentelemetry.trace' in sys.modules\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


# -- the OpenTelemetry semantic conventions for generative AI ----------------------------------


def test_spans_follow_the_gen_ai_semantic_conventions(provider):
    """``execute_tool {gen_ai.tool.name}``, INTERNAL, the required and recommended gen_ai.* attributes
    (checked against the names the OpenTelemetry semantic-conventions package defines)."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv.attributes import error_attributes

    gw, context = gateway(provider), ctx()
    gw.invoke("acme-fake.read", {"value": "x", "purpose": PURPOSE}, context=context, call_id="call_7")
    gw.invoke("explode", {"reason": "x", "audit_as": "Fail"}, context=context, call_id="call_8")
    read, failed = spans(provider)
    operation = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
    assert read.name == f"{operation} acme-fake__read" and read.kind is SpanKind.INTERNAL
    assert read.attributes[gen_ai.GEN_AI_OPERATION_NAME] == operation
    assert read.attributes[gen_ai.GEN_AI_TOOL_NAME] == "acme-fake__read"  # the name the model called
    assert read.attributes[gen_ai.GEN_AI_TOOL_TYPE] == "function"
    assert read.attributes[gen_ai.GEN_AI_TOOL_CALL_ID] == "call_7"
    assert error_attributes.ERROR_TYPE not in read.attributes
    assert failed.attributes[gen_ai.GEN_AI_TOOL_CALL_ID] == "call_8"
    assert failed.attributes[error_attributes.ERROR_TYPE] == "RuntimeError"
    # The opt-in content attributes are never recorded: they would carry arguments and results.
    for span in (read, failed):
        assert gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes
        assert gen_ai.GEN_AI_TOOL_CALL_RESULT not in span.attributes
    assert_no_secret(provider)


def test_a_refusal_names_its_reason_as_the_error_type(provider):
    gw, context = gateway(provider, authorizers=[lambda *a: toolbox.governance.Decision.deny("no")]), ctx()
    gw.invoke("lookup", ARGS, context=context)
    assert only_span(provider).attributes["error.type"] == "AUTH_DENIED"


def test_the_model_call_id_reaches_the_span_from_every_door_that_knows_it(provider):
    """Raw tool calls pass the model's call id; it is bounded, and decides nothing."""
    from toolbox.doors.tool_calls import anthropic_tool_result, openai_tool_result

    gw, context = gateway(provider), ctx()
    call = {"id": "call_o1", "type": "function", "function": {"name": "lookup", "arguments": _json(ARGS)}}
    block = {"type": "tool_use", "id": "toolu_a1", "name": "lookup", "input": ARGS}
    openai_tool_result(gw, call, context=context)
    anthropic_tool_result(gw, block, context=context)
    gw.invoke("lookup", ARGS, context=context, call_id="x" * 5000)
    ids = [s.attributes["gen_ai.tool.call.id"] for s in spans(provider)]
    assert ids == ["call_o1", "toolu_a1", "x" * 200]


def _json(value):
    import json

    return json.dumps(value)
