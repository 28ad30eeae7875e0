"""`off_loop`: a blocking state-store operation run on a worker thread, so an event loop never waits on it.

The checks that keep state in a shared store (the kill switch's refresh, the
shared limits, the approval store) are synchronous: one Redis round trip, one
SQL transaction. On the async door (`Pipeline.arun`) they hand exactly that
operation to a small pool of their own, and the coroutine awaits it while the
event loop serves everything else. Only the store operation moves: the
check's logic stays on the loop, in the caller's context.

The operation runs in an empty `contextvars.Context`: a thread never carries
the caller's dispatch permit (`toolbox.foundations._dispatch`), whatever it holds. The
pool is not the loop's default executor, so a slow store cannot starve the
sync tools ``arun`` runs on that one. A cancelled caller does not stop an
operation already running: a budget it counted stays counted, as a call
cancelled after the sync check would have left it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["MAX_THREADS", "StoreCheck", "blocks", "off_loop", "submit"]

_T = TypeVar("_T")
#: Store operations in flight at once; more wait in the pool's queue (the loop does not).
MAX_THREADS = 32
_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL  # noqa: PLW0603 - one lazily created pool per process
    pool = _POOL
    if pool is None:
        with _LOCK:
            if _POOL is None:
                _POOL = concurrent.futures.ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="toolbox-state")
            pool = _POOL
    return pool


def submit(operation: Callable[..., _T], *args: Any) -> concurrent.futures.Future[_T]:
    """Start ``operation(*args)`` on the pool, in an empty context; its future."""
    return _pool().submit(contextvars.Context().run, functools.partial(operation, *args))


async def off_loop(operation: Callable[..., _T], *args: Any) -> _T:
    """``operation(*args)`` on the pool, awaited without blocking the running loop."""
    return await asyncio.wrap_future(submit(operation, *args))


def blocks(store: object) -> bool:
    """Whether ``store`` does I/O (a network or file round trip), so the async door moves it off the loop.

    A store marks itself in-process with ``in_process = True`` (the memory stores):
    its operations then run inline, at today's cost.
    """
    return store is not None and not getattr(store, "in_process", False)


class StoreCheck(Protocol):
    """A check whose store does I/O: `toolbox.pipeline._chain.Pipeline.arun` awaits ``acall`` instead.

    ``blocks`` is True when this check's store does I/O (else the sync call runs, as today).
    """

    name: str
    per_attempt: bool
    blocks: bool

    async def acall(self, invocation: Any) -> Any:
        """The check's decision, its store operations awaited off the loop."""
