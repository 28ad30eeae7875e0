"""The interceptor protocol: one small check in the chain."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from toolbox.pipeline.invocation import Invocation
from toolbox.pipeline.result import ToolResult

__all__ = ["Commit", "Interceptor", "spends"]


@runtime_checkable
class Interceptor(Protocol):
    """A check run before the operation is dispatched.

    Return None to let the call continue, or a `ToolResult` (usually DENIED) to
    stop it. An exception fails closed: DENIED/GOVERNANCE_EVALUATION_FAILED.
    Interceptors with ``per_attempt = True`` run again before every retry.

    An interceptor that consumes something (a budget unit, a rate-limit token,
    a grant) sets ``spends = True``: the chain runs it after every other check
    and after the audit trail stored the call's request, so a call refused
    anywhere else spends nothing.
    """

    name: str
    per_attempt: bool

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        """Decide; must not perform the operation itself."""


def spends(check: object) -> bool:
    """Whether ``check`` consumes something when it admits a call (``spends = True``)."""
    return getattr(check, "spends", False) is True


class Commit(Protocol):
    """What a check leaves to be done once the call's outcome is recorded (`Invocation.commit`).

    An approval request is submitted to the approval store only after the
    audit trail recorded it: ``settle`` gets the recorded result and returns it,
    or the result that replaces it (AUDIT_UNAVAILABLE when it was not recorded,
    a refusal of the store).
    """

    def settle(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """Do what waited for the record; the result to return."""

    async def asettle(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """`settle` for the async door (a store's I/O off the event loop)."""
