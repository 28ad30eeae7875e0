"""``toolbox serve --workers N``: uvicorn's worker processes forked from the command, not spawned.

uvicorn starts each worker with multiprocessing's *spawn*: a fresh interpreter that imports
FastAPI, pydantic, SQLAlchemy, toolbox and its providers again, one to two seconds of CPU
per worker (and again for each worker that dies and is replaced). The command has imported all
of them already, building the app once to check the policy file, so a *fork* starts a worker
for the cost of building its own app (`toolbox.cli._serve.worker_app`; nothing of the
command's app is used in a worker: it was closed before the first fork).

A fork is safe only in a process running one thread and no event loop: what a fork copies of
another thread is a lock it may hold, never the thread. uvicorn's supervisor runs neither
(it waits on an event and pings its workers from its one thread), and the choice is made
again at each start: a worker started while another thread is alive is spawned as before,
as it is off Linux (macOS's system libraries do not survive a fork) and on a uvicorn whose
internals moved. A forked worker starts with a fresh interpreter's signal handlers, not the
supervisor's (which would queue SIGHUP, SIGQUIT, SIGUSR1... for a supervisor loop the worker
does not run).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
import sys
import threading
from collections.abc import Iterator
from multiprocessing.context import ForkProcess
from typing import Any

__all__ = ["fork_safe", "forked_workers"]


def fork_safe() -> bool:
    """Whether this process may fork a worker now: Linux, one thread, no running event loop."""
    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def fresh_signal_handlers() -> None:
    """Every Python-level signal handler back to what a fresh interpreter installs."""
    for number in signal.valid_signals():
        handler = signal.getsignal(number)
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)


class _ForkedWorker(ForkProcess):
    def run(self) -> None:
        fresh_signal_handlers()
        super().run()


class _ForkWhenSafe:
    """Stands in for uvicorn's spawn context: its `Process` forks when `fork_safe`, else spawns."""

    def __init__(self, spawn: Any) -> None:
        self.spawn = spawn

    def Process(self, **kwargs: Any) -> Any:  # the name uvicorn calls
        return _ForkedWorker(**kwargs) if fork_safe() else self.spawn.Process(**kwargs)


@contextlib.contextmanager
def forked_workers() -> Iterator[None]:
    """While inside, uvicorn's supervisor forks its workers when `fork_safe` (spawns otherwise)."""
    try:
        from uvicorn import _subprocess
    except ImportError:  # pragma: no cover - a uvicorn without the module: spawn, as it does
        yield
        return
    spawn = getattr(_subprocess, "spawn", None)
    if not isinstance(spawn, multiprocessing.context.SpawnContext):  # pragma: no cover - moved
        yield
        return
    _subprocess.spawn = _ForkWhenSafe(spawn)  # type: ignore[assignment]
    try:
        yield
    finally:
        _subprocess.spawn = spawn
