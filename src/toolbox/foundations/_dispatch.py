"""The dispatch permit: an operation's effect runs only while the governed chain dispatches it.

The chain holds a `Permit` in a `contextvars.ContextVar` around each attempt
(`run_dispatched`, `arun_dispatched`); every effectful entry checks it (`require_dispatch`) and
raises `GovernanceBypassError` without one. `toolbox.ToolRuntime` wraps every
operation call a provider hands to an intent (`guard`), so third-party
providers are guarded without writing anything; providers may also check in
their own internals (HttpTool's clients, FsTool's file functions do).

A permit names one tool and dies when its attempt ends:

- threads started inside a dispatch begin with an empty context: no permit;
- asyncio tasks copy the context, so they see the permit, but only for the
  same tool, and only until the attempt that spawned them ends;
- a tool that calls another tool's internals holds a permit for itself, not
  for the other tool: it must go through the chain (an intent, or the gateway).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TypeVar, final

from toolbox.errors import GovernanceBypassError

__all__ = [
    "Permit",
    "arun_dispatched",
    "building",
    "chain_records",
    "guard",
    "guard_async",
    "require_dispatch",
    "run_dispatched",
]

R = TypeVar("R")


@final
class Permit:
    """The chain is dispatching an attempt of ``tool``; ``live`` turns False when it ends."""

    __slots__ = ("live", "tool")

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.live = True


_PERMIT: ContextVar[Permit | None] = ContextVar("toolbox_dispatch_permit", default=None)
# The tool whose by-name call's intent is being built (its operation method runs): the chain
# records a refusal raised there itself.
_BUILDING: ContextVar[str | None] = ContextVar("toolbox_building_call", default=None)


def building(tool: str, build: Callable[[], R]) -> R:
    """Run ``build`` (a by-name call's operation method) as the chain's step for ``tool``."""
    token = _BUILDING.set(tool)
    try:
        return build()
    finally:
        _BUILDING.reset(token)


def chain_records(tool: str) -> bool:
    """Whether the chain records a refusal of ``tool`` raised here (building or dispatching its call).

    Elsewhere (a typed door's operation method, called by the program) the
    tool's runtime records it (`toolbox.ToolRuntime.record_denial`).
    """
    if _BUILDING.get() == tool:
        return True
    permit = _PERMIT.get()
    return permit is not None and permit.live and permit.tool == tool


def require_dispatch(tool: str) -> None:
    """Raise `GovernanceBypassError` unless the chain is dispatching an operation of ``tool`` here.

    Call it first in any internal function of a provider that has an effect.
    """
    permit = _PERMIT.get()
    if permit is None or not permit.live or permit.tool != tool:
        raise _bypass(tool, permit)


def _bypass(tool: str, permit: Permit | None) -> GovernanceBypassError:
    if permit is not None and permit.live:
        where = f"inside a dispatch of {permit.tool!r}, which holds no permit for {tool!r}"
    else:
        where = "outside the governed chain"
    return GovernanceBypassError(
        f"an operation of {tool!r} was entered {where}; call it through its intent "
        "(tools.get(...).op(...).purpose/audit_as(...).execute()) or the gateway",
        tool=tool,
    )


def guard(tool: str, call: Callable[[], R]) -> Callable[[], R]:
    """``call``, refusing to run outside a dispatch of ``tool``."""

    def governed() -> R:
        permit = _PERMIT.get()
        if permit is None or not permit.live or permit.tool != tool:
            raise _bypass(tool, permit)
        return call()

    return governed


def guard_async(tool: str, acall: Callable[[], Awaitable[R]]) -> Callable[[], Awaitable[R]]:
    """Async twin of `guard`: checked when the awaitable is made (inside the dispatch)."""

    def governed() -> Awaitable[R]:
        permit = _PERMIT.get()
        if permit is None or not permit.live or permit.tool != tool:
            raise _bypass(tool, permit)
        return acall()

    return governed


def run_dispatched(tool: str, call: Callable[[], R]) -> R:
    """Run ``call`` holding a permit for ``tool``; the permit dies when it returns or raises."""
    permit = Permit(tool)
    token = _PERMIT.set(permit)
    try:
        return call()
    finally:
        permit.live = False
        _PERMIT.reset(token)


async def arun_dispatched(tool: str, make: Callable[[], Awaitable[R]]) -> R:
    """Async twin of `run_dispatched`: the awaitable is made and awaited holding the permit."""
    permit = Permit(tool)
    token = _PERMIT.set(permit)
    try:
        return await make()
    finally:
        permit.live = False
        _PERMIT.reset(token)
