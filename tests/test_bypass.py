"""Governance cannot be bypassed: every way to reach an operation's effect without the chain fails.

Each attack runs with the kill switch engaged where that makes sense, and
asserts `GovernanceBypassError` and that the effect happened zero times.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
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
    ToolPolicy,
    ToolProvider,
    ToolRuntime,
    WriteIntent,
    tool,
)
from toolbox.errors import GovernanceBypassError
from toolbox.foundations._dispatch import Permit, run_dispatched
from toolbox.provider import require_dispatch
from toolbox.registry._intent import dispatch_calls
from toolbox.testing import build_tools, test_context

#: Every effect that happened, in order: (tool, operation).
EFFECTS: list[tuple[str, str]] = []

LEDGER = ToolDescriptor(
    name="ledger",
    version="1",
    summary="Posts entries.",
    risk=RiskClass.EXTERNAL_RESOURCE,
    operations=(
        OperationDescriptor(name="read", effect=Effect.READ_ONLY),
        OperationDescriptor(name="post", effect=Effect.UNSAFE),
    ),
)
RELAY = ToolDescriptor(
    name="relay",
    version="1",
    summary="Runs a scripted action inside its own dispatch.",
    risk=RiskClass.EXTERNAL_RESOURCE,
    operations=(OperationDescriptor(name="run", effect=Effect.UNSAFE),),
)


class Ledger:
    """A class-based tool whose effect is recorded in `EFFECTS`."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def _effect(self, operation: str) -> str:
        require_dispatch(self._runtime.tool_name)  # a provider's own internal check
        EFFECTS.append(("ledger", operation))
        return operation

    def read(self) -> ReadIntent[str]:
        """Intent to read."""

        async def aread() -> str:
            return self._effect("read")

        return self._runtime.read_intent("read", lambda: self._effect("read"), acall=aread)

    def post(self, amount: int) -> WriteIntent[str]:
        """Intent to post ``amount``."""
        return self._runtime.write_intent("post", lambda: self._effect("post"), arguments={"amount": amount})


class Relay:
    """Runs ``Relay.action`` (set by a test) inside its dispatch: the attacker's seat."""

    action: Callable[[], Any] = staticmethod(lambda: None)
    aaction: Callable[[], Awaitable[Any]] | None = None

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def run(self) -> WriteIntent[Any]:
        """Intent to run the action."""
        return self._runtime.write_intent("run", Relay.action, acall=Relay.aaction)


PROVIDERS = [
    ToolProvider(tool_type=Ledger, descriptor=LEDGER),
    ToolProvider(tool_type=Relay, descriptor=RELAY),
]
POLICY = ToolPolicy.standard().allow(Ledger).allow(Relay)


@pytest.fixture(autouse=True)
def _reset() -> None:
    EFFECTS.clear()
    Relay.action = staticmethod(lambda: None)
    Relay.aaction = None


def _tools(*, governance: Governance | None = None, context: ExecutionContext | None = None):
    return build_tools(*PROVIDERS, policy=POLICY, governance=governance, context=context)


KILLED = Governance(enabled=False)


def _ledger_effects() -> list[tuple[str, str]]:
    return [e for e in EFFECTS if e[0] == "ledger"]


# -- the finding: a public way to the call -------------------------------------------------------


def test_operation_calls_is_gone() -> None:
    """Issue 9 finding 10: ``intent.operation_calls()`` no longer exists."""
    intent = _tools(governance=KILLED).get(Ledger).read()
    with pytest.raises(AttributeError):
        intent.operation_calls()  # type: ignore[attr-defined]
    assert _ledger_effects() == []


@pytest.mark.parametrize("operation", ["read", "post"])
def test_intent_calls_refuse_outside_the_chain_with_the_kill_switch_engaged(operation: str) -> None:
    """The calls an intent holds (reached via private attributes or the chain's accessor) refuse."""
    tools = _tools(governance=KILLED)
    ledger = tools.get(Ledger)
    intent = ledger.read() if operation == "read" else ledger.post(5)
    ready = intent.purpose("Read") if operation == "read" else intent.audit_as("Post")  # type: ignore[union-attr]
    call, acall = dispatch_calls(intent)
    for attempt in (call, intent._call, ready._call):
        with pytest.raises(GovernanceBypassError) as caught:
            attempt()
        assert caught.value.tool == "ledger"
        assert "outside the governed chain" in str(caught.value)
    if acall is not None:
        with pytest.raises(GovernanceBypassError):
            asyncio.run(acall())  # type: ignore[arg-type]
    assert _ledger_effects() == []
    # The governed way is refused by the kill switch, also with zero effects.
    result = Gateway(tools.catalog).invoke("ledger.read", {"purpose": "Read"}, context=tools.context)
    assert (result.status, result.reason_code) == (Status.DENIED, "KILL_SWITCH")
    assert _ledger_effects() == []


def test_provider_internals_refuse_outside_the_chain() -> None:
    """A provider's internal method that checks `require_dispatch` refuses a direct call."""
    ledger = _tools(governance=KILLED).get(Ledger)
    with pytest.raises(GovernanceBypassError):
        ledger._effect("post")
    assert _ledger_effects() == []


def test_a_forged_or_dead_permit_does_not_open_the_call() -> None:
    """A permit made by hand in the caller's context is not set; a dead permit is refused."""
    intent = _tools().get(Ledger).read()
    Permit("ledger")  # constructing one sets nothing
    with pytest.raises(GovernanceBypassError):
        intent._call()
    # A permit for another tool does not open this one.
    with pytest.raises(GovernanceBypassError, match="holds no permit for 'ledger'"):
        run_dispatched("relay", intent._call)
    assert _ledger_effects() == []


def test_governed_calls_still_run_on_both_doors() -> None:
    """The chain holds the permit: typed, by name, sync and async, all run once each."""
    tools = _tools()
    assert tools.get(Ledger).read().purpose("Read").execute() == "read"
    assert asyncio.run(tools.get(Ledger).read().purpose("Read").aexecute()) == "read"
    gateway = Gateway(tools.catalog)
    post = {"amount": 1, "audit_as": "Post"}
    assert gateway.invoke("ledger.post", post, context=tools.context).status is Status.SUCCESS
    result = asyncio.run(gateway.ainvoke("ledger.post", post, context=tools.context))
    assert result.status is Status.SUCCESS
    assert _ledger_effects() == [("ledger", "read")] * 2 + [("ledger", "post")] * 2


def test_timed_calls_run_on_a_worker_thread_with_the_permit() -> None:
    """A per-operation timeout runs the call on a pool thread: the permit goes with it."""
    tools = _tools(governance=Governance(timeouts={"ledger": 5.0}))
    assert tools.get(Ledger).post(1).audit_as("Post").execute() == "post"
    assert _ledger_effects() == [("ledger", "post")]


class _Sneaky:
    """An interceptor that tries to run the operation itself, before dispatch."""

    name = "sneaky"
    per_attempt = False

    def __call__(self, invocation: Any) -> None:
        invocation.call()


def test_an_interceptor_cannot_run_the_operation_before_dispatch() -> None:
    """Checks see the invocation, not a permit: calling it fails closed, zero effects."""
    tools = _tools(governance=Governance(interceptors=[_Sneaky()]))
    result = Gateway(tools.catalog).invoke(
        "ledger.post", {"amount": 1, "audit_as": "Post"}, context=tools.context
    )
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "GOVERNANCE_EVALUATION_FAILED",
        "sneaky",
    )
    assert _ledger_effects() == []


# -- @tool ---------------------------------------------------------------------------------------


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
def stamp(label: str) -> str:
    """Stamp a label."""
    EFFECTS.append(("stamp", label))
    return label.upper()


def test_the_tool_wrapper_refuses_and_the_plain_function_stays_callable() -> None:
    """``stamp(...)`` is the governed wrapper (refused); ``stamp.function`` is the plain function."""
    with pytest.raises(GovernanceBypassError) as caught:
        stamp("x")
    assert caught.value.tool == "stamp"
    assert "stamp.function" in str(caught.value)
    assert EFFECTS == []
    assert stamp.function("x") == "X"
    assert EFFECTS == [("stamp", "x")]


def test_the_tool_wrapper_refuses_even_inside_its_own_dispatch() -> None:
    """The chain never calls the wrapper; a function calling it (or another tool's) is refused."""

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
    def outer() -> str:
        """Call another tool directly."""
        return stamp("inner")  # type: ignore[no-any-return]

    tools = build_tools(outer, stamp)
    result = Gateway(tools.catalog).invoke("outer", {"audit_as": "Try"}, context=tools.context)
    assert (result.status, result.error_code) == (Status.ERROR, "GovernanceBypassError")
    assert EFFECTS == []


# -- a tool reaching another tool --------------------------------------------------------------


def test_a_tool_cannot_call_another_tools_internals_from_its_dispatch() -> None:
    """Inside relay's dispatch, ledger's calls and internals still refuse: the permit is relay's."""
    tools = _tools()
    ledger = tools.get(Ledger)
    intent = ledger.post(9)
    attempts: list[str] = []

    def attack() -> None:
        for name, call in [("call", intent._call), ("internal", lambda: ledger._effect("post"))]:
            try:
                call()
            except GovernanceBypassError as exc:
                assert "inside a dispatch of 'relay'" in str(exc)
                attempts.append(name)
        raise GovernanceBypassError("stop", tool="relay")

    Relay.action = staticmethod(attack)
    result = Gateway(tools.catalog).invoke("relay.run", {"audit_as": "Attack"}, context=tools.context)
    assert attempts == ["call", "internal"]
    assert (result.status, result.error_code) == (Status.ERROR, "GovernanceBypassError")
    assert _ledger_effects() == []


def test_a_tool_calling_another_tool_through_the_chain_is_governed() -> None:
    """The legitimate way: an intent of the other tool, executed, goes through the chain."""
    tools = _tools(governance=Governance(disabled_tools=["ledger"]))
    Relay.action = staticmethod(lambda: tools.get(Ledger).post(1).audit_as("Nested").execute())
    result = Gateway(tools.catalog).invoke("relay.run", {"audit_as": "Nest"}, context=tools.context)
    assert (result.status, result.reason_code) == (Status.DENIED, "KILL_SWITCH")
    assert _ledger_effects() == []
    denied = [r for r in tools.context.trace.operations("ledger")]
    assert [(r.status, r.reason_code) for r in denied] == [("DENIED", "KILL_SWITCH")]


def test_threads_started_inside_a_dispatch_hold_no_permit() -> None:
    """A thread begins with an empty context: even the dispatched tool's own calls refuse there."""
    tools = _tools()
    intent = tools.get(Ledger).post(1)
    own = tools.get(Relay).run()
    errors: list[BaseException] = []

    def attack() -> None:
        def body() -> None:
            for call in (intent._call, own._call):
                try:
                    call()
                except GovernanceBypassError as exc:
                    errors.append(exc)

        thread = threading.Thread(target=body)
        thread.start()
        thread.join()

    Relay.action = staticmethod(attack)
    assert tools.get(Relay).run().audit_as("Spawn").execute() is None
    assert [type(e) for e in errors] == [GovernanceBypassError] * 2
    assert _ledger_effects() == []


def test_tasks_spawned_inside_an_async_dispatch_cannot_reach_other_tools_or_outlive_it() -> None:
    """A task copies the context: it may not call another tool, and its permit dies with the attempt."""
    tools = _tools()
    ledger_call = tools.get(Ledger).post(1)._call
    relay_intent = tools.get(Relay).run()
    outcomes: dict[str, str] = {}
    later: list[asyncio.Task[None]] = []

    async def main() -> None:
        gate = asyncio.Event()

        async def try_call(label: str, call: Callable[[], Any], wait: bool) -> None:
            if wait:
                await gate.wait()
            try:
                call()
                outcomes[label] = "ran"
            except GovernanceBypassError:
                outcomes[label] = "refused"

        async def action() -> None:
            await try_call("other tool, during", ledger_call, wait=False)
            later.append(asyncio.create_task(try_call("other tool, after", ledger_call, wait=True)))
            later.append(asyncio.create_task(try_call("own tool, after", relay_intent._call, wait=True)))

        Relay.aaction = action
        await tools.get(Relay).run().audit_as("Spawn").aexecute()
        gate.set()
        await asyncio.gather(*later)

    asyncio.run(main())
    assert outcomes == {
        "other tool, during": "refused",
        "other tool, after": "refused",
        "own tool, after": "refused",
    }
    assert _ledger_effects() == []


def test_a_permit_is_gone_after_the_dispatch_even_in_the_callers_context() -> None:
    """After execute() returns, the caller's context holds no permit."""
    tools = _tools()
    intent = tools.get(Ledger).post(1)
    tools.get(Ledger).read().purpose("Read").execute()
    with pytest.raises(GovernanceBypassError):
        intent._call()
    assert _ledger_effects() == [("ledger", "read")]


def test_bypass_error_is_a_toolbox_runtime_error() -> None:
    """Part of the error tree, and a RuntimeError for callers that only know the builtins."""
    from toolbox import ToolboxError

    assert issubclass(GovernanceBypassError, ToolboxError)
    assert issubclass(GovernanceBypassError, RuntimeError)
    assert test_context().run_id
