"""The governance promises, each a check that runs on any door of any world.

A check asserts what the caller sees (status and reason), that the tool's code
ran exactly as often as it should (zero times for every refusal), and, where
the call reached the chain, the audit event. Every check acts as fresh
principals (`World.context`), so the shared limits of one never touch another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.doors import NO_INTENT, Door
from conformance.world import TENANT, World
from toolbox import Status

SUCCESS, DENIED = Status.SUCCESS.value, Status.DENIED.value

Check = Callable[[World, Door], None]
#: Refusals of a request that never became a call: not offered to the caller, or a body the
#: service would not read (413 before parsing); no call exists to audit.
_BEFORE_ANY_CALL = frozenset({"NOT_OFFERED", "BODY_TOO_LARGE"})


def _runs(world: World, logical: str) -> int:
    return world.style.runs()[logical]


def _refused(
    world: World, door: Door, logical: str, arguments: dict[str, Any], reasons: set[str], **call: Any
) -> Any:
    """Call, expect a refusal with one of ``reasons``, and that the tool's code did not run."""
    before = _runs(world, logical)
    outcome = door.call(world, call.pop("context", None) or world.context(), logical, arguments, **call)
    assert (outcome.status, outcome.reason) in {(DENIED, r) for r in reasons} | {
        ("INVALID_ARGUMENTS", r) for r in reasons
    }, outcome
    assert _runs(world, logical) == before, f"{logical} ran despite {outcome.reason}"
    if outcome.reason not in _BEFORE_ANY_CALL:
        assert world.events(str(outcome.reason)) or outcome.status == "INVALID_ARGUMENTS", "no audit event"
    return outcome


def _ran(world: World, door: Door, logical: str, arguments: dict[str, Any], **call: Any) -> Any:
    before = _runs(world, logical)
    outcome = door.call(world, call.pop("context", None) or world.context(), logical, arguments, **call)
    assert outcome.status == SUCCESS, outcome
    assert _runs(world, logical) == before + 1
    return outcome


def default_deny(world: World, door: Door) -> None:
    """A tool the policy does not allow is refused (or never offered), and never runs."""
    _refused(world, door, "vault", {"item": "x"}, {"POLICY_DENIED", "NOT_OFFERED"})


def acknowledgement(world: World, door: Door) -> None:
    """A tool whose deployment acknowledgement is missing is refused, and never runs."""
    _refused(world, door, "guarded", {"item": "x"}, {"NOT_ACKNOWLEDGED", "NOT_OFFERED"})


def intent_required(world: World, door: Door) -> None:
    """A call without its declared intent (purpose / audit_as) does not run."""
    _refused(world, door, "read", {"item": "x"}, {"missing", "missing_intent"}, intent=NO_INTENT)


def authorization_per_attempt(world: World, door: Door) -> None:
    """The authorizers decide every attempt: a refusal stops the call; an allowed call was asked once."""
    _refused(world, door, "read", {"item": "forbidden"}, {"AUTH_DENIED"})
    asked = len(world.authorized)
    _ran(world, door, "read", {"item": "fine"})
    assert len(world.authorized) == asked + 1  # one attempt, one decision


def argument_guards(world: World, door: Door) -> None:
    """Oversized and over-nested arguments are refused before anything runs."""
    # The service refuses a body over its limit before parsing it (413 BODY_TOO_LARGE).
    _refused(world, door, "read", {"item": "x" * 70_000}, {"too_large", "BODY_TOO_LARGE"})
    nested: Any = "x"
    for _ in range(80):
        nested = [nested]
    _refused(world, door, "read", {"item": nested}, {"too_deep"})


def guardrails(world: World, door: Door) -> None:
    """A DENY guardrail refuses the call it matches, and the tool never runs."""
    _refused(world, door, "read", {"item": "blocked"}, {"GUARDRAIL_BLOCKED"})


def argument_bound_approvals(world: World, door: Door) -> None:
    """An approval binds the exact call: other arguments are refused; the grant runs it once."""
    context = world.context()
    before = _runs(world, "pay")
    asked = door.call(world, context, "pay", {"to": "alice", "cents": 100})
    assert asked.status == Status.APPROVAL_REQUIRED.value and asked.approval is not None, asked
    assert _runs(world, "pay") == before
    shown = asked.approval.get("arguments") if isinstance(asked.approval, dict) else asked.approval.arguments
    if shown is not None:  # what the approver is shown: the call itself, as the tool binds it
        assert dict(shown) == world.style.shown("pay", {"to": "alice", "cents": 100})
    if not door.grants:
        return
    grant = door.grant(world, asked.approval)
    edited = door.call(world, context, "pay", {"to": "mallory", "cents": 999_999}, grant=grant)
    assert (edited.status, edited.reason) == (DENIED, "APPROVAL_INVALID"), edited
    assert _runs(world, "pay") == before
    done = door.call(world, context, "pay", {"to": "alice", "cents": 100}, grant=grant)
    assert done.status == SUCCESS, done
    assert _runs(world, "pay") == before + 1
    replay = door.call(world, context, "pay", {"to": "alice", "cents": 100}, grant=grant)
    assert (replay.status, replay.reason) in {(DENIED, "APPROVAL_INVALID"), (DENIED, "APPROVAL_USED")}, replay
    assert _runs(world, "pay") == before + 1


def budgets(world: World, door: Door) -> None:
    """A shared budget admits exactly its calls, then refuses, fleet-wide."""
    principal = world.context()
    for _ in range(2):
        _ran(world, door, "read", {"item": "x"}, context=principal)
    _refused(world, door, "read", {"item": "x"}, {"BUDGET_EXHAUSTED"}, context=principal)


def rate_limits(world: World, door: Door) -> None:
    """A shared rate limit admits its calls per window, then refuses with the wait."""
    principal = world.context()
    for _ in range(2):
        _ran(world, door, "ping", {"item": "x"}, context=principal)
    _refused(world, door, "ping", {"item": "x"}, {"RATE_LIMITED"}, context=principal)


def kill_switch(world: World, door: Door) -> None:
    """An engaged kill switch stops the tool's calls at once, in every process; released, they run."""
    tool = world.style.tool("read")
    world.kill.engage(tool, reason="conformance", who="ops")
    try:
        _refused(world, door, "read", {"item": "x"}, {"KILL_SWITCH", "NOT_OFFERED"})
    finally:
        world.kill.release(tool, reason="conformance", who="ops")
    _ran(world, door, "read", {"item": "x"})


def delegation_narrowing(world: World, door: Door) -> None:
    """A delegated run can only do less: outside its scope it is refused; inside, it runs."""
    parent = world.context()
    child = parent.delegate(tools=[world.style.tool("ping")])
    _refused(world, door, "read", {"item": "x"}, {"DELEGATION_SCOPE", "NOT_OFFERED"}, context=child)
    _ran(world, door, "ping", {"item": "x"}, context=child)


def toolset_scoping(world: World, door: Door) -> None:
    """A caller limited to a toolset reaches only its tools."""
    scoped = door.with_toolset(world, [world.style.tool("ping")])  # type: ignore[attr-defined]
    _refused(world, scoped, "read", {"item": "x"}, {"NOT_IN_TOOLSET", "NOT_OFFERED"})
    _ran(world, scoped, "ping", {"item": "x"})


def strict_audit(world: World, door: Door) -> None:
    """STRICT audit fails closed with nothing spent: no run, no budget unit, no pending request."""
    principal = world.context()
    with world.audit_down():
        before = _runs(world, "read")
        refused = door.call(world, principal, "read", {"item": "x"})
        assert (refused.status, refused.reason) == (DENIED, "AUDIT_UNAVAILABLE"), refused
        asked = door.call(world, principal, "pay", {"to": "alice", "cents": 1})
        assert (asked.status, asked.reason) == (DENIED, "AUDIT_UNAVAILABLE"), asked
        assert _runs(world, "read") == before
    waiting = world.approvals.list(tenant=TENANT, state="pending", limit=1000)
    assert not [p for p in waiting if p.request.principal == principal.principal]  # no slot taken
    for _ in range(2):  # the budget of 2 is whole: the refused call spent none of it
        _ran(world, door, "read", {"item": "x"}, context=principal)


def secret_never_shown(world: World, door: Door) -> None:
    """A secret argument reaches no result, trace or audit row, and still binds the call."""
    secret = f"sk-live-CONFORMANCE-{world.suffix}-{door.name}"
    context = world.context()
    outcome = _ran(world, door, "read", {"item": "x", "api_key": secret}, context=context)
    assert secret not in outcome.shown
    assert secret not in repr([record.as_dict() for record in context.trace.records()])
    assert secret not in world.audit_text()
