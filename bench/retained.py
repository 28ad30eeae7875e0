"""Timing as real use runs: garbage collector on, history retained, median of repeats.

``bench_core``'s timeit rows turn the garbage collector off, report the minimum
of the repeats and (in ``bench_governed.py``) empty the traces and the sink
before every repeat: the best case of a path's own work. A real program keeps
what a governed call records (its context's trace, the audit sink), and the
collector then walks that growing heap: a path that leaves more objects
behind per call costs more than its timeit minimum says. The helpers here
time that:

- the collector stays on (its cost is part of every row);
- each governed row has its own gateway, context and sink, filled with
  ``retain`` calls before timing, and keeps every timed call as well;
- every row makes ``calls`` calls per repeat, the rows of a group take turns
  in each repeat, a row reports the median time per call over the repeats,
  and a ratio is the median of the per-repeat ratios to the baseline (the two
  ran back to back, under the same load).

`retained_per_call` counts what a call leaves behind: memory blocks
(``sys.getallocatedblocks``) and objects the collector tracks (``gc.get_objects``).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_SYNC_LOOP = """
def _loop(_it, _timer):
    _t0 = _timer()
    for _i in _it:
        {stmt}
    return _timer() - _t0
"""
_ASYNC_LOOP = "async" + _SYNC_LOOP.replace("\ndef", " def", 1)


@dataclass
class Row:
    """One row: ``stmt`` run in ``namespace``; ``retain`` calls made (and kept) before timing."""

    label: str
    stmt: str
    namespace: dict[str, Any]
    retain: int = 0


@dataclass
class Sampled:
    """A row's time per call in each repeat, in seconds."""

    label: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """The median time per call."""
        return statistics.median(self.samples)

    def ratio_to(self, baseline: Sampled) -> float:
        """The median of the per-repeat ratios to ``baseline`` (timed back to back with this row)."""
        return statistics.median(a / b for a, b in zip(self.samples, baseline.samples, strict=True))

    def spread(self) -> str:
        """The fastest and slowest repeat, per call."""
        return f"{min(self.samples) * 1e6:.2f}..{max(self.samples) * 1e6:.2f} us"


def _compiled(row: Row, template: str) -> Callable[..., Any]:
    scope: dict[str, Any] = {}
    exec(compile(template.format(stmt=row.stmt), f"<{row.label}>", "exec"), row.namespace, scope)
    return scope["_loop"]  # type: ignore[no-any-return]


def _collector_on() -> None:
    if not gc.isenabled():
        raise SystemExit("the retained-history rows need the garbage collector on")


def measure_retained(
    rows: Sequence[Row], *, repeat: int, calls: int, timer: Callable[[], float] = time.perf_counter
) -> list[Sampled]:
    """Time ``rows`` with the collector on: fill each with its ``retain`` calls, then interleave.

    ``timer`` is wall-clock time by default; ``time.thread_time`` counts only the CPU the
    calling thread spent (steadier than wall clock on a loaded machine, blind to waits).
    """
    _collector_on()
    loops = [_compiled(row, _SYNC_LOOP) for row in rows]
    for row, loop in zip(rows, loops, strict=True):
        if row.retain:
            loop(range(row.retain), timer)
    sampled = [Sampled(row.label) for row in rows]
    pairs = list(zip(loops, sampled, strict=True))
    for round_number in range(repeat):
        # The order alternates: no row always runs right after the same row (and its garbage).
        for loop, row_samples in pairs if round_number % 2 == 0 else pairs[::-1]:
            row_samples.samples.append(loop(range(calls), timer) / calls)
    return sampled


async def ameasure_retained(rows: Sequence[Row], *, repeat: int, calls: int) -> list[Sampled]:
    """`measure_retained` for statements that ``await``, inside the running event loop."""
    _collector_on()
    loops: list[Callable[..., Awaitable[float]]] = [_compiled(row, _ASYNC_LOOP) for row in rows]
    for row, loop in zip(rows, loops, strict=True):
        if row.retain:
            await loop(range(row.retain), time.perf_counter)
    sampled = [Sampled(row.label) for row in rows]
    pairs = list(zip(loops, sampled, strict=True))
    for round_number in range(repeat):
        for loop, row_samples in pairs if round_number % 2 == 0 else pairs[::-1]:  # see measure_retained
            row_samples.samples.append(await loop(range(calls), time.perf_counter) / calls)
    return sampled


def retained_per_call(call: Callable[[], object], calls: int = 10_000) -> tuple[float, float]:
    """What one call of ``call`` leaves behind: (memory blocks, collector-tracked objects), averaged.

    Counted after a full collection before and after ``calls`` calls, with the
    collector off in between (so nothing is freed half-way).
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        blocks, tracked = sys.getallocatedblocks(), len(gc.get_objects())
        for _ in range(calls):
            call()
        gc.collect()
        return (
            (sys.getallocatedblocks() - blocks) / calls,
            (len(gc.get_objects()) - tracked) / calls,
        )
    finally:
        if was_enabled:
            gc.enable()


async def aretained_per_call(
    call: Callable[[], Awaitable[object]], calls: int = 10_000
) -> tuple[float, float]:
    """`retained_per_call` for a coroutine function, awaited in the running event loop."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        blocks, tracked = sys.getallocatedblocks(), len(gc.get_objects())
        for _ in range(calls):
            await call()
        gc.collect()
        return (
            (sys.getallocatedblocks() - blocks) / calls,
            (len(gc.get_objects()) - tracked) / calls,
        )
    finally:
        if was_enabled:
            gc.enable()
