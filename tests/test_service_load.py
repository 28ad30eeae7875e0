"""Load, bounded and on loopback only: invokes at concurrency 64 against one uvicorn worker.

5,000 invokes in the full tier (``pytest --full``), 200 in the default tier (tests/tiers.py):
still more than three calls per connection at concurrency 64.

With a STRICT audit trail on SQLite, then on PostgreSQL: zero 5xx, zero lost
audit events (four per call, one trace per call, every trace verifies). The
latency percentiles are printed, never asserted (``bench/bench_service.py``
measures them properly). ``TOOLBOX_LOAD_CALLS`` lowers the count for a quick run.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest

from service_support import RUNS, deployment
from tiers import sized
from toolbox.audit import AuditQuery, verify_chain

CALLS = int(os.environ.get("TOOLBOX_LOAD_CALLS", sized(200, 5000)))
CONCURRENCY = 64


async def hammer(url: str, key: str) -> tuple[list[int], list[str], list[float]]:
    statuses: list[int] = []
    traces: list[str] = []
    latencies: list[float] = []
    remaining = CALLS
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:

        async def worker(index: int) -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                response = await client.post(
                    "/v1/tools/echo/invoke",
                    headers={"Authorization": f"Bearer {key}"},
                    json={"arguments": {"text": f"w{index}"}, "purpose": "Load"},
                )
                latencies.append(time.perf_counter() - started)
                statuses.append(response.status_code)
                if response.status_code == 200:
                    traces.append(response.json()["trace_id"])

        await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
    return statuses, traces, latencies


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_load_loses_nothing(kind: str, tmp_path: Path) -> None:
    with deployment(tmp_path, kind) as service:
        statuses, traces, latencies = asyncio.run(hammer(service.url, service.keys["alice"]))
        ordered = sorted(latencies)
        p50, p99 = ordered[len(ordered) // 2] * 1000, ordered[int(len(ordered) * 0.99)] * 1000
        print(f"\n{kind}: {CALLS} invokes at concurrency {CONCURRENCY}: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
        assert len(statuses) == CALLS
        assert [s for s in statuses if s >= 500] == []
        assert set(statuses) == {200} and RUNS["echo"] == CALLS
        assert len(set(traces)) == CALLS
        events = service.sink.query(AuditQuery(tenant="acme", limit=10 * CALLS))
        assert len(events) == 4 * CALLS
        by_trace: dict[str, int] = {}
        for event in events:
            by_trace[event.trace_id] = by_trace.get(event.trace_id, 0) + 1
        assert set(by_trace) == set(traces) and set(by_trace.values()) == {4}
        assert verify_chain(events) == []
