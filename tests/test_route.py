"""Compiled by-name routes: the same results, trace records and audit events as the full chain.

Every scenario runs twice, on two identical gateways: one that compiles routes
(the default) and one whose names always take the full chain. Both first make
one valid call, so the routed gateway has compiled the name when the scenario
call comes. The observations (result, new trace records, new audit events,
tool executions) must be equal once times and random ids are set aside.

Each scenario runs for three kinds of the same tool: a ``def`` and an ``async
def`` ``@tool`` function (`toolbox.doors._route.Route`) and a class-based tool
(`toolbox.doors._route_method.MethodRoute`), through each door that can call it.
"""

from __future__ import annotations

import asyncio
import enum
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import pytest
from pydantic import Json

from audit_faults import FlakySink
from toolbox import (
    Acknowledgement,
    Budget,
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    OperationDescriptor,
    RiskClass,
    Status,
    ToolDeniedError,
    ToolDescriptor,
    ToolExecutionError,
    ToolProvider,
    ToolRuntime,
    tool,
)
from toolbox.audit import AuditEvent, AuditMode, AuditTrail, EventType, MemorySink
from toolbox.doors._route import MethodRoute, Route
from toolbox.governance import Approval, Decision, Guardrail, GuardrailAction, RetryPolicy
from toolbox.pipeline._chain import Pipeline

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles=frozenset({"auditor"}))
VALID = {"a": 1, "b": 2, "purpose": "Sum the order"}
ROUTES = (Route, MethodRoute)
KINDS = ["def", "async", "class", "aclass"]


@dataclass
class Behaviour:
    """What the tool does on its next calls: raise these first, then return ``result``."""

    raises: list[Exception] = field(default_factory=list)
    result: Any = None
    calls: int = 0
    effect: Effect = Effect.READ_ONLY
    kind: str = "def"
    #: Class-based tools only: the operation method raises this when it builds the intent.
    refuse: Exception | None = None
    #: Class-based tools only: the warnings the intent carries.
    warnings: tuple[str, ...] = ()

    @property
    def valid(self) -> dict[str, Any]:
        """Valid arguments, with the intent field the effect asks for."""
        if self.effect is Effect.READ_ONLY:
            return VALID
        return {"a": 1, "b": 2, "audit_as": "Record the sum"}

    def body(self, a: int, b: int) -> Any:
        """The tool's work, counted."""
        self.calls += 1
        if self.raises:
            raise self.raises.pop(0)
        return a + b if self.result is None else self.result


class Transient:
    """A result that says it is a transient failure."""

    def __toolbox_transient__(self) -> bool:
        return True


def adder(behaviour: Behaviour) -> object:
    """The tool ``add`` (operation ``call``) of ``behaviour.kind``."""
    if behaviour.kind == "def":

        @tool(risk=RiskClass.MEMORY_ONLY, effect=behaviour.effect)
        def add(a: int, b: int = 0) -> Any:
            """Add two integers."""
            return behaviour.body(a, b)

        return add
    if behaviour.kind == "async":

        @tool(risk=RiskClass.MEMORY_ONLY, effect=behaviour.effect)
        async def add(a: int, b: int = 0) -> Any:  # type: ignore[no-redef]
            """Add two integers."""
            await asyncio.sleep(0)  # a real suspension point
            return behaviour.body(a, b)

        return add

    class Adder:
        """A class-based tool with one operation."""

        def __init__(self, runtime: ToolRuntime) -> None:
            self._runtime = runtime

        def call(self, a: int, b: int = 0) -> Any:
            """Intent to add two integers."""
            if behaviour.refuse is not None:
                if isinstance(behaviour.refuse, ToolDeniedError):
                    self._runtime.record_denial(behaviour.refuse)
                raise behaviour.refuse
            arguments = {"a": a, "b": b}
            acall = None
            if behaviour.kind == "aclass":  # an async-capable operation: ainvoke awaits acall

                async def acall() -> Any:
                    await asyncio.sleep(0)
                    return behaviour.body(a, b)

            call = lambda: behaviour.body(a, b)  # noqa: E731
            if behaviour.kind == "aclass":

                def call() -> Any:  # as a @tool async function's: only ainvoke runs it
                    raise ToolExecutionError("call it with ainvoke", request_sent=False)

            make = (
                self._runtime.read_intent
                if behaviour.effect is Effect.READ_ONLY
                else self._runtime.write_intent
            )
            return make(
                "call",
                call,
                acall=acall,
                arguments=arguments,
                warnings=behaviour.warnings,
            )

    operation = OperationDescriptor(name="call", effect=behaviour.effect, summary="Add two integers.")
    descriptor = ToolDescriptor(
        name="add",
        version="1",
        summary="Add two integers.",
        risk=RiskClass.MEMORY_ONLY,
        operations=(operation,),
    )
    return ToolProvider(tool_type=Adder, descriptor=descriptor)


def build(
    behaviour: Behaviour, *, env: dict[str, str], sink: Any, mode: AuditMode, **governance: Any
) -> Gateway:
    trail = AuditTrail(sink, mode=mode, fallback_path=None) if sink is not None else None
    governance.setdefault("retry", FAST)
    return Gateway.load(
        providers=[adder(behaviour)],
        discover=False,
        env=env,
        governance=Governance(audit=trail, **governance),
    )


@dataclass
class Side:
    """One gateway of a comparison, with its tool behaviour, environment, sink and context."""

    gateway: Gateway
    behaviour: Behaviour
    env: dict[str, str]
    sink: Any
    context: ExecutionContext
    full_chain_runs: int = 0


@contextmanager
def counting_full_chain(side: Side, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    original_run, original_arun = Pipeline.run, Pipeline.arun

    def run(pipeline: Pipeline, invocation: Any) -> Any:
        side.full_chain_runs += 1
        return original_run(pipeline, invocation)

    async def arun(pipeline: Pipeline, invocation: Any) -> Any:
        side.full_chain_runs += 1
        return await original_arun(pipeline, invocation)

    with monkeypatch.context() as m:
        m.setattr(Pipeline, "run", run)
        m.setattr(Pipeline, "arun", arun)
        yield


def make_side(
    routed: bool,
    monkeypatch: pytest.MonkeyPatch,
    *,
    sink: str,
    mode: AuditMode,
    effect: Effect,
    kind: str,
    **governance: Any,
) -> Side:
    behaviour = Behaviour(effect=effect, kind=kind)
    env: dict[str, str] = {}
    made = {"memory": MemorySink, "switchable": FlakySink, "none": lambda: None}[sink]()
    gateway = build(behaviour, env=env, sink=made, mode=mode, **governance)
    if not routed:
        # This gateway never compiles a route: every call takes the full chain.
        original_learn = Gateway._learn
        monkeypatch.setattr(
            Gateway,
            "_learn",
            lambda self, name, invocation: (
                None if self is gateway else original_learn(self, name, invocation)
            ),
        )
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    return Side(gateway, behaviour, env, made, context)


def normal_event(event: Any) -> dict[str, Any]:
    data = event.model_dump()
    for key in ("event_id", "timestamp", "hash", "previous_hash", "trace_id", "correlation_id", "duration"):
        data.pop(key)
    data["parent_run_id"] = data["parent_run_id"] is not None  # each side has its own parent run
    return data


def normal_record(record: Any) -> dict[str, Any]:
    data = record.as_dict()
    for key in ("declared_at", "started_at", "ended_at", "duration", "at"):
        if key in data:
            data[key] = data[key] is not None  # set or not, never when
    return data


def normal_result(result: Any) -> dict[str, Any]:
    data = result.as_dict()
    data.pop("trace_id")
    data.pop("correlation_id")
    data["audit_failed"] = result.audit_failed
    if isinstance(data.get("content"), Transient):
        data["content"] = "a Transient"  # two sides, two instances
    data["approval"] = (result.approval.fingerprint is not None) if result.approval else None
    return data


def observe(side: Side, call: Callable[[Side], Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run ``call`` on ``side`` and return what it left behind, times and ids set aside."""
    context = call_context = side.context
    records_before = len(context.trace)
    events_before = len(side.sink.records) if side.sink is not None else 0
    calls_before = side.behaviour.calls
    with counting_full_chain(side, monkeypatch):
        result = call(side)
    if isinstance(result, tuple):
        result, call_context = result
    events = side.sink.records[events_before:] if side.sink is not None else []
    return {
        "result": normal_result(result),
        "records": [normal_record(r) for r in call_context.trace.records()[records_before:]]
        if call_context is context
        else [normal_record(r) for r in call_context.trace.records()],
        "events": [normal_event(e) for e in events],
        "executions": side.behaviour.calls - calls_before,
    }


def invoke(arguments: Any, **kwargs: Any) -> Callable[[Side], Any]:
    def call(side: Side) -> Any:
        return side.gateway.invoke("add", arguments, context=side.context, **kwargs)

    return call


def ainvoke(arguments: Any, **kwargs: Any) -> Callable[[Side], Any]:
    def call(side: Side) -> Any:
        return asyncio.run(side.gateway.ainvoke("add", arguments, context=side.context, **kwargs))

    return call


def door_of(kind: str) -> Callable[..., Callable[[Side], Any]]:
    """The door that runs a tool of ``kind``: an async tool is called with ``ainvoke``."""
    return ainvoke if kind in ("async", "aclass") else invoke


#: Every door that can call each kind of tool (a sync call of an async tool has its own test).
DOORS = [
    pytest.param(invoke, "def", id="invoke-def"),
    pytest.param(ainvoke, "def", id="ainvoke-def"),
    pytest.param(ainvoke, "async", id="ainvoke-async"),
    pytest.param(invoke, "class", id="invoke-class"),
    pytest.param(ainvoke, "class", id="ainvoke-class"),
    pytest.param(ainvoke, "aclass", id="ainvoke-aclass"),
]
CLASS_DOORS = [door for door in DOORS if door.values[1] in ("class", "aclass")]


def compare(
    monkeypatch: pytest.MonkeyPatch,
    call: Callable[[Side], Any],
    *,
    prepare: Callable[[Side], None] = lambda side: None,
    sink: str = "memory",
    mode: AuditMode = AuditMode.STRICT,
    routable: bool = True,
    effect: Effect = Effect.READ_ONLY,
    kind: str = "def",
    mutate: Callable[[Any], None] | None = None,
    **governance: Any,
) -> tuple[dict[str, Any], Side]:
    """Observe ``call`` on a routed and an unrouted gateway; assert both saw the same; return one.

    ``mutate`` changes the compiled route before the call (to prove the comparison catches it).
    """
    observed = []
    sides = []
    for routed in (True, False):
        side = make_side(routed, monkeypatch, sink=sink, mode=mode, effect=effect, kind=kind, **governance)
        warm = door_of(kind)(side.behaviour.valid)(side)
        assert warm.status is Status.SUCCESS
        if routed:
            route = side.gateway._routes.get("add")
            assert isinstance(route, ROUTES) is routable
            if kind not in ("class", "aclass") and routable:
                assert isinstance(route, Route)
            if mutate is not None:
                mutate(route)
        prepare(side)
        observed.append(observe(side, call, monkeypatch))
        sides.append(side)
    routed_view, full_view = observed
    assert routed_view == full_view
    return routed_view, sides[0]


# -- the route is taken ----------------------------------------------------------------------


@pytest.mark.parametrize(("door", "kind"), DOORS)
@pytest.mark.parametrize("sink", ["memory", "switchable", "none"])
def test_a_valid_call_takes_the_route_and_leaves_what_the_full_chain_leaves(door, kind, sink, monkeypatch):
    seen, side = compare(
        monkeypatch, kind=kind, call=door({"a": 2, "b": 3, "purpose": "Sum the order"}), sink=sink
    )
    assert seen["result"]["status"] == "SUCCESS"
    assert seen["result"]["content"] == 5
    assert seen["executions"] == 1
    assert side.full_chain_runs == 0  # the routed side never entered the full chain
    if sink != "none":
        kinds = [e["type"].value for e in seen["events"]]
        assert kinds == [
            "INTENT_DECLARED",
            "GOVERNANCE_DECISION",
            "INVOCATION_REQUEST",
            "INVOCATION_RESPONSE",
        ]
        assert side.gateway.audit.verify(side.context.run_id, context=AUDITOR) == []


@pytest.mark.parametrize("kind", KINDS)
def test_defaults_are_filled_in_as_the_full_chain_does(kind, monkeypatch):
    seen, _ = compare(monkeypatch, kind=kind, call=door_of(kind)({"a": 4, "purpose": "Add nothing"}))
    assert seen["result"]["content"] == 4


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_context_is_served_by_the_route_with_the_full_chains_outcome(kind, monkeypatch):
    """A service builds a context per request: its first call builds the tool and stays on the route."""

    def other_context(side: Side) -> Any:
        fresh = ExecutionContext(tenant="tenant-b", principal="bob")
        return door_of(kind)(VALID)(Side(side.gateway, side.behaviour, side.env, side.sink, fresh)), fresh

    seen, side = compare(monkeypatch, kind=kind, call=other_context)
    assert seen["result"]["status"] == "SUCCESS"
    assert side.full_chain_runs == 0  # the route built the tool for this context (Tools.acquire)


# -- anything unusual takes the full chain, with the same outcome ---------------------------------


@pytest.mark.parametrize(("door", "kind"), DOORS)
@pytest.mark.parametrize(
    ("arguments", "error_code", "field_path"),
    [
        ({"a": "x", "b": 2, "purpose": "Sum"}, "int_parsing", "a"),
        ({"a": 1, "b": 2, "purpose": "Sum", "c": 3}, "extra_forbidden", "c"),
        ({"a": 1, "b": 2}, "missing", "purpose"),
        ({"a": 1, "b": 2, "purpose": "two\nlines"}, "invalid_intent", "purpose"),
        ({"a": [1], "b": 2, "purpose": "Sum"}, "int_type", "a"),
        ([1, 2], "not_an_object", ""),
        ({"a": 1, "b": 2, "purpose": "x" * 70_000}, "too_large", "purpose"),
        # Valid for the schema, refused by the argument guards alone:
        ({"a": 10**4400, "b": 2, "purpose": "Sum"}, "int_too_large", "a"),
    ],
)
def test_invalid_arguments_are_refused_alike_with_zero_executions(
    door, kind, arguments, error_code, field_path, monkeypatch
):
    seen, _ = compare(monkeypatch, kind=kind, call=door(arguments))
    assert seen["result"]["status"] == "INVALID_ARGUMENTS"
    assert seen["result"]["error_code"] == error_code
    assert seen["result"]["field_path"] == field_path
    assert seen["executions"] == 0


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_key_that_is_not_a_string_is_refused_alike_with_zero_executions(door, kind, monkeypatch):
    """No JSON object has one; a program's dict may. The route hands it to the chain, which refuses it."""
    seen, _ = compare(monkeypatch, kind=kind, call=door({1: 2, "a": 1, "b": 2, "purpose": "Sum"}))
    result = seen["result"]
    assert (result["status"], result["reason_code"]) == ("DENIED", "GOVERNANCE_EVALUATION_FAILED")
    assert seen["executions"] == 0
    decision = next(e for e in seen["events"] if e["type"].value == "GOVERNANCE_DECISION")
    assert (decision["decision"], decision["reason_code"]) == ("DENY", "GOVERNANCE_EVALUATION_FAILED")


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_the_kill_switch_engaged_after_compiling_stops_the_route(door, kind, monkeypatch):
    def engage(side: Side) -> None:
        side.env["TOOLBOX_KILL_SWITCH"] = "1"

    seen, _ = compare(monkeypatch, kind=kind, call=door(VALID), prepare=engage)
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "KILL_SWITCH")
    assert seen["executions"] == 0


def test_the_process_environment_is_read_on_every_routed_call(monkeypatch):
    """The kill switch's variable in os.environ (read through its own dict) reaches the next call."""
    monkeypatch.delenv("TOOLBOX_KILL_SWITCH", raising=False)
    gateway = Gateway.load(providers=[adder(Behaviour())], discover=False, governance=Governance())
    context = ExecutionContext(tenant="t", principal="p")
    assert gateway.invoke("add", VALID, context=context).status is Status.SUCCESS
    assert isinstance(gateway._routes["add"], Route)
    for value, engaged in (("1", True), ("off", False), ("of", True), ("", False), (" No ", False)):
        monkeypatch.setenv("TOOLBOX_KILL_SWITCH", value)
        result = gateway.invoke("add", VALID, context=context)
        assert (result.reason_code == "KILL_SWITCH") is engaged, value
    monkeypatch.delenv("TOOLBOX_KILL_SWITCH")
    assert gateway.invoke("add", VALID, context=context).status is Status.SUCCESS


def test_a_disabled_tool_is_stopped_on_the_route_too(monkeypatch):
    gateway = build(Behaviour(), env={}, sink=None, mode=AuditMode.STRICT, disabled_tools=())
    context = ExecutionContext(tenant="t", principal="p")
    assert gateway.invoke("add", VALID, context=context).status is Status.SUCCESS
    stopped = build(Behaviour(), env={}, sink=None, mode=AuditMode.STRICT, disabled_tools=("add",))
    result = stopped.invoke("add", VALID, context=context)
    assert (result.status, result.reason_code) == (Status.DENIED, "KILL_SWITCH")


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_budget_in_the_context_is_spent_by_the_full_chain(door, kind, monkeypatch):
    def third_call(side: Side) -> Any:
        budgeted = ExecutionContext(tenant="t", principal="p", budget=Budget(max_calls=2))
        for _ in range(2):
            spent = door(VALID)(Side(side.gateway, side.behaviour, side.env, side.sink, budgeted))
            assert spent.status is Status.SUCCESS
        result = door(VALID)(Side(side.gateway, side.behaviour, side.env, side.sink, budgeted))
        return result, budgeted

    seen, side = compare(monkeypatch, kind=kind, call=third_call)
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "BUDGET_EXHAUSTED")
    assert seen["executions"] == 2
    # A class-based tool's route runs the budget check itself, from the first call of the context on.
    # A @tool function's route hands every budgeted context to the full chain.
    assert side.full_chain_runs == (0 if kind in ("class", "aclass") else 3)


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_passed_deadline_is_refused_alike(door, kind, monkeypatch):
    def late(side: Side) -> Any:
        past = ExecutionContext(
            tenant="t", principal="p", deadline=datetime.now(timezone.utc) - timedelta(seconds=1)
        )
        return door(VALID)(Side(side.gateway, side.behaviour, side.env, side.sink, past)), past

    seen, _ = compare(monkeypatch, kind=kind, call=late)
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "DEADLINE_EXCEEDED")
    assert seen["executions"] == 0


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_deadline_that_passed_for_a_context_whose_tool_is_built_is_refused_alike(door, kind, monkeypatch):
    """The tool is built for the context (access runs before the deadline check): the route's gate decides."""

    def late_again(side: Side) -> Any:
        past = ExecutionContext(
            tenant="t", principal="p", deadline=datetime.now(timezone.utc) - timedelta(seconds=1)
        )
        late = Side(side.gateway, side.behaviour, side.env, side.sink, past)
        first = door(VALID)(late)
        assert first.reason_code == "DEADLINE_EXCEEDED"
        assert side.gateway.tools_for(past).built_runtime("add") is not None
        return door(VALID)(late), past

    seen, _ = compare(monkeypatch, kind=kind, call=late_again)
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "DEADLINE_EXCEEDED")
    assert seen["executions"] == 0


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_an_out_of_scope_call_with_the_tool_built_is_refused_alike(door, kind, monkeypatch):
    """``Tools.get`` hands out out-of-scope tools; a call of one is still DELEGATION_SCOPE."""

    def out_of_scope(side: Side) -> Any:
        child = side.context.delegate(tools=["other"])
        side.gateway.tools_for(child).get("add")  # built for the child context
        return door(VALID)(Side(side.gateway, side.behaviour, side.env, side.sink, child)), child

    seen, _ = compare(monkeypatch, kind=kind, call=out_of_scope)
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "DELEGATION_SCOPE")
    assert seen["executions"] == 0


@pytest.mark.parametrize(("door", "kind"), DOORS)
@pytest.mark.parametrize(("scope", "status"), [(["other"], "DENIED"), (["add"], "SUCCESS")])
def test_a_delegated_context_is_checked_alike(door, kind, scope, status, monkeypatch):
    def delegated(side: Side) -> Any:
        child = side.context.delegate(tools=scope)
        return door(VALID)(Side(side.gateway, side.behaviour, side.env, side.sink, child)), child

    seen, _ = compare(monkeypatch, kind=kind, call=delegated)
    assert seen["result"]["status"] == status
    if status == "DENIED":
        assert seen["result"]["reason_code"] == "DELEGATION_SCOPE"
        assert seen["executions"] == 0
    assert seen["events"] and all(e["parent_run_id"] for e in seen["events"])


@pytest.mark.parametrize("kind", KINDS)
def test_an_approval_grant_takes_the_full_chain(kind, monkeypatch):
    grant = Approval(request_id="r", fingerprint="0" * 64, approved_by="bob", expires_at=0.0)
    seen, side = compare(monkeypatch, kind=kind, call=door_of(kind)(VALID, approval=grant))
    # No approval is required here: the grant is ignored, as the full chain ignores it.
    assert seen["result"]["status"] == "SUCCESS"
    assert side.full_chain_runs == 1


# -- after dispatch: failures continue in the full chain's retry loop ------------------------------


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_timeout_then_success_is_retried_like_the_full_chain(door, kind, monkeypatch):
    def flaky(side: Side) -> None:
        side.behaviour.raises = [TimeoutError("slow")]

    seen, _ = compare(monkeypatch, kind=kind, call=door(VALID), prepare=flaky)
    assert seen["result"]["status"] == "SUCCESS"
    assert seen["result"]["attempts"] == 2
    assert seen["executions"] == 2
    assert [e["attempt"] for e in seen["events"] if e["type"].value == "INVOCATION_RESPONSE"] == [2]


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_tool_exception_is_an_error_alike(door, kind, monkeypatch):
    def broken(side: Side) -> None:
        side.behaviour.raises = [ValueError("secret-token-123 went wrong")]

    seen, _ = compare(monkeypatch, kind=kind, call=door(VALID), prepare=broken)
    assert seen["result"]["status"] == "ERROR"
    assert seen["result"]["error_code"] == "ValueError"
    assert "secret-token-123" not in str(seen)
    assert seen["executions"] == 1


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_transient_result_is_retried_alike(door, kind, monkeypatch):
    def transient(side: Side) -> None:
        side.behaviour.result = Transient()

    seen, _ = compare(monkeypatch, kind=kind, call=door(VALID), prepare=transient)
    assert seen["executions"] == 3  # retried to the policy's limit: the result stays transient


@pytest.mark.parametrize("kind", KINDS)
def test_a_guardrail_makes_a_name_take_the_full_chain(kind, monkeypatch):
    rule = Guardrail(
        "BIG", action=GuardrailAction.DENY, tool="add", when=lambda arguments: arguments["a"] > 100
    )
    seen, side = compare(
        monkeypatch,
        door_of(kind)({"a": 101, "purpose": "Add a lot"}),
        guardrails=[rule],
        routable=False,
        kind=kind,
    )
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "GUARDRAIL_BIG")
    assert side.gateway._routes.get("add") is None  # a guardrail applies: the name is not compiled


# -- the audit trail on the route -----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_unwritable_audit_trail_refuses_the_routed_call(kind, monkeypatch):
    def break_sink(side: Side) -> None:
        side.sink.failing = True

    seen, _ = compare(
        monkeypatch, kind=kind, call=door_of(kind)(VALID), prepare=break_sink, sink="switchable"
    )
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == ("DENIED", "AUDIT_UNAVAILABLE")
    assert seen["executions"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_best_effort_trail_lets_the_routed_call_run(kind, monkeypatch):
    def break_sink(side: Side) -> None:
        side.sink.failing = True

    seen, _ = compare(
        monkeypatch,
        door_of(kind)(VALID),
        prepare=break_sink,
        sink="switchable",
        mode=AuditMode.BEST_EFFORT,
        kind=kind,
    )
    assert seen["result"]["status"] == "SUCCESS"
    assert seen["result"]["audit_failed"] is False
    assert seen["executions"] == 1


@pytest.mark.parametrize(("door", "kind"), DOORS)
def test_a_response_that_cannot_be_written_flags_the_routed_result(door, kind, monkeypatch):
    sink = FlakySink()
    behaviour = Behaviour(kind=kind)
    gateway = build(behaviour, env={}, sink=sink, mode=AuditMode.STRICT)
    context = ExecutionContext(tenant="t", principal="p")
    side = Side(gateway, behaviour, {}, sink, context)
    door(VALID)(side)
    assert isinstance(gateway._routes.get("add"), ROUTES)

    original = sink.append

    def fail_after_opening(events: Any) -> None:
        if [e.type.value for e in events] == ["INVOCATION_RESPONSE"]:
            raise OSError("disk full")
        original(events)

    monkeypatch.setattr(sink, "append", fail_after_opening)
    gateway.audit._append = fail_after_opening  # the trail binds the sink's append once
    with counting_full_chain(side, monkeypatch):
        result = door(VALID)(side)
    assert side.full_chain_runs == 0
    assert result.status is Status.SUCCESS
    assert result.audit_failed is True
    assert behaviour.calls == 2


def test_memory_sink_batches_are_made_once_and_chained_in_append_order():
    sink = MemorySink()
    gateway = build(Behaviour(), env={}, sink=sink, mode=AuditMode.STRICT)
    contexts = [ExecutionContext(tenant="t", principal=f"p{i}") for i in range(3)]
    for _ in range(3):
        for context in contexts:
            assert gateway.invoke("add", VALID, context=context).status is Status.SUCCESS
    first = sink.records
    assert [r.event_id for r in sink.records] == [r.event_id for r in first]  # made once
    for context in contexts:
        trace = sink.read_trace(context.run_id)
        assert [r.sequence for r in trace] == list(range(1, 13))
        assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_a_plain_event_list_is_snapshotted_when_appended():
    sink = MemorySink()
    event = AuditEvent(EventType.SYSTEM_ERROR, trace_id="t1", name="before")
    sink.append([event])
    event.name = "after"  # changing the object afterwards does not change what was stored
    assert [r.name for r in sink.records] == ["before"]


def test_names_that_never_dispatched_are_not_compiled():
    gateway = build(Behaviour(), env={}, sink=None, mode=AuditMode.STRICT)
    context = ExecutionContext(tenant="t", principal="p")
    gateway.invoke("add", {"a": "x", "purpose": "Sum"}, context=context)
    assert "add" not in gateway._routes
    gateway.invoke("add", VALID, context=context)
    assert isinstance(gateway._routes["add"], Route)


class Colour(enum.Enum):
    RED = "red"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def total(items: Json[list[int]], label: str | None = None) -> int:
    """Sum the items (the tool could change the list it is given)."""
    items.append(0)
    return sum(items)


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def paint(colour: Colour, shade: Literal["light", "dark"] = "light", note: str | None = None) -> str:
    """Describe a colour."""
    return f"{shade} {colour.value}"


def test_a_value_that_validation_can_make_mutable_keeps_the_name_on_the_full_chain():
    gateway = Gateway.load(providers=[total], discover=False, env={}, governance=Governance())
    context = ExecutionContext(tenant="t", principal="p")
    result = gateway.invoke("total", {"items": "[1, 2]", "purpose": "Sum"}, context=context)
    assert (result.status, result.content) == (Status.SUCCESS, 3)
    assert gateway._routes["total"] is None  # Json[list[int]] validates a string into a list


def test_optional_literal_and_enum_parameters_are_routable():
    gateway = Gateway.load(providers=[paint], discover=False, env={}, governance=Governance())
    context = ExecutionContext(tenant="t", principal="p")
    for _ in range(2):
        result = gateway.invoke("paint", {"colour": "red", "purpose": "Describe"}, context=context)
        assert (result.status, result.content) == (Status.SUCCESS, "light red")
    assert isinstance(gateway._routes["paint"], Route)


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def scale(value: int, *, factor: int = 2, offset: int = 0) -> int:
    """Scale a value (keyword-only parameters: called by keyword)."""
    return value * factor + offset


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def subtract(a: int, b: int = 0, note: str | None = None) -> int:
    """Subtract (positional parameters with defaults: called positionally)."""
    return a - b


def _by_keyword(function: Callable[..., int]) -> Callable[..., int]:
    @functools.wraps(function)  # its signature says (a, b); it binds keywords only
    def wrapper(**kwargs: int) -> int:
        return function(**kwargs)

    return wrapper


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
@_by_keyword
def multiply(a: int, b: int) -> int:
    """Multiply (a wrapper whose signature is its function's: called by keyword)."""
    return a * b


@pytest.mark.parametrize(
    ("function", "name", "arguments", "content", "positional"),
    [
        (scale, "scale", {"factor": 3, "value": 5, "purpose": "Scale"}, 15, False),
        (scale, "scale", {"offset": 1, "value": 5, "purpose": "Scale"}, 11, False),
        (subtract, "subtract", {"b": 3, "a": 10, "purpose": "Subtract"}, 7, True),
        (subtract, "subtract", {"a": 10, "purpose": "Subtract"}, 10, True),
        (subtract, "subtract", {"note": "n", "b": 4, "a": 1, "purpose": "Subtract"}, -3, True),
        (multiply, "multiply", {"b": 4, "a": 3, "purpose": "Multiply"}, 12, False),
    ],
    ids=[
        "kw-only",
        "kw-only-defaults",
        "positional",
        "positional-defaults",
        "positional-reordered",
        "wrapped",
    ],
)
@pytest.mark.parametrize("door", ["invoke", "ainvoke"])
def test_the_route_calls_a_function_by_position_only_when_its_parameters_are_its_fields_in_order(
    function, name, arguments, content, positional, door, monkeypatch
):
    """Validated values come with every field, in the signature's order, whatever the arguments' order."""
    gateway = Gateway.load(providers=[function], discover=False, env={}, governance=Governance())
    context = ExecutionContext(tenant="t", principal="p")
    for call in range(2):  # the first call compiles the name; the second takes the route alone
        if call == 1:
            monkeypatch.setattr(Pipeline, "run", None)  # the full chain would fail the call
            monkeypatch.setattr(Pipeline, "arun", None)
        if door == "invoke":
            result = gateway.invoke(name, arguments, context=context)
        else:
            result = asyncio.run(gateway.ainvoke(name, arguments, context=context))
        assert (result.status, result.content) == (Status.SUCCESS, content)
    route = gateway._routes[name]
    assert isinstance(route, Route)
    assert route._positional is positional
    assert [r.status for r in context.trace.operations()] == ["SUCCESS", "SUCCESS"]


@pytest.mark.parametrize(
    "governance",
    [
        {"roles": {"support": ["add"]}},
        {"authorizers": [lambda tool, operation, context, arguments: Decision.allow()]},
        {"mappers": {"add": lambda content: None}},
        {"interceptors": []},
    ],
    ids=["roles", "authorizer", "mapper", "no-extra"],
)
@pytest.mark.parametrize("kind", KINDS)
def test_authorization_and_mappers_keep_every_call_on_the_full_chain(kind, governance, monkeypatch):
    """A name is compiled only when nothing but the built-in checks applies to it."""
    behaviour = Behaviour(kind=kind)
    gateway = build(behaviour, env={}, sink=MemorySink(), mode=AuditMode.STRICT, **governance)
    allowed = ExecutionContext(tenant="t", principal="p", roles=frozenset({"support"}))
    door = door_of(kind)
    for _ in range(2):
        assert door(VALID)(Side(gateway, behaviour, {}, None, allowed)).status is Status.SUCCESS
    routed = isinstance(gateway._routes.get("add"), ROUTES)
    assert routed is (governance == {"interceptors": []})
    if "roles" in governance:
        stranger = ExecutionContext(tenant="t", principal="q")
        for _ in range(2):
            result = door(VALID)(Side(gateway, behaviour, {}, None, stranger))
            assert (result.status, result.reason_code, result.attempts) == (Status.DENIED, "AUTH_DENIED", 0)
    assert behaviour.calls == 2


@pytest.mark.parametrize(("door", "kind"), DOORS)
@pytest.mark.parametrize(
    ("effect", "status", "executions"),
    [
        (Effect.UNSAFE, "UNCERTAIN_EFFECT", 1),
        (Effect.IDEMPOTENT, "SUCCESS", 2),
        (Effect.RECONCILABLE, "UNCERTAIN_EFFECT", 1),
    ],
)
def test_a_timeout_follows_the_effect_on_the_route_as_on_the_full_chain(
    door, kind, effect, status, executions, monkeypatch
):
    def flaky(side: Side) -> None:
        side.behaviour.raises = [TimeoutError("slow")]

    arguments = {"a": 1, "b": 2, "audit_as": "Record the sum"}
    seen, _ = compare(monkeypatch, kind=kind, call=door(arguments), prepare=flaky, effect=effect)
    assert seen["result"]["status"] == status
    assert seen["executions"] == executions


# -- async and class-based tools ------------------------------------------------------------------


def test_a_sync_call_of_an_async_tool_takes_the_full_chain_alike(monkeypatch):
    seen, side = compare(monkeypatch, invoke(VALID), kind="async")
    assert (seen["result"]["status"], seen["result"]["error_code"]) == ("ERROR", "ToolExecutionError")
    assert seen["executions"] == 0  # the coroutine function never ran
    assert side.full_chain_runs == 1


@pytest.mark.parametrize(("door", "kind"), CLASS_DOORS)
@pytest.mark.parametrize(
    ("refusal", "status", "code"),
    [
        (
            ToolDeniedError("outside the tool's roots", tool="add", reason_code="PATH_DENIED", rule="roots"),
            "DENIED",
            "PATH_DENIED",
        ),
        (ValueError("b must be even"), "INVALID_ARGUMENTS", "INVALID_ARGUMENTS"),
        (TypeError("secret-token-456"), "INVALID_ARGUMENTS", "INVALID_ARGUMENTS"),
    ],
)
def test_a_class_tool_that_refuses_its_arguments_is_refused_alike(
    door, kind, refusal, status, code, monkeypatch
):
    def refuse(side: Side) -> None:
        side.behaviour.refuse = refusal

    seen, side = compare(monkeypatch, door(VALID), prepare=refuse, kind=kind)
    assert (seen["result"]["status"], seen["result"]["reason_code"]) == (status, code)
    assert seen["executions"] == 0
    assert "secret-token-456" not in str(seen)
    assert side.full_chain_runs == 0  # refused on the route, by the chain's own validation step
    if status == "DENIED":  # the tool's own denial record, then the call's
        assert [r.get("reason_code") for r in seen["records"]] == ["PATH_DENIED", "PATH_DENIED"]


@pytest.mark.parametrize(("door", "kind"), CLASS_DOORS)
def test_a_class_tool_intent_with_warnings_is_recorded_alike(door, kind, monkeypatch):
    def warn(side: Side) -> None:
        side.behaviour.warnings = ("SOFT_LIMIT:close to the limit",)

    seen, _ = compare(monkeypatch, door(VALID), prepare=warn, kind=kind)
    assert seen["result"]["status"] == "SUCCESS"
    assert seen["result"]["warnings"] == ["SOFT_LIMIT:close to the limit"]
    decision = next(e for e in seen["events"] if e["type"].value == "GOVERNANCE_DECISION")
    assert list(decision["rule_ids"]) == ["SOFT_LIMIT"]


def _drop_kill_switch(route: Any) -> None:
    if isinstance(route, MethodRoute):  # it runs the plan's checks: take the kill switch out
        route._rest = tuple(check for check in route._rest if check.name != "kill_switch")
    else:
        route._engaged = lambda tool: False


def _drop_audit_opening(route: Any) -> None:
    route._hold_call = lambda batch: None


def _drop_validation(route: Any) -> None:
    route._rest = ()


def _drop_trail(route: Any) -> None:
    route._trail = None


@pytest.mark.parametrize(
    ("kind", "mutate", "scenario"),
    [
        ("def", _drop_kill_switch, "kill"),
        ("async", _drop_kill_switch, "kill"),
        ("class", _drop_kill_switch, "kill"),
        ("def", _drop_audit_opening, "valid"),
        ("async", _drop_audit_opening, "valid"),
        ("class", _drop_validation, "invalid"),
        ("class", _drop_trail, "valid"),
    ],
)
def test_a_mutated_route_is_caught_by_the_comparison(kind, mutate, scenario, monkeypatch):
    """The comparison is not vacuous: a route that skips a check or a record fails it."""

    def engage(side: Side) -> None:
        if scenario == "kill":
            side.env["TOOLBOX_KILL_SWITCH"] = "1"

    arguments = {"a": "x", "purpose": "Sum"} if scenario == "invalid" else VALID
    with pytest.raises(AssertionError):
        compare(monkeypatch, door_of(kind)(arguments), prepare=engage, kind=kind, mutate=mutate)


# -- a context the route has not seen: the tool is built with the access check's own decision ------


def test_a_withdrawn_acknowledgement_refuses_a_new_context_with_zero_executions():
    """An acknowledged tool's calls are decided afresh: once the acknowledgement is gone, refused."""
    ran: list[int] = []

    @tool(
        name="payments.refund",
        risk=RiskClass.MEMORY_ONLY,
        effect=Effect.READ_ONLY,
        acknowledgement=Acknowledgement(env="REFUND_ACK", value="yes"),
    )
    def refund(amount: int) -> int:
        """Refund an amount."""
        ran.append(amount)
        return amount

    env = {"REFUND_ACK": "yes"}
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[refund], discover=False, env=env, governance=Governance(audit=AuditTrail(sink))
    )
    first = ExecutionContext(tenant="t", principal="p")
    arguments = {"amount": 5, "purpose": "Refund"}
    assert gateway.invoke("payments.refund", arguments, context=first).status is Status.SUCCESS
    assert gateway.invoke("payments.refund", arguments, context=first).status is Status.SUCCESS
    del env["REFUND_ACK"]
    fresh = ExecutionContext(tenant="t", principal="p")
    result = gateway.invoke("payments.refund", arguments, context=fresh)
    assert (result.status, result.reason_code) == (Status.DENIED, "NOT_ACKNOWLEDGED")
    assert ran == [5, 5]  # nothing ran for the new context
    (decision,) = [
        e
        for e in sink.read_trace(fresh.run_id)
        if e.type is EventType.GOVERNANCE_DECISION and e.decision == "DENY"
    ]
    assert decision.reason_code == "NOT_ACKNOWLEDGED"


@pytest.mark.parametrize("door", ["invoke", "ainvoke"])
def test_many_new_contexts_at_once_each_get_their_own_tool_and_record(door: str) -> None:
    """Concurrent first calls of many contexts: every call runs once, each context's trace has it."""
    sink = MemorySink()

    @tool(name="math.add", risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    gateway = Gateway.load(
        providers=[add], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    warm = ExecutionContext(tenant="t", principal="p")
    assert gateway.invoke("math.add", {"a": 1, "b": 2, "purpose": "Sum"}, context=warm).content == 3
    contexts = [ExecutionContext(tenant="t", principal=f"p{i}") for i in range(64)]

    async def all_at_once() -> list[Any]:
        if door == "invoke":
            return await asyncio.gather(
                *(
                    asyncio.to_thread(
                        gateway.invoke, "math.add", {"a": i, "b": 1, "purpose": "Sum"}, context=c
                    )
                    for i, c in enumerate(contexts)
                )
            )
        return await asyncio.gather(
            *(
                gateway.ainvoke("math.add", {"a": i, "b": 1, "purpose": "Sum"}, context=c)
                for i, c in enumerate(contexts)
            )
        )

    results = asyncio.run(all_at_once())
    assert [r.content for r in results] == [i + 1 for i in range(64)]
    for context in contexts:
        assert [r.status for r in context.trace.records()] == ["SUCCESS"]
        kinds = [e.type.value for e in sink.read_trace(context.run_id)]
        assert kinds == [
            "INTENT_DECLARED",
            "GOVERNANCE_DECISION",
            "INVOCATION_REQUEST",
            "INVOCATION_RESPONSE",
        ]


def test_a_tool_that_cannot_be_built_for_a_new_context_fails_as_without_a_route():
    """A provider that refuses to build for a context: the routed gateway answers as a fresh one does."""
    built: list[str] = []

    class Ledger:
        """A class-based tool its provider refuses to build for one tenant."""

        def __init__(self, runtime: ToolRuntime) -> None:
            if runtime.context.tenant == "blocked":
                raise ValueError("this tenant has no ledger")
            built.append(runtime.context.tenant)
            self._runtime = runtime

        def lookup(self, key: str) -> Any:
            """Intent to read one entry."""
            return self._runtime.read_intent("lookup", key.upper, arguments={"key": key})

    descriptor = ToolDescriptor(
        name="ledger",
        version="1",
        summary="A ledger.",
        risk=RiskClass.MEMORY_ONLY,
        operations=(OperationDescriptor(name="lookup", effect=Effect.READ_ONLY, summary="Read one entry."),),
    )

    def gateway() -> Gateway:
        provider = ToolProvider(tool_type=Ledger, descriptor=descriptor)
        return Gateway.load(providers=[provider], discover=False, env={}, governance=Governance())

    arguments = {"key": "k", "purpose": "Read"}
    routed = gateway()
    for tenant in ("a", "a", "b"):  # the route is learned, then serves a new context
        context = ExecutionContext(tenant=tenant, principal="p")
        assert routed.invoke("ledger.lookup", arguments, context=context).content == "K"
    assert routed._routes.get("ledger.lookup") is not None
    outcomes = []
    for made in (routed, gateway()):
        blocked = ExecutionContext(tenant="blocked", principal="p")
        result = made.invoke("ledger.lookup", arguments, context=blocked)
        outcomes.append((result.status, result.reason_code, result.attempts, result.message))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][:3] == (Status.DENIED, "GOVERNANCE_EVALUATION_FAILED", 0)
    assert built == ["a", "a", "b"]  # one build per context; none for the blocked one
