"""Worker processes and a counted tool for the audit-at-scale tests (spawned: importable by name)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit_sql_support import open_sink
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail

EXECUTIONS: list[int] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers (every run is counted)."""
    EXECUTIONS.append(1)
    return a + b


CALL = {"a": 1, "b": 2, "purpose": "Sum"}
SHARED_TRACE = "everyone"


def governed(trail: AuditTrail) -> Gateway:
    """A gateway over `add` whose governance writes to ``trail``."""
    return Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail))


def in_threads(work: Callable[[ExecutionContext], None], contexts: list[ExecutionContext]) -> None:
    """``work(context)`` in one thread per context, all started, then all joined."""
    threads = [threading.Thread(target=work, args=(context,)) for context in contexts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def thread_trace(thread: int) -> str:
    """The trace thread ``thread`` of every process shares with the same thread of the others."""
    return f"thread-{thread}"


def strict_worker(
    kind: str, location: str, schema: str | None, fallback: str, threads: int, calls: int, start: Any
) -> None:
    """Process body: ``threads`` threads x ``calls`` STRICT governed calls, half on a trace all share.

    Exits 1 (naming what went wrong on stderr) unless every call succeeded with its audit written.
    """
    trail = AuditTrail(open_sink(kind, location, schema), fallback_path=Path(fallback))
    gateway = governed(trail)
    failures: list[str] = []

    def work(thread: int) -> None:
        own = ExecutionContext(tenant="t", principal="p", run_id=thread_trace(thread))
        shared = ExecutionContext(tenant="t", principal="p", run_id=SHARED_TRACE)
        try:
            barrier.wait(60)
            for index in range(calls):
                result = gateway.invoke("add", CALL, context=own if index % 2 else shared)
                if result.status is not Status.SUCCESS or result.audit_failed:
                    failures.append(f"{result.status.value} {result.reason_code} {result.audit_failed}")
        except BaseException as exc:
            failures.append(type(exc).__name__)

    barrier = threading.Barrier(threads)
    trail.sink.schema_version()  # type: ignore[attr-defined]
    start.wait(60)
    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    trail.close()
    if failures or len(EXECUTIONS) != threads * calls:
        print(f"{len(failures)} failure(s), e.g. {failures[:3]}; {len(EXECUTIONS)} runs", file=sys.stderr)
        sys.exit(1)
