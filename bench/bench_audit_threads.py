"""CPU per governed call with a STRICT SQLite audit, 32 threads sharing its group commits.

Run from the repository root::

    .venv/bin/python bench/bench_audit_threads.py              # the table (about a minute)
    .venv/bin/python bench/bench_audit_threads.py --threads 8 --calls 200

A measurement script, not a test: it asserts nothing about time. What the
service's worker threads do, without HTTP: ``--threads`` threads each make
``--calls`` by-name calls of a trivial ``@tool``, every call a fresh trace
(a new `ExecutionContext` whose run id is the service's ``new_trace_id()``, as
every request of ``toolbox serve`` is), through
a `Gateway` whose `AuditTrail` is STRICT on a `SqliteSink` (``synchronous=FULL``)
[Q], and the same on a `MemorySink` [M]. The process's CPU time (user +
system, ``os.times``) over the calls, divided by the calls, is the figure:
``Q - M`` is what the durable audit write path costs a call (rows, chained
hashes, the SQLite statements, the commit and its flush, the threads' hand-offs).
The rows take turns, in alternating order, ``--repeat`` times; medians. The GC
stays on. Load average printed: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail, MemorySink, SqliteSink
from toolbox.service._identity import new_trace_id

CALL = {"a": 1, "b": 2, "purpose": "Sum"}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def gateway(kind: str, directory: Path) -> Gateway:
    if kind == "memory":
        sink: MemorySink | SqliteSink = MemorySink()
    else:
        sink = SqliteSink(directory / "audit.db")
        sink.schema_version()
    trail = AuditTrail(sink, fallback_path=None)
    return Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail))


def run(served: Gateway, threads: int, calls: int) -> tuple[float, float, float]:
    """(user, system, wall) seconds per call of ``threads`` x ``calls`` calls."""
    start = threading.Barrier(threads + 1)
    failures: list[Status] = []

    def caller() -> None:
        start.wait()
        for _ in range(calls):
            context = ExecutionContext(tenant="bench", principal="p", run_id=new_trace_id())
            result = served.invoke("add", CALL, context=context)
            if result.status is not Status.SUCCESS:
                failures.append(result.status)

    workers = [threading.Thread(target=caller) for _ in range(threads)]
    for worker in workers:
        worker.start()
    before, wall = os.times(), time.perf_counter()
    start.wait()
    for worker in workers:
        worker.join()
    after, wall = os.times(), time.perf_counter() - wall
    if failures:
        raise SystemExit(f"{len(failures)} calls failed: {failures[0]}")
    n = threads * calls
    return (after.user - before.user) / n, (after.system - before.system) / n, wall / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--calls", type=int, default=100, help="calls per thread per repeat")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolbox-bench-threads-") as tmp:
        served = {kind: gateway(kind, Path(tmp)) for kind in ("memory", "sqlite")}
        for one in served.values():
            run(one, args.threads, 5)  # warm-up: routes, the schema, the writer's connection
        figures: dict[str, list[tuple[float, float, float]]] = {kind: [] for kind in served}
        for repeat in range(args.repeat):
            order = list(served) if repeat % 2 == 0 else list(served)[::-1]
            for kind in order:
                figures[kind].append(run(served[kind], args.threads, args.calls))
        for one in served.values():
            one.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"bench_audit_threads: {args.threads} threads x {args.calls} calls, {args.repeat} repeats, "
        f"each call a fresh trace; load average {load}"
    )
    cpu = {}
    for kind, label in (("memory", "[M] memory audit"), ("sqlite", "[Q] STRICT SQLite audit")):
        rows = figures[kind]
        user = statistics.median(u for u, _, _ in rows) * 1e6
        system = statistics.median(s for _, s, _ in rows) * 1e6
        cpu[kind] = statistics.median(u + s for u, s, _ in rows) * 1e6
        wall = statistics.median(w for _, _, w in rows) * 1e6
        print(
            f"{label:26} CPU {cpu[kind]:7.1f} us/call (user {user:.0f}, system {system:.0f}), "
            f"wall {wall:.1f} us/call"
        )
    print(f"the durable write path, Q - M: {cpu['sqlite'] - cpu['memory']:.1f} us of CPU per call")


if __name__ == "__main__":
    main()
