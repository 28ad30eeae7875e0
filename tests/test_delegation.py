"""Delegation narrows only: ctx.delegate() for sub-agents, DELEGATION_SCOPE denials, the run tree."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit_sql_support import Store, make_store
from toolbox import (
    Budget,
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    RiskClass,
    Status,
    ToolDeniedError,
    tool,
)
from toolbox.audit import AuditTrail, EventType, JsonlSink, MemorySink, verify_chain
from toolbox.cli import main
from toolbox.errors import DelegationError
from toolbox.foundations._delegation import DelegationScope

RAN: list[str] = []
_RAN_LOCK = threading.Lock()


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def search(query: str) -> str:
    """Search."""
    with _RAN_LOCK:
        RAN.append("search")
    return query


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
def send(text: str) -> str:
    """Send."""
    with _RAN_LOCK:
        RAN.append("send")
    return text


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


def _parent(**fields: object) -> ExecutionContext:
    return ExecutionContext(tenant="acme", principal="planner", roles={"reader", "writer"}, **fields)  # type: ignore[arg-type]


def _parent_of(tenant: str) -> ExecutionContext:
    return ExecutionContext(tenant=tenant, principal="someone")


def _gateway(sink: object | None = None) -> tuple[Gateway, MemorySink]:
    memory = MemorySink()
    trail = AuditTrail(sink or memory, fallback_path=None)  # type: ignore[arg-type]
    gateway = Gateway.load(
        providers=[search, send], discover=False, env={}, governance=Governance(audit=trail)
    )
    return gateway, memory


SEARCH = {"query": "q", "purpose": "Find"}
SEND = {"text": "hi", "audit_as": "Notify"}

# -- widening raises at the call site ---------------------------------------------------------


def test_the_child_is_a_new_run_of_the_same_caller() -> None:
    """New run id, same tenant, principal and correlation; parent_run_id links them."""
    parent = _parent()
    child = parent.delegate(tools=["search"])
    assert (child.tenant, child.principal, child.correlation_id) == (
        parent.tenant,
        parent.principal,
        parent.correlation_id,
    )
    assert child.run_id != parent.run_id
    assert child.parent_run_id == parent.run_id
    assert child.roles == parent.roles
    assert len(child.trace) == 0


@pytest.mark.parametrize(
    ("parent_kwargs", "child_kwargs", "message"),
    [
        ({"tools": ["search"]}, {"tools": ["search", "send"]}, "tool 'send'"),
        ({"operations": ["search.call"]}, {"operations": ["send.call"]}, "operation 'send.call'"),
        ({"operations": ["search.call"]}, {"tools": ["send"]}, "tool 'send'"),
        ({}, {"tools": ["search"], "operations": ["send.call"]}, "not among the delegated tools"),
        ({}, {"operations": ["search"]}, "tool.operation"),
        ({}, {"tools": "search"}, "not one string"),
        ({}, {"tools": [""]}, "non-empty names"),
        ({}, {"tools": [object]}, "non-empty names"),
        ({}, {"roles": ["admin"]}, "roles this run does not have"),
        ({}, {"roles": "reader"}, "not one string"),
        ({"budget": 3}, {"budget": 4}, "exceeds the 3 left"),
        ({"budget": Budget(per_tool={"send": 1})}, {"budget": Budget(per_tool={"send": 2})}, "'send'"),
        ({}, {"budget": True}, "int or a Budget"),
        ({"deadline": 60}, {"deadline": 120}, "deadline must not be later"),
    ],
)
def test_every_widening_raises(
    parent_kwargs: dict[str, object], child_kwargs: dict[str, object], message: str
) -> None:
    """Each dimension: asking for more than the parent has raises DelegationError, nothing is built."""
    now = datetime.now(timezone.utc)
    for kwargs in (parent_kwargs, child_kwargs):
        if "deadline" in kwargs:
            kwargs["deadline"] = now + timedelta(seconds=kwargs["deadline"])  # type: ignore[operator]
    base = _parent(budget=Budget(max_calls=10)) if "budget" not in parent_kwargs else _parent()
    parent = base.delegate(**parent_kwargs) if parent_kwargs else base  # type: ignore[arg-type]
    with pytest.raises(DelegationError, match=message):
        parent.delegate(**child_kwargs)  # type: ignore[arg-type]


def test_a_tool_function_stands_for_its_name() -> None:
    """tools=[search] is tools=["search"]."""
    scope = _parent().delegate(tools=[search]).scope
    assert scope is not None and scope.tools == frozenset({"search"})


def test_a_spent_parent_cannot_hand_out_what_it_spent() -> None:
    """The carve is checked against what is left, not the original limit."""
    budget = Budget(max_calls=3)
    parent = _parent(budget=budget)
    gateway, _ = _gateway()
    for _ in range(2):
        assert gateway.invoke("search", SEARCH, context=parent).status is Status.SUCCESS
    with pytest.raises(DelegationError, match="exceeds the 1 left"):
        parent.delegate(budget=2)
    assert parent.delegate(budget=1).budget is not None


def test_a_naive_deadline_is_refused() -> None:
    """The child's deadline must be timezone-aware, like any context's."""
    with pytest.raises(ValueError, match="timezone-aware"):
        _parent().delegate(deadline=datetime.now() + timedelta(hours=1))


# -- DELEGATION_SCOPE denials --------------------------------------------------------------------


def test_out_of_scope_by_name_call_is_denied_with_zero_executions_and_audited() -> None:
    """DENIED/DELEGATION_SCOPE, the tool never ran, and the audit trail holds the decision."""
    gateway, memory = _gateway()
    parent = _parent()
    child = parent.delegate(tools=["search"])
    result = gateway.invoke("send", SEND, context=child)
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "DELEGATION_SCOPE",
        "delegation:scope",
    )
    assert result.attempts == 0
    assert RAN == []
    events = memory.read_trace(child.run_id)
    decision = next(e for e in events if e.type is EventType.GOVERNANCE_DECISION)
    assert (decision.decision, decision.reason_code, decision.name) == ("DENY", "DELEGATION_SCOPE", "send")
    assert {e.parent_run_id for e in events} == {parent.run_id}
    assert [r.reason_code for r in child.trace.operations()] == ["DELEGATION_SCOPE"]


def test_out_of_scope_typed_call_raises_with_zero_executions() -> None:
    """The typed door raises ToolDeniedError(DELEGATION_SCOPE); the function never ran."""
    gateway, _ = _gateway()
    child = _parent().delegate(operations=["search.call"])
    tools = gateway.tools_for(child)
    with pytest.raises(ToolDeniedError) as caught:
        tools.get(send).call("hi").audit_as("Notify").execute()
    assert caught.value.reason_code == "DELEGATION_SCOPE"
    assert tools.get(search).call("q").purpose("Find").execute() == "q"
    assert RAN == ["search"]


def test_a_compiled_route_never_skips_the_scope() -> None:
    """The by-name hot path is compiled by an unscoped call; a scoped context still gets DENIED."""
    gateway, _ = _gateway()
    parent = _parent()
    for _ in range(3):  # compiles and uses the route of "send"
        assert gateway.invoke("send", SEND, context=parent).status is Status.SUCCESS
    RAN.clear()
    child = parent.delegate(tools=["search"])
    for _ in range(3):
        result = gateway.invoke("send", SEND, context=child)
        assert (result.status, result.reason_code) == (Status.DENIED, "DELEGATION_SCOPE")
    assert RAN == []
    assert gateway.invoke("search", SEARCH, context=child).status is Status.SUCCESS
    assert RAN == ["search"]


async def _ainvoke(
    gateway: Gateway, name: str, arguments: dict[str, object], context: ExecutionContext
) -> Status:
    return (await gateway.ainvoke(name, arguments, context=context)).status


def test_async_door_is_scoped_too() -> None:
    """ainvoke and aexecute are refused the same way."""
    import asyncio

    gateway, _ = _gateway()
    child = _parent().delegate(tools=["search"])
    assert asyncio.run(_ainvoke(gateway, "send", SEND, child)) is Status.DENIED
    with pytest.raises(ToolDeniedError):
        asyncio.run(gateway.tools_for(child).get(send).call("x").audit_as("Notify").aexecute())
    assert RAN == []


def test_nested_delegation_narrows_again_and_never_widens_back() -> None:
    """A grandchild is checked against every ancestor; it cannot name what its parent dropped."""
    gateway, memory = _gateway()
    root = _parent()
    child = root.delegate(tools=["search", "send"], roles=["reader"])
    grandchild = child.delegate(operations=["search.call"])
    assert grandchild.parent_run_id == child.run_id
    with pytest.raises(DelegationError):
        grandchild.delegate(tools=["send"])
    with pytest.raises(DelegationError):
        grandchild.delegate(roles=["writer"])
    assert gateway.invoke("send", SEND, context=grandchild).reason_code == "DELEGATION_SCOPE"
    assert gateway.invoke("search", SEARCH, context=grandchild).status is Status.SUCCESS
    assert RAN == ["search"]
    assert {e.parent_run_id for e in memory.read_trace(grandchild.run_id)} == {child.run_id}


@given(
    parent_tools=st.none() | st.sets(st.sampled_from(["a", "b", "c"])),
    parent_ops=st.none() | st.sets(st.sampled_from(["a.x", "a.y", "b.x", "c.y"])),
    child_tools=st.none() | st.sets(st.sampled_from(["a", "b", "c"])),
    child_ops=st.none() | st.sets(st.sampled_from(["a.x", "a.y", "b.x", "c.y"])),
)
def test_a_child_scope_never_allows_what_its_parent_does_not(
    parent_tools: set[str] | None,
    parent_ops: set[str] | None,
    child_tools: set[str] | None,
    child_ops: set[str] | None,
) -> None:
    """Property: whatever is asked, the child either raises or allows a subset of the parent."""
    try:
        parent = DelegationScope.narrow(None, parent_tools, parent_ops)
    except DelegationError:
        return  # an inconsistent parent (an operation of a tool it does not list) is refused too
    try:
        child = DelegationScope.narrow(parent, child_tools, child_ops)
    except DelegationError:
        return
    for tool_name in "abc":
        for operation in "xy":
            if child is not None and child.allows(tool_name, operation):
                assert parent is None or parent.allows(tool_name, operation)


# -- budgets -------------------------------------------------------------------------------------


def test_spending_in_the_child_spends_the_parents_budget() -> None:
    """A child's call counts in the child and in the parent; the parent's exhaustion stops the child."""
    gateway, _ = _gateway()
    budget = Budget(max_calls=3)
    parent = _parent(budget=budget)
    child = parent.delegate(budget=2)
    assert gateway.invoke("search", SEARCH, context=child).status is Status.SUCCESS
    assert (budget.calls, child.budget.calls) == (1, 1)  # type: ignore[union-attr]
    assert gateway.invoke("search", SEARCH, context=parent).status is Status.SUCCESS
    assert gateway.invoke("search", SEARCH, context=parent).status is Status.SUCCESS
    refused = gateway.invoke("search", SEARCH, context=child)
    assert (refused.status, refused.reason_code, refused.rule) == (
        Status.DENIED,
        "BUDGET_EXHAUSTED",
        "parent:budget:run",
    )
    assert RAN == ["search"] * 3


def test_remaining_counts_every_level() -> None:
    """remaining() is the least left over the budget and its ancestors, totals and per tool."""
    root = Budget(max_calls=10, per_tool={"send": 4})
    child = root.carve(max_calls=6, per_tool={"search": 5})
    grandchild = child.carve(per_tool={"send": 2})
    assert (root.remaining(), child.remaining(), grandchild.remaining()) == (10, 6, 6)
    assert grandchild.remaining("send") == 2
    assert grandchild.try_consume("send") is None
    assert (root.remaining("send"), child.remaining("search"), grandchild.remaining()) == (3, 5, 5)
    assert Budget().remaining() is None
    # A per-tool limit is compared with what is left for that tool, not with the total.
    assert Budget(max_calls=1).carve(per_tool={"search": 5}).remaining("search") == 1


def test_a_child_without_its_own_budget_shares_the_parents() -> None:
    """delegate() without budget= still counts every call in the parent."""
    budget = Budget(max_calls=1)
    child = _parent(budget=budget).delegate(tools=["search"])
    gateway, _ = _gateway()
    assert gateway.invoke("search", SEARCH, context=child).status is Status.SUCCESS
    assert gateway.invoke("search", SEARCH, context=child).reason_code == "BUDGET_EXHAUSTED"
    assert budget.calls == 1


def test_concurrent_spending_never_exceeds_the_parents_budget() -> None:
    """Threads spending in the parent, two children and a grandchild: exactly the parent's limit runs."""
    gateway, _ = _gateway()
    budget = Budget(max_calls=40)
    parent = _parent(budget=budget)
    first = parent.delegate(budget=30)
    second = parent.delegate(budget=30)
    grandchild = first.delegate(budget=20)
    contexts = [parent, first, second, grandchild]
    statuses: list[Status] = []
    start = threading.Barrier(len(contexts) * 2)

    def spend(context: ExecutionContext) -> None:
        start.wait()
        for _ in range(25):
            status = gateway.invoke("search", SEARCH, context=context).status
            with _RAN_LOCK:
                statuses.append(status)

    threads = [threading.Thread(target=spend, args=(c,)) for c in contexts * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses.count(Status.SUCCESS) == len(RAN) == budget.calls == 40
    assert first.budget.calls <= 30 and second.budget.calls <= 30  # type: ignore[union-attr]
    assert grandchild.budget.calls <= 20  # type: ignore[union-attr]
    assert first.budget.calls >= grandchild.budget.calls  # type: ignore[union-attr]


@given(
    limits=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=4),
    spends=st.lists(
        st.tuples(st.integers(min_value=0, max_value=3), st.sampled_from(["a", "b"])), max_size=40
    ),
)
def test_no_level_of_a_budget_tree_is_ever_overspent(
    limits: list[int], spends: list[tuple[int, str]]
) -> None:
    """Property: a chain root -> child -> ... where each level is carved as far as allowed; any spending
    sequence counts a call at every level or at none, and never beyond any level's limit."""
    chain = [Budget(max_calls=limits[0], per_tool={"a": limits[0] // 2})]
    for limit in limits[1:]:
        chain.append(chain[-1].carve(max_calls=min(limit, chain[-1].remaining() or 0)))
    for level, tool_name in spends:
        budget = chain[min(level, len(chain) - 1)]
        before = [b.calls for b in chain]
        refused = budget.try_consume(tool_name)
        after = [b.calls for b in chain]
        changed = [i for i, (x, y) in enumerate(zip(before, after, strict=True)) if x != y]
        depth = chain.index(budget)
        assert changed == ([] if refused else list(range(depth + 1)))
    for b in chain:
        assert b.max_calls is None or b.calls <= b.max_calls
    assert chain[0].calls_of("a") <= limits[0] // 2


# -- deadlines -----------------------------------------------------------------------------------


def test_the_deadline_is_inherited_and_may_only_come_earlier() -> None:
    """No deadline given: the parent's. An earlier one is kept; a passed one denies."""
    soon = datetime.now(timezone.utc) + timedelta(hours=1)
    parent = _parent(deadline=soon)
    assert parent.delegate().deadline == soon
    earlier = soon - timedelta(minutes=30)
    assert parent.delegate(deadline=earlier).deadline == earlier
    assert _parent().delegate(deadline=soon).deadline == soon
    gateway, _ = _gateway()
    past = datetime.now(timezone.utc) - timedelta(seconds=1)
    expired = _parent(deadline=soon).delegate(deadline=past)
    result = gateway.invoke("search", SEARCH, context=expired)
    assert (result.status, result.reason_code) == (Status.DENIED, "DEADLINE_EXCEEDED")
    assert RAN == []


# -- the audit trail -----------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


def test_parent_run_id_is_persisted_in_sql_stores(sql_store: Store) -> None:
    """SQLite and PostgreSQL store the parent of every child event; chains verify; queries find them."""
    sink = sql_store.sink()
    gateway, _ = _gateway(sink)
    parent = _parent()
    child = parent.delegate(tools=["search"])
    gateway.invoke("search", SEARCH, context=parent)
    gateway.invoke("search", SEARCH, context=child)
    gateway.invoke("send", SEND, context=child)
    parent_events = sink.read_trace(parent.run_id)
    child_events = sink.read_trace(child.run_id)
    assert {e.parent_run_id for e in parent_events} == {None}
    assert {e.parent_run_id for e in child_events} == {parent.run_id}
    assert verify_chain(parent_events) == verify_chain(child_events) == []
    from toolbox.audit import AuditQuery

    found = sink.query(AuditQuery(parent_run_id=parent.run_id))
    assert {e.trace_id for e in found} == {child.run_id}
    trail = AuditTrail(sink, fallback_path=None)
    scoped = trail.query(context=parent, parent_run_id=parent.run_id)
    assert {e.trace_id for e in scoped} == {child.run_id}
    assert trail.query(context=_parent_of("other-tenant"), parent_run_id=parent.run_id) == []


def _show(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().out


def test_audit_show_draws_the_run_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`toolbox audit show` prints the run, its sub-agents and theirs; a child names its parent."""
    path = tmp_path / "audit.jsonl"
    gateway, _ = _gateway(JsonlSink(path))
    root = _parent()
    first = root.delegate(tools=["search"])
    second = root.delegate(tools=["send"])
    grandchild = first.delegate(operations=["search.call"])
    gateway.invoke("search", SEARCH, context=root)
    gateway.invoke("search", SEARCH, context=first)
    gateway.invoke("send", SEND, context=second)
    gateway.invoke("send", SEND, context=grandchild)  # denied: still a run of the tree

    status, out = _show(capsys, "audit", "show", root.run_id, "--jsonl", path)
    assert status == 0
    lines = out.splitlines()
    start = lines.index("Runs:")
    assert lines[start + 1 : start + 5] == [
        f"  {root.run_id}  4 event(s)",
        f"  ├── {first.run_id}  4 event(s)",
        f"  │   └── {grandchild.run_id}  3 event(s)",
        f"  └── {second.run_id}  4 event(s)",
    ]
    assert lines[-1] == "Chain: intact"

    status, out = _show(capsys, "audit", "show", grandchild.run_id, "--jsonl", path)
    assert f"  (delegated by {first.run_id})" in out.splitlines()

    status, out = _show(capsys, "--json", "audit", "show", root.run_id, "--jsonl", path)
    document = json.loads(out)
    assert document["parent_run_id"] is None
    tree = document["runs"]
    assert [c["run_id"] for c in tree["children"]] == [first.run_id, second.run_id]
    assert tree["children"][0]["children"][0]["run_id"] == grandchild.run_id


def test_audit_show_without_delegation_prints_no_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with no parent and no children prints exactly as before."""
    path = tmp_path / "audit.jsonl"
    gateway, _ = _gateway(JsonlSink(path))
    ctx = _parent()
    gateway.invoke("search", SEARCH, context=ctx)
    _, out = _show(capsys, "audit", "show", ctx.run_id, "--jsonl", path)
    assert "Runs:" not in out
