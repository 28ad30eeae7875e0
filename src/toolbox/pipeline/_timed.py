"""Governed per-operation timeouts: a sync call on a worker thread, waited for at most so long."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from toolbox.errors import ToolTimeoutError
from toolbox.foundations._dispatch import run_dispatched

__all__ = ["OperationTimeoutError", "await_within", "call_within"]

T = TypeVar("T")
_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None


class OperationTimeoutError(ToolTimeoutError):
    """The governed per-operation timeout elapsed."""


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _EXECUTOR  # noqa: PLW0603 - one lazily created pool for timed sync calls
    if _EXECUTOR is None:
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="toolbox-timed")
    return _EXECUTOR


def call_within(tool: str, operation: str, call: Callable[[], Any], timeout: float) -> Any:
    """``call`` under ``tool``'s dispatch permit on a worker thread, for at most ``timeout`` seconds."""
    # The worker thread runs in a copy of this context, so it sees the permit set there.
    future = _executor().submit(contextvars.copy_context().run, run_dispatched, tool, call)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise OperationTimeoutError(f"{tool}.{operation} did not finish within {timeout} s") from None


async def await_within(tool: str, operation: str, awaitable: Awaitable[T], timeout: float) -> T:
    """``awaitable``, or `OperationTimeoutError` after ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise OperationTimeoutError(f"{tool}.{operation} did not finish within {timeout} s") from None
