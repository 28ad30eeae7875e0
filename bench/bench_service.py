"""The governance service over HTTP: a governed invoke against a bare FastAPI endpoint, and audit under load.

Run from the repository root::

    .venv/bin/python bench/bench_service.py                 # the table (about 60 s on a quiet machine)
    .venv/bin/python bench/bench_service.py --calls 500     # shorter
    .venv/bin/python bench/bench_service.py --no-postgres   # without the PostgreSQL row

A measurement script, not a test: it asserts nothing about time. One uvicorn
worker runs in a child process (so the load generator does not share its
interpreter) and serves, in one app on 127.0.0.1:

- ``POST /bare``: a bare FastAPI endpoint with a pydantic body model that
  calls the same function as the tool ``add`` [B];
- ``POST /v1/tools/add/invoke``: the service's governed invoke of the
  ``MEMORY_ONLY`` ``@tool`` ``add``, API-key authentication included, no audit [S];
- ``/sqlite/...`` and ``/postgres/...``: the same service with a STRICT audit
  trail on a SQLite file and on PostgreSQL (a schema of its own, dropped at the end).

The client is one ``httpx.AsyncClient`` keeping ``--concurrency`` requests in
flight (default 64) over as many connections. Real use: the garbage collector
stays on in both processes, the audit stores keep every event, the rows take
turns in each of ``--repeat`` repeats (default 5) of ``--calls`` requests each,
and a row reports the median throughput over the repeats, its ratio the median
of the per-repeat ratios to its baseline (measured back to back, under the
same load), and the p50 / p99 latency over every request it made. Every
response must be 200; the script counts anything else (there should be none)
and, at the end, that each audited store holds exactly four events per call.

Targets (the service issue): [S] at most 1.3x the time per call of [B]; the
SQLite STRICT row at least 0.5x the throughput of [S].
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
EVENTS_PER_CALL = 4
BODY = {"arguments": {"a": 1, "b": 2}, "purpose": "Sum the order"}


# -- the server (child process) --------------------------------------------------------------


class AddArgs(BaseModel):
    a: int
    b: int


class AddBody(BaseModel):
    arguments: AddArgs
    purpose: str


def build_app(directory: Path, postgres_url: str | None, schema: str) -> Any:
    """The app the child serves: the bare endpoint, the unaudited service and the audited ones."""
    from fastapi import FastAPI

    from toolbox import Effect, Governance, RiskClass, ToolPolicy, tool
    from toolbox.audit import AuditTrail, PostgresSink, SqliteSink
    from toolbox.auth import ApiKeyFile, CredentialAuthenticator
    from toolbox.service import create_app

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    authenticator = CredentialAuthenticator(api_keys=ApiKeyFile(directory / "keys.toml"))

    def service(trail: AuditTrail | None) -> FastAPI:
        return create_app(
            policy=ToolPolicy.standard(),
            authenticator=authenticator,
            providers=[add],
            discover=False,
            env={},
            governance=Governance(audit=trail),
            console=False,
        )

    app = service(None)

    @app.post("/bare")
    async def bare(body: AddBody) -> dict[str, Any]:
        return {"status": "SUCCESS", "content": add.function(body.arguments.a, body.arguments.b)}

    fallback = directory / "fallback.jsonl"
    app.mount("/sqlite", service(AuditTrail(SqliteSink(directory / "audit.db"), fallback_path=fallback)))
    if postgres_url:
        sink = PostgresSink(postgres_url, schema=schema)
        app.mount("/postgres", service(AuditTrail(sink, fallback_path=fallback)))
    return app


def serve(port: int, directory: Path, postgres_url: str | None, schema: str) -> None:
    import uvicorn

    uvicorn.run(
        build_app(directory, postgres_url, schema),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=60,
    )


# -- the client ------------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    path: str
    auth: bool = True
    throughput: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    calls: int = 0
    errors: dict[str, int] = field(default_factory=dict)


async def run_batch(client: httpx.AsyncClient, row: Row, calls: int, concurrency: int, key: str) -> float:
    """``calls`` requests with ``concurrency`` in flight; the requests per second."""
    headers = {"Authorization": f"Bearer {key}"} if row.auth else {}
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            try:
                response = await client.post(row.path, json=BODY, headers=headers)
            except httpx.TransportError as exc:
                row.failures += 1
                row.errors[type(exc).__name__] = row.errors.get(type(exc).__name__, 0) + 1
                continue
            row.latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                row.failures += 1
                row.errors[str(response.status_code)] = row.errors.get(str(response.status_code), 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    row.calls += calls
    return calls / elapsed


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def measure(url: str, rows: list[Row], args: argparse.Namespace, key: str) -> None:
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        for row in rows:  # warm-up: connections, routes, schemas
            await run_batch(client, row, min(args.calls, 200), args.concurrency, key)
            row.latencies.clear()
        for _ in range(args.repeat):
            for row in rows:
                row.throughput.append(await run_batch(client, row, args.calls, args.concurrency, key))


def count_events(kind: str, directory: Path, postgres_url: str, schema: str) -> int:
    from sqlalchemy import create_engine, text

    if kind == "sqlite":
        engine = create_engine(f"sqlite:///{directory / 'audit.db'}")
        table = "audit_events"
    else:
        engine = create_engine(postgres_url)
        table = f'"{schema}".audit_events'
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the server process exited")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not start")


def ratio_row(row: Row, baseline: Row | None, invert: bool) -> str:
    if baseline is None:
        return ""
    per_repeat = [
        (b / r if invert else r / b) for r, b in zip(row.throughput, baseline.throughput, strict=True)
    ]
    return f"{statistics.median(per_repeat):.2f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="requests per row per repeat (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats (default 5)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("TOOLBOX_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL row")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    args = parser.parse_args()
    postgres = None if args.no_postgres else args.postgres_url
    if args.serve:
        serve(args.serve, args.dir, postgres, args.schema)
        return 0

    gc.enable()
    schema = f"toolbox_bench_service_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        from toolbox.testing.credentials import write_api_keys

        key = write_api_keys(directory / "keys.toml", {"bench": {"tenant": "bench", "roles": ["caller"]}})[
            "bench"
        ]
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        command = [sys.executable, __file__, "--serve", str(port), "--dir", tmp, "--schema", schema]
        if postgres is None:
            command.append("--no-postgres")
        else:
            command += ["--postgres-url", postgres]
        process = subprocess.Popen(command)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process)
            bare = Row("[B] bare FastAPI endpoint, pydantic body", "/bare", auth=False)
            served = Row("[S] service invoke, no audit", "/v1/tools/add/invoke")
            sqlite = Row("[Q] service invoke, SQLite STRICT audit", "/sqlite/v1/tools/add/invoke")
            rows = [bare, served, sqlite]
            pg = Row("[G] service invoke, PostgreSQL STRICT audit", "/postgres/v1/tools/add/invoke")
            if postgres is not None:
                rows.append(pg)
            print(
                f"bench_service: {args.repeat} repeats x {args.calls} requests per row, "
                f"concurrency {args.concurrency}, one uvicorn worker, GC on"
            )
            asyncio.run(measure(url, rows, args, key))
        finally:
            process.terminate()
            process.wait(30)
        print()
        print(
            f"{'row':46} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'ratio':>16} {'target':>14} {'non-200':>8}"
        )
        targets = {
            served.label: (bare, True, 1.3, "<= 1.3x B time"),
            sqlite.label: (served, False, 0.5, ">= 0.5x S req/s"),
        }
        missed = []
        for row in rows:
            baseline, invert, bound, text_target = targets.get(row.label, (None, False, 0.0, ""))
            ratio = ratio_row(row, baseline, invert)
            status = ""
            if baseline is not None:
                value = float(ratio.rstrip("x"))
                ok = value <= bound if invert else value >= bound
                status = "met" if ok else "MISSED"
                if not ok:
                    missed.append(row.label)
            print(
                f"{row.label:46} {statistics.median(row.throughput):9.0f} "
                f"{percentile(row.latencies, 0.5) * 1000:8.2f} {percentile(row.latencies, 0.99) * 1000:8.2f} "
                f"{(ratio + (' ' + baseline.label[:3] if baseline else '')):>16} "
                f"{(text_target + ' ' + status) if status else '(info)':>14} {row.failures:8d}"
            )
        for row in rows:
            if row.errors:
                print(f"  {row.label[:3]} failures: {row.errors}")
        print()
        for row, kind in ((sqlite, "sqlite"), (pg, "postgres")):
            if kind == "postgres" and postgres is None:
                continue
            stored = count_events(kind, directory, postgres or "", schema)
            expected = row.calls * EVENTS_PER_CALL
            verdict = "all there" if stored == expected else "MISMATCH"
            print(f"{kind}: {stored} events stored for {row.calls} calls ({verdict})")
        if postgres is not None:
            from sqlalchemy import create_engine, text

            engine = create_engine(postgres)
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            engine.dispose()
        if missed:
            print("missed targets: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
