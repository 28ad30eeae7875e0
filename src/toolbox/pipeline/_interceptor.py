"""The interceptor protocol: one small check in the chain."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._result import ToolResult

__all__ = ["Interceptor", "spends"]


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
