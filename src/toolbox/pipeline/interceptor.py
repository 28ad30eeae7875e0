"""The interceptor protocol: one small check in the chain."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from toolbox.pipeline.invocation import Invocation
from toolbox.pipeline.result import ToolResult

__all__ = ["Interceptor"]


@runtime_checkable
class Interceptor(Protocol):
    """A check run before the operation is dispatched.

    Return None to let the call continue, or a `ToolResult` (usually DENIED) to
    stop it. An exception fails closed: DENIED/GOVERNANCE_EVALUATION_FAILED.
    Interceptors with ``per_attempt = True`` run again before every retry.
    """

    name: str
    per_attempt: bool

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        """Decide; must not perform the operation itself."""
