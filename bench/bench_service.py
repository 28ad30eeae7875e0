"""The governance service over HTTP, driven by wrk: governed invokes against `/healthz` and bare FastAPI.

Run from the repository root (needs ``wrk``: ``apt-get install wrk`` on Debian
and Ubuntu, ``brew install wrk`` on macOS)::

    .venv/bin/python bench/bench_service.py                 # the table (about 2 minutes)
    .venv/bin/python bench/bench_service.py --duration 3 --repeat 3   # shorter
    .venv/bin/python bench/bench_service.py --no-postgres   # without the PostgreSQL row

A measurement script, not a test: it asserts nothing about time. One uvicorn
worker per configuration runs in a child process of its own on 127.0.0.1
(so no row pays for another's routes, threads or connections):

- ``GET /healthz``: the service's liveness probe [H], the floor of the HTTP stack;
- ``POST /bare``: a bare FastAPI endpoint with a pydantic body model that
  calls the same function as the tool ``add`` [B];
- ``POST /v1/tools/add/invoke``: the service's governed invoke of the
  ``MEMORY_ONLY`` ``@tool`` ``add``, API-key authentication included, no audit [S];
- the same service, each in a server process of its own, with an audit trail
  in memory [M] and a STRICT trail on a SQLite file [Q] (``synchronous=FULL``)
  and on PostgreSQL [G] (a schema of its own, dropped at the end);
- with ``--workers-row``: the SQLite STRICT service again, served by two
  uvicorn worker processes on one socket writing the same audit file [Q2],
  beside the same server's ``/healthz`` [H2] (its kill switches stay in each
  worker's memory: nothing here engages one).

``wrk -t2 -c<concurrency> -d<duration>s --latency`` drives each row (a C load
generator: a Python client would be the bottleneck). The rows take turns in
each of ``--repeat`` repeats; a row reports the median throughput over the
repeats, its ratio the median of the per-repeat ratios to its baseline
(measured back to back, under the same load), and the median p50 / p99 of
wrk's latency distribution, and the server process's CPU time (user + system,
from ``/proc``) per request served, the median over the repeats: a figure the
load of other processes moves less than the throughput (none for the two-worker
row). GC stays on; the audit stores keep every event.
The spread (max/min of the [H] rows) says how noisy the machine was. Every
response must be 200 (wrk counts the others); at the end the script checks
that each audited store holds exactly four events per successful call.

Targets (issue 30): [Q] >= 0.40x [H] req/s with p99 <= 5x p50; [M] >= 0.7x [B] req/s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
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
HISTORY = Path(__file__).parent / "history" / "bench_service.jsonl"


# -- the server (child process) --------------------------------------------------------------


class AddArgs(BaseModel):
    a: int
    b: int


class AddBody(BaseModel):
    arguments: AddArgs
    purpose: str


def build_app(kind: str, directory: Path, postgres_url: str | None, schema: str) -> Any:
    """The app one child serves: the service with the audit trail ``kind`` (unaudited: the bare endpoint too).

    Each kind runs in a process of its own, as a user would run it: no row pays
    for another's routes or threads.
    """
    from fastapi import FastAPI

    from toolbox import Effect, Governance, RiskClass, ToolPolicy, tool
    from toolbox.audit import AuditTrail, MemorySink, PostgresSink, SqliteSink
    from toolbox.auth import ApiKeyFile, CredentialAuthenticator
    from toolbox.service import create_app

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    fallback = directory / f"fallback-{kind}.jsonl"
    trail = None
    if kind == "memory":
        trail = AuditTrail(MemorySink(), fallback_path=fallback)
    elif kind == "sqlite":
        trail = AuditTrail(SqliteSink(directory / "audit.db"), fallback_path=fallback)
    elif kind == "postgres":
        assert postgres_url is not None
        trail = AuditTrail(PostgresSink(postgres_url, schema=schema), fallback_path=fallback)
    app: FastAPI = create_app(
        policy=ToolPolicy.standard(),
        authenticator=CredentialAuthenticator(api_keys=ApiKeyFile(directory / "keys.toml")),
        providers=[add],
        discover=False,
        env={},
        governance=Governance(audit=trail),
        console=False,
    )
    if kind == "none":

        @app.post("/bare")
        async def bare(body: AddBody) -> dict[str, Any]:
            return {"status": "SUCCESS", "content": add.function(body.arguments.a, body.arguments.b)}

    return app


def worker_app() -> Any:
    """The app of one worker of the two-worker server (a uvicorn factory): SQLite STRICT audit."""
    from toolbox.cli._serve import freeze_startup_objects

    app = build_app("sqlite", Path(os.environ["BENCH_SERVICE_DIR"]), None, "")
    freeze_startup_objects()  # as `toolbox serve` does
    return app


def serve(kind: str, port: int, directory: Path, postgres_url: str | None, schema: str) -> None:
    import uvicorn

    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "log_level": "warning",
        "access_log": False,
        "timeout_keep_alive": 60,
    }
    if kind == "sqlite2":  # two worker processes on one socket, as `toolbox serve --workers 2` runs them
        os.environ["BENCH_SERVICE_DIR"] = str(directory)
        sys.path.insert(0, str(Path(__file__).parent))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
        )
        uvicorn.run("bench_service:worker_app", factory=True, workers=2, **options)
        return
    from toolbox.cli._serve import freeze_startup_objects

    app = build_app(kind, directory, postgres_url, schema)
    freeze_startup_objects()  # as `toolbox serve` does
    uvicorn.run(app, **options)


# -- the load (wrk) --------------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    label: str
    path: str
    post: bool = True
    auth: bool = True
    throughput: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    requests: int = 0
    non_200: int = 0
    socket_errors: int = 0


_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _millis(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNIT[unit]


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def script_for(row: Row, key: str, directory: Path) -> Path:
    """The wrk Lua script of ``row``: its method, body and headers."""
    lines = []
    if row.post:
        lines += [
            'wrk.method = "POST"',
            f"wrk.body = {json.dumps(json.dumps(BODY))}",
            'wrk.headers["Content-Type"] = "application/json"',
        ]
    if row.auth:
        lines.append(f'wrk.headers["Authorization"] = "Bearer {key}"')
    path = directory / f"{row.key}.lua"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_wrk(
    url: str, row: Row, script: Path, args: argparse.Namespace, *, keep: bool = True, pid: int | None = None
) -> None:
    command = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.concurrency}",
        f"-d{args.duration}s",
        "--latency",
        "-s",
        str(script),
        url + row.path,
    ]
    before = cpu_seconds(pid)
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    after = cpu_seconds(pid)
    total = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    row.requests += int(total.group(1)) if total else 0
    row.non_200 += int(bad.group(1)) if bad else 0
    if not keep:
        return
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"\s50%\s+(\S+)", out)
    p99 = re.search(r"\s99%\s+(\S+)", out)
    if not (rate and p50 and p99):
        raise SystemExit(f"could not read wrk's output:\n{out}")
    row.throughput.append(float(rate.group(1)))
    row.p50.append(_millis(p50.group(1)))
    row.p99.append(_millis(p99.group(1)))
    if before is not None and after is not None and total and int(total.group(1)):
        row.cpu_us.append((after - before) / int(total.group(1)) * 1e6)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    row.socket_errors += sum(int(n) for n in errors.groups()) if errors else 0


def count_events(kind: str, directory: Path, postgres_url: str, schema: str) -> int:
    from sqlalchemy import create_engine, text

    if kind == "sqlite":
        engine = create_engine(f"sqlite:///{directory / 'audit.db'}")
        tables = ["audit_events", "audit_pending"]
    else:
        engine = create_engine(postgres_url)
        tables = [f'"{schema}".audit_events']
    try:
        with engine.connect() as conn:
            total = 0
            for table in tables:
                try:
                    total += int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
                except Exception:  # noqa: BLE001 - a table the store has not made yet
                    conn.rollback()
            return total
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


def ratio(row: Row, baseline: Row) -> float:
    return statistics.median(r / b for r, b in zip(row.throughput, baseline.throughput, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per row per repeat (default 5)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats (default 3)")
    parser.add_argument("--concurrency", type=int, default=32, help="connections (default 32)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("TOOLBOX_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL row")
    parser.add_argument("--no-history", action="store_true", help="do not append to bench/history")
    parser.add_argument(
        "--workers-row",
        action="store_true",
        help="also serve the SQLite row with two worker processes ([H2], [Q2]; same audit file)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    args = parser.parse_args()
    postgres = None if args.no_postgres else args.postgres_url
    if args.serve:
        serve(args.serve, args.port, args.dir, postgres, args.schema)
        return 0
    if shutil.which("wrk") is None:
        raise SystemExit("bench_service needs wrk: apt-get install wrk (Debian/Ubuntu) or brew install wrk")

    schema = f"toolbox_bench_service_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        from toolbox.testing.credentials import write_api_keys

        key = write_api_keys(directory / "keys.toml", {"bench": {"tenant": "bench", "roles": ["caller"]}})[
            "bench"
        ]
        kinds = ["none", "memory", "sqlite"] + (["postgres"] if postgres is not None else [])
        kinds += ["sqlite2"] if args.workers_row else []
        urls: dict[str, str] = {}
        pids: dict[str, int] = {}
        processes = []
        health = Row("H", "[H] GET /healthz", "/healthz", post=False, auth=False)
        bare = Row("B", "[B] bare FastAPI endpoint, pydantic body", "/bare", auth=False)
        served = Row("S", "[S] service invoke, no audit", "/v1/tools/add/invoke")
        memory = Row("M", "[M] service invoke, memory audit", "/v1/tools/add/invoke")
        sqlite = Row("Q", "[Q] service invoke, SQLite STRICT audit", "/v1/tools/add/invoke")
        pg = Row("G", "[G] service invoke, PostgreSQL STRICT audit", "/v1/tools/add/invoke")
        health2 = Row("H2", "[H2] GET /healthz, 2 workers", "/healthz", post=False, auth=False)
        sqlite2 = Row("Q2", "[Q2] invoke, SQLite STRICT audit, 2 workers", "/v1/tools/add/invoke")
        rows = [health, bare, served, memory, sqlite] + ([pg] if postgres is not None else [])
        rows += [health2, sqlite2] if args.workers_row else []
        server_of = {"H": "none", "B": "none", "S": "none", "M": "memory", "Q": "sqlite", "G": "postgres"}
        server_of |= {"H2": "sqlite2", "Q2": "sqlite2"}
        try:
            for kind in kinds:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    port = probe.getsockname()[1]
                command = [sys.executable, __file__, "--serve", kind, "--port", str(port), "--dir", tmp]
                command += ["--schema", schema]
                command += ["--no-postgres"] if postgres is None else ["--postgres-url", postgres]
                processes.append(subprocess.Popen(command))
                if kind != "sqlite2":  # two workers: their CPU is in processes of their own
                    pids[kind] = processes[-1].pid
                urls[kind] = f"http://127.0.0.1:{port}"
            for kind, process in zip(kinds, processes, strict=True):
                wait_ready(urls[kind], process)
            scripts = {row.key: script_for(row, key, directory) for row in rows}
            print(
                f"bench_service: wrk -t{args.threads} -c{args.concurrency} -d{args.duration}s, "
                f"{args.repeat} repeats, rows interleaved, one uvicorn worker per server, GC on"
            )
            warm = argparse.Namespace(**{**vars(args), "duration": 1})
            for row in rows:  # warm-up: connections, routes, schemas, the stores' files
                run_wrk(urls[server_of[row.key]], row, scripts[row.key], warm, keep=False)
            for _ in range(args.repeat):
                for row in rows:
                    kind = server_of[row.key]
                    run_wrk(urls[kind], row, scripts[row.key], args, pid=pids.get(kind))
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(30)
        print()
        print(
            f"{'row':46} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU µs':>7} {'ratio':>12} "
            f"{'target':>22} {'non-200':>7}"
        )
        targets: dict[str, tuple[Row, float, str]] = {
            "S": (bare, 0.0, ""),
            "M": (bare, 0.7, ">= 0.7x B"),
            "Q": (health, 0.40, ">= 0.40x H"),
            "G": (health, 0.0, ""),
            "Q2": (health2, 0.0, ""),
        }
        figures: dict[str, Any] = {}
        missed = []
        for row in rows:
            shown = ""
            verdict = "(info)"
            p50, p99 = statistics.median(row.p50), statistics.median(row.p99)
            if row.key in targets:
                baseline, bound, text = targets[row.key]
                value = ratio(row, baseline)
                shown = f"{value:.2f}x {baseline.key}"
                figures[f"{row.key}_over_{baseline.key}"] = round(value, 3)
                if bound:
                    ok = value >= bound
                    verdict = f"{text} {'met' if ok else 'MISSED'}"
                    if not ok:
                        missed.append(f"{row.key} throughput")
            if row.key == "Q":
                ok = p99 <= 5 * p50
                verdict += f", p99/p50 {p99 / p50:.1f} {'met' if ok else 'MISSED'}"
                figures["Q_p99_over_p50"] = round(p99 / p50, 2)
                if not ok:
                    missed.append("Q tail")
            figures[row.key] = {"rps": round(statistics.median(row.throughput)), "p50_ms": p50, "p99_ms": p99}
            cpu = f"{statistics.median(row.cpu_us):7.0f}" if row.cpu_us else f"{'-':>7}"
            if row.cpu_us:
                figures[row.key]["cpu_us"] = round(statistics.median(row.cpu_us), 1)
            print(
                f"{row.label:46} {statistics.median(row.throughput):8.0f} {p50:7.2f} {p99:7.2f} {cpu} "
                f"{shown:>12} {verdict:>22} {row.non_200 + row.socket_errors:7d}"
            )
        spread = max(health.throughput) / min(health.throughput)
        print(
            f"\nnoise: [H] ranged {min(health.throughput):.0f}-{max(health.throughput):.0f} req/s "
            f"({spread:.2f}x max/min)"
        )
        for rows_of_store, kind in (((sqlite, sqlite2), "sqlite"), ((pg,), "postgres")):
            if kind == "postgres" and postgres is None:
                continue
            stored = count_events(kind, directory, postgres or "", schema)
            # wrk counts the requests it completed; those cut off at the end may have been served too.
            low = sum(row.requests - row.non_200 for row in rows_of_store) * EVENTS_PER_CALL
            verdict = (
                "all there" if low <= stored <= low + args.concurrency * 8 * EVENTS_PER_CALL else "MISMATCH"
            )
            completed = sum(row.requests for row in rows_of_store)
            print(f"{kind}: {stored} events stored for {completed} completed calls ({verdict})")
        if postgres is not None:
            from sqlalchemy import create_engine, text

            engine = create_engine(postgres)
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            engine.dispose()
        if missed:
            print("missed targets: " + "; ".join(missed))
        if not args.no_history:
            entry = {
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "wrk": f"-t{args.threads} -c{args.concurrency} -d{args.duration}s x{args.repeat}",
                "noise_H_max_over_min": round(spread, 2),
                **figures,
            }
            with HISTORY.open("a") as history:
                history.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
