"""Audit writes at scale: group commit and batched drains against raw durable writes, trace memory.

Run from the repository root::

    .venv/bin/python bench/bench_audit_scale.py                 # the table (a few minutes)
    .venv/bin/python bench/bench_audit_scale.py --quick         # fewer calls, for development

A measurement script, not a test: it asserts nothing about time. The garbage
collector stays on; each row runs a fixed amount of work per repeat, the
repeats of the rows of a section are interleaved, in alternating order (so they
see the same machine load), and a row reports the median over the repeats. Every ratio divides by a
baseline measured in the same run. One JSON line per run is appended to
``bench/history/bench_audit_scale.jsonl`` (``--no-history`` skips it).

Sections:

1. One caller, STRICT: ``gateway.invoke(...)`` of a trivial tool with an
   `AuditTrail` on `SqliteSink` (and on `PostgresSink`), against the two
   durable one-row commits such a call needs, made with the raw driver
   (sqlite3 in WAL with ``synchronous=FULL``, ``BEGIN IMMEDIATE``/insert/
   ``COMMIT`` twice; psycopg insert + ``commit()`` twice). Target: within 2x.
   Its ratios are the median over ``--one-repeat`` rounds of each round's
   ratio: disk flush times drift within a run, and a row and its baseline
   timed next to each other see the same disk.
2. 8 concurrent callers (threads, each its own trace), STRICT and ASYNC (until
   ``flush()`` returned), in events per second, each with its ratio to a raw
   SQLAlchemy bulk insert of the same number of event rows in one transaction
   (the physical limit). Targets: SQLite STRICT >= 5,000 events/s, PostgreSQL
   STRICT >= 3,000, ASYNC >= 50,000 (SQLite) and >= 20,000 (PostgreSQL); the
   writer's own drain (one append of 1,024 queued batches) is shown too, and
   SQLite ASYNC a second time after ``gc.freeze()`` (the objects of the
   process so far left out of full collections, as an application may do
   after start-up): what the collector's walks of the whole heap cost.
3. Trace memory: the resident memory a context's trace adds over 1,000,000
   governed calls with the default retention (the newest 10,000 records),
   against an unbounded trace (``trace_retention=None``) measured over
   ``--unbounded-calls`` calls and scaled to 1,000,000.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditEvent, AuditMode, AuditSink, AuditTrail, EventType, SqliteSink
from toolbox.audit._events import FIELDS
from toolbox.audit._sink import chain_rows
from toolbox.audit.sinks._sql import SqlSink, metadata
from toolbox.audit.sinks._sql_schema import events_table
from toolbox.audit.sinks._sqlite import _FOLD, _FOLD_AT, _INSERT_PENDING

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CALL = {"a": 1, "b": 2, "purpose": "Sum"}
EVENTS_PER_CALL = 4
CALLERS = 8
HISTORY = Path(__file__).with_name("history") / "bench_audit_scale.jsonl"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def governed(sink: AuditSink | None, mode: AuditMode = AuditMode.STRICT) -> tuple[Gateway, AuditTrail | None]:
    trail = None if sink is None else AuditTrail(sink, mode=mode, fallback_path=None)
    governance = Governance() if trail is None else Governance(audit=trail)
    return Gateway.load(providers=[add], discover=False, env={}, governance=governance), trail


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- stores -------------------------------------------------------------------------------------


class Stores:
    """Fresh SQLite files and one PostgreSQL schema; everything is removed at the end."""

    def __init__(self, stack: ExitStack, postgres_url: str) -> None:
        self.tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolbox-bench-scale-")))
        self.stack = stack
        self.postgres_url = postgres_url
        self.schema = f"toolbox_bench_scale_{os.getpid()}"
        self.counter = 0
        self.postgres_error: str | None = None
        try:
            self.postgres().schema_version()
        except Exception as exc:  # noqa: BLE001 - the PostgreSQL rows then say why
            self.postgres_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        stack.callback(self.drop_schema)

    def path(self, tag: str) -> Path:
        self.counter += 1
        return self.tmp / f"{tag}-{self.counter}.db"

    def sqlite(self) -> SqliteSink:
        sink = SqliteSink(self.path("sink"))
        self.stack.callback(sink.close)
        sink.schema_version()
        return sink

    def postgres(self) -> SqlSink:
        from toolbox.audit import PostgresSink

        sink = PostgresSink(self.postgres_url, schema=self.schema, connect_timeout=3, pool_size=CALLERS + 2)
        self.stack.callback(sink.close)
        sink.schema_version()
        return sink

    def drop_schema(self) -> None:
        try:
            engine = create_engine(make_url(self.postgres_url), connect_args={"connect_timeout": 3})
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))
            engine.dispose()
        except Exception as exc:  # noqa: BLE001 - report, never mask the table
            print(f"note: schema {self.schema} not dropped ({type(exc).__name__})")


# -- section 1: one caller --------------------------------------------------------------------


def raw_sqlite_commits(path: Path, stack: ExitStack) -> Callable[[int], float]:
    """N x the two durable one-row commits of a call, with raw sqlite3 (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    stack.callback(conn.close)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    body = json.dumps(sample_rows(1)[0])

    def run(number: int) -> float:
        start = time.perf_counter()
        for _ in range(number * 2):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO raw (body) VALUES (?)", (body,))
            conn.execute("COMMIT")
        return time.perf_counter() - start

    return run


def psycopg_connection(url: str, stack: ExitStack) -> Any:
    """A raw psycopg connection to ``url`` (a SQLAlchemy URL), closed with ``stack``."""
    import psycopg

    parsed = make_url(url)
    conn = psycopg.connect(
        host=parsed.host,
        port=parsed.port,
        user=parsed.username,
        password=parsed.password,
        dbname=parsed.database,
    )
    stack.callback(conn.close)
    return conn


def raw_psycopg_commits(url: str, schema: str, stack: ExitStack) -> Callable[[int], float]:
    """N x the two one-row commits of a call, with a raw psycopg connection."""
    conn = psycopg_connection(url, stack)
    conn.execute(f'CREATE TABLE "{schema}".raw (id bigserial PRIMARY KEY, body text NOT NULL)')
    conn.commit()
    body = json.dumps(sample_rows(1)[0])
    statement = f'INSERT INTO "{schema}".raw (body) VALUES (%s)'

    def run(number: int) -> float:
        start = time.perf_counter()
        for _ in range(number * 2):
            conn.execute(statement, (body,))
            conn.commit()
        return time.perf_counter() - start

    return run


def _floor_rows(count: int, trace_id: str, first: int) -> list[tuple[Any, ...]]:
    """``count`` storage rows of a call's events, numbered from ``first`` (unique event ids)."""
    rows = sample_rows(count, trace_id)
    for offset, row in enumerate(rows):
        row["sequence"] = first + offset
    return [tuple(row[name] for name in FIELDS) for row in rows]


def schema_sqlite_commits(sink: SqliteSink, stack: ExitStack) -> Callable[[int], float]:
    """N x a call's two commits on the audit schema with raw sqlite3: the store's physical floor.

    Opening (3 event rows, the head) then closing (1 row, the head), each
    ``BEGIN IMMEDIATE``/``COMMIT`` in WAL with ``synchronous=FULL``, written as
    the sink writes them: the rows into ``audit_pending`` (its trigger's
    lookups included), the head, and every `_FOLD_AT` rows the fold into
    ``audit_events``; but with no chaining, no event objects and no governed call.
    """
    conn = sqlite3.connect(sink.path, isolation_level=None, check_same_thread=False)
    stack.callback(conn.close)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    head = "INSERT OR REPLACE INTO audit_trace_heads (trace_id, last_sequence, last_hash) VALUES (?, ?, ?)"
    trace, sequence, added = f"floor-{time.monotonic_ns()}", 0, 0

    def run(number: int) -> float:
        nonlocal sequence, added
        batches = []
        for _ in range(number):
            for count in (3, 1):
                batches.append(_floor_rows(count, trace, sequence + 1))
                sequence += count
        start = time.perf_counter()
        for rows in batches:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_INSERT_PENDING, rows)
            added += len(rows)
            if added >= _FOLD_AT:
                for statement in _FOLD:  # the sink's own statements
                    conn.execute(statement)
                added = 0
            conn.execute(head, (trace, rows[-1][3], rows[-1][-2]))
            conn.execute("COMMIT")
        return time.perf_counter() - start

    return run


def schema_psycopg_commits(url: str, schema: str, stack: ExitStack) -> Callable[[int], float]:
    """N x a call's two commits on the audit schema with a raw psycopg connection (see the SQLite twin)."""
    conn = psycopg_connection(url, stack)
    columns = ", ".join(FIELDS)
    insert = f'INSERT INTO "{schema}".audit_events ({columns}) VALUES ({", ".join(["%s"] * len(FIELDS))})'
    trace, sequence = f"floor-{time.monotonic_ns()}", 0
    conn.execute(
        f'INSERT INTO "{schema}".audit_trace_heads (trace_id, last_sequence, last_hash) VALUES (%s, 0, %s)',
        (trace, "0" * 64),
    )
    conn.commit()
    head = f'UPDATE "{schema}".audit_trace_heads SET last_sequence = %s, last_hash = %s WHERE trace_id = %s'

    def run(number: int) -> float:
        nonlocal sequence
        batches = []
        for _ in range(number):
            for count in (3, 1):
                batches.append(_floor_rows(count, trace, sequence + 1))
                sequence += count
        start = time.perf_counter()
        for rows in batches:
            with conn.cursor() as cursor:
                cursor.executemany(insert, rows)
                cursor.execute(head, (rows[-1][3], rows[-1][-2], trace))
            conn.commit()
        return time.perf_counter() - start

    return run


def one_caller(sink: SqlSink) -> Callable[[int], float]:
    """N governed STRICT calls by one caller; every call is checked (outside the timing)."""
    gateway, trail = governed(sink)
    assert trail is not None
    context = ExecutionContext(tenant="bench", principal="bench", trace_retention=16)

    def run(number: int) -> float:
        start = time.perf_counter()
        results = [gateway.invoke("add", CALL, context=context) for _ in range(number)]
        elapsed = time.perf_counter() - start
        assert all(r.status is Status.SUCCESS and not r.audit_failed for r in results)
        return elapsed

    return run


# -- section 2: 8 concurrent callers ------------------------------------------------------------


def concurrent_callers(sink: SqlSink, mode: AuditMode, *, frozen: bool = False) -> Callable[[int], float]:
    """8 threads x N/8 governed calls, each thread its own trace; timed until ``flush()`` returned.

    ``frozen``: the process's objects so far are moved out of the collector's reach first
    (``gc.freeze()``, as an application may do after start-up); they go back afterwards.
    """
    gateway, trail = governed(sink, mode)
    assert trail is not None

    def run(number: int) -> float:
        per_thread = max(number // CALLERS, 1)
        contexts = [
            ExecutionContext(tenant="bench", principal=f"p{n}", trace_retention=16) for n in range(CALLERS)
        ]
        barrier = threading.Barrier(CALLERS + 1)
        failures: list[object] = []

        def work(context: ExecutionContext) -> None:
            barrier.wait()
            for _ in range(per_thread):
                result = gateway.invoke("add", CALL, context=context)
                if result.status is not Status.SUCCESS or result.audit_failed:
                    failures.append(result.reason_code)

        threads = [threading.Thread(target=work, args=(c,)) for c in contexts]
        for thread in threads:
            thread.start()
        if frozen:
            gc.freeze()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        trail.flush()
        elapsed = time.perf_counter() - start
        if frozen:
            gc.unfreeze()
        assert not failures, failures[:3]
        return elapsed * number / (per_thread * CALLERS)

    return run


def sample_rows(count: int, trace_id: str = "bench") -> list[dict[str, Any]]:
    """``count`` chained storage rows like a governed call's events (rule_ids as stored: JSON text)."""
    events = []
    for _ in range(count):
        event = AuditEvent(
            EventType.INVOCATION_REQUEST,
            trace_id=trace_id,
            correlation_id="bench-correlation",
            name="add",
            tool="add",
            operation="call",
            risk="MEMORY_ONLY",
            effect="READ_ONLY",
            intent_kind="purpose",
            intent_text="Sum",
            tenant="bench",
            principal="bench",
            attempt=1,
        )
        events.append(event)
    rows, _ = chain_rows(events, lambda _t: (0, "0" * 64))
    for row in rows:
        row["rule_ids"] = "[]"
    return rows


def raw_bulk_insert(url: str) -> Callable[[int], float]:
    """N calls' worth of event rows (4 per call) in one SQLAlchemy transaction: the physical limit."""
    engine = create_engine(url)

    def run(number: int) -> float:
        rows = sample_rows(number * EVENTS_PER_CALL, trace_id=f"bulk-{time.monotonic_ns()}")
        start = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(insert(events_table), rows)
        return time.perf_counter() - start

    metadata.create_all(engine)
    return run


def writer_drain(sink: SqlSink) -> Callable[[int], float]:
    """The ASYNC writer's step: one append of N calls' queued events (4 per call), one transaction."""

    def run(number: int) -> float:
        trace = f"drain-{time.monotonic_ns()}"
        events = [
            AuditEvent(EventType.INVOCATION_REQUEST, trace_id=trace, name="add", tool="add", operation="call")
            for _ in range(number * EVENTS_PER_CALL)
        ]
        start = time.perf_counter()
        sink.append(events)
        return time.perf_counter() - start

    return run


# -- section 3: trace memory --------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trace_growth(calls: int, retention: int | None) -> tuple[int, int, float]:
    """(RSS growth in bytes, records kept, seconds) over ``calls`` governed calls in one context."""
    gateway, _ = governed(None)
    context = ExecutionContext(tenant="bench", principal="bench", trace_retention=retention)
    for _ in range(1000):  # warm caches before the first reading
        gateway.invoke("add", CALL, context=context)
    context.trace._records.clear()  # benchmark only
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    invoke = gateway.invoke
    for _ in range(calls):
        invoke("add", CALL, context=context)
    elapsed = time.perf_counter() - start
    gc.collect()
    return rss_bytes() - before, len(context.trace), elapsed


# -- running ------------------------------------------------------------------------------------


def interleaved_rounds(
    rows: dict[str, Callable[[int], float]], number: dict[str, int], repeat: int
) -> dict[str, list[float]]:
    """Seconds per op of each row in each round, the rows of a round run one after another."""
    times: dict[str, list[float]] = {key: [] for key in rows}
    for key, run in rows.items():
        run(max(number[key] // 10, 1))  # warm up: pools, statement caches
    for round_ in range(repeat):
        order = list(rows.items()) if round_ % 2 == 0 else list(reversed(rows.items()))
        for key, run in order:
            times[key].append(run(number[key]) / number[key])
    return times


def interleaved(
    rows: dict[str, Callable[[int], float]], number: dict[str, int], repeat: int
) -> dict[str, float]:
    """Median seconds per op of each row, its repeats interleaved with the other rows'."""
    rounds = interleaved_rounds(rows, number, repeat)
    return {key: statistics.median(values) for key, values in rounds.items()}


def round_ratio(times: dict[str, list[float]], key: str, base: str) -> float:
    """The median over rounds of ``key``'s time over ``base``'s in the same round.

    Disk flush times drift by tens of percent within a run; a row and its
    baseline measured next to each other see the same disk.
    """
    return statistics.median(a / b for a, b in zip(times[key], times[base], strict=True))


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:8.1f} us"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--one-repeat", type=int, default=15, help="rounds of section 1 (default 15)")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--quick", action="store_true", help="fewer calls (development)")
    parser.add_argument("--trace-calls", type=int, default=1_000_000)
    parser.add_argument("--unbounded-calls", type=int, default=100_000)
    parser.add_argument("--no-history", action="store_true")
    parser.add_argument("--trace-only", nargs=2, metavar=("CALLS", "RETENTION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trace_only:
        calls, retention = int(args.trace_only[0]), args.trace_only[1]
        grown, kept, seconds = trace_growth(calls, None if retention == "none" else int(retention))
        print(json.dumps({"rss_growth": grown, "kept": kept, "seconds": seconds}))
        return 0
    scale = 0.2 if args.quick else 1.0
    if args.quick:
        args.trace_calls = min(args.trace_calls, 100_000)
        args.unbounded_calls = min(args.unbounded_calls, 20_000)
    results: dict[str, Any] = {"load_before": loadavg(), "repeat": args.repeat}
    print(
        f"bench_audit_scale: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, GC on, median of "
        f"{args.repeat} repeats, load average {loadavg()}"
    )
    with ExitStack() as stack:
        stores = Stores(stack, args.postgres_url)
        pg = stores.postgres_error is None
        if not pg:
            print(f"PostgreSQL rows: unavailable ({stores.postgres_error})")

        # 1. one caller
        rows: dict[str, Callable[[int], float]] = {
            "RS": raw_sqlite_commits(stores.path("raw"), stack),
            "FS": schema_sqlite_commits(stores.sqlite(), stack),
            "GS": one_caller(stores.sqlite()),
        }
        number = {"RS": int(200 * scale) or 20, "FS": int(200 * scale) or 20, "GS": int(200 * scale) or 20}
        if pg:
            rows["RP"] = raw_psycopg_commits(args.postgres_url, stores.schema, stack)
            rows["FP"] = schema_psycopg_commits(args.postgres_url, stores.schema, stack)
            rows["GP"] = one_caller(stores.postgres())
            number |= {
                "RP": int(150 * scale) or 15,
                "FP": int(150 * scale) or 15,
                "GP": int(150 * scale) or 15,
            }
        rounds = interleaved_rounds(rows, number, args.one_repeat)
        one = {key: statistics.median(values) for key, values in rounds.items()}
        print(
            "\n1. One caller, STRICT: a governed call vs the two durable one-row commits it needs "
            f"(ratios: median of {args.one_repeat} rounds' ratios)"
        )
        for engine_name, raw, floor, governed_key, raw_label, sink_name in (
            (
                "SQLite",
                "RS",
                "FS",
                "GS",
                "raw sqlite3, 2 x (BEGIN IMMEDIATE; INSERT; COMMIT), WAL, FULL",
                "SqliteSink",
            ),
            ("PostgreSQL", "RP", "FP", "GP", "raw psycopg, 2 x (INSERT; commit())", "PostgresSink"),
        ):
            if raw not in one:
                continue
            print(f"  [{raw}] {raw_label:76} {fmt(one[raw])}")
            floor_label = f"the same 2 commits on the audit schema (3+1 rows, head), raw {engine_name}"
            if engine_name == "SQLite":
                floor_label = "the same 2 commits (3+1 rows to audit_pending, head, folds), raw SQLite"
            floor_ratio = round_ratio(rounds, floor, raw)
            print(f"  [{floor}] {floor_label:76} {fmt(one[floor])}  {floor_ratio:5.2f}x {raw}")
            ratio = round_ratio(rounds, governed_key, raw)
            print(
                f"       {'gateway.invoke, STRICT, ' + sink_name:76} {fmt(one[governed_key])}  "
                f"{ratio:5.2f}x {raw}  target <= 2x  {'met' if ratio <= 2 else 'MISSED'}"
                f"  ({round_ratio(rounds, governed_key, floor):.2f}x {floor})"
            )
            results[f"one_{engine_name.lower()}_ratio"] = ratio
            results[f"one_{engine_name.lower()}_floor_ratio"] = floor_ratio
        results |= {
            "one_sqlite_raw": one["RS"],
            "one_sqlite_schema": one["FS"],
            "one_sqlite_strict": one["GS"],
        }
        if pg:
            results |= {
                "one_postgres_raw": one["RP"],
                "one_postgres_schema": one["FP"],
                "one_postgres_strict": one["GP"],
            }

        # 2. eight callers
        calls = int(2000 * scale)
        sqlite_url = f"sqlite:///{stores.path('bulk')}"
        rows = {
            "BS": raw_bulk_insert(sqlite_url),
            "SS": concurrent_callers(stores.sqlite(), AuditMode.STRICT),
            "SA": concurrent_callers(stores.sqlite(), AuditMode.ASYNC),
            "SF": concurrent_callers(stores.sqlite(), AuditMode.ASYNC, frozen=True),
            "DS": writer_drain(stores.sqlite()),
        }
        number = {"BS": calls, "SS": calls // 2, "SA": calls, "SF": calls, "DS": 512}
        if pg:
            pg_url = args.postgres_url + f"?options=-csearch_path%3D{stores.schema}"
            rows |= {
                "BP": raw_bulk_insert(pg_url),
                "PS": concurrent_callers(stores.postgres(), AuditMode.STRICT),
                "PA": concurrent_callers(stores.postgres(), AuditMode.ASYNC),
                "DP": writer_drain(stores.postgres()),
            }
            number |= {"BP": calls, "PS": calls // 2, "PA": calls, "DP": 512}
        eight = interleaved(rows, number, args.repeat)
        rate = {key: EVENTS_PER_CALL / per_op for key, per_op in eight.items()}
        print(f"\n2. {CALLERS} concurrent callers (threads, one trace each), events/s (4 events per call)")
        targets = {"SS": 5_000, "SA": 50_000, "PS": 3_000, "PA": 20_000}
        labels = {
            "SS": "SQLite STRICT",
            "SA": "SQLite ASYNC, until flush()",
            "SF": "SQLite ASYNC after gc.freeze() (no target)",
            "DS": "SQLite writer drain, 1,024 batches per append",
            "PS": "PostgreSQL STRICT",
            "PA": "PostgreSQL ASYNC, until flush()",
            "DP": "PostgreSQL writer drain, 1,024 batches per append",
        }
        for base, keys in (("BS", ("SS", "SA", "SF", "DS")), ("BP", ("PS", "PA", "DP"))):
            if base not in rate:
                continue
            engine_name = "SQLite" if base == "BS" else "PostgreSQL"
            name = f"raw SQLAlchemy bulk insert, one transaction, {engine_name}"
            print(f"  [{base}] {name:46} {rate[base]:10,.0f} ev/s")
            for key in keys:
                slower = rate[base] / rate[key]
                line = f"       {labels[key]:46} {rate[key]:10,.0f} ev/s  {slower:6.2f}x slower than {base}"
                if key in targets:
                    line += (
                        f"  target >= {targets[key]:,}  {'met' if rate[key] >= targets[key] else 'MISSED'}"
                    )
                print(line)
        # STRICT: a caller has one batch in flight, so a commit holds at most 8 batches (2 events each
        # on average): with SQLite's one writer, that and the raw commit time of section 1 bound the rate.
        ceiling = CALLERS * (EVENTS_PER_CALL / 2) / (one["RS"] / 2)
        print(
            f"       (SQLite STRICT ceiling for {CALLERS} callers: {CALLERS} batches per [RS] commit = "
            f"{ceiling:,.0f} ev/s; STRICT reached {rate['SS'] / ceiling:.0%} of it)"
        )
        results |= {f"rate_{key}": value for key, value in rate.items()} | {"sqlite_strict_ceiling": ceiling}

    # 3. trace memory, each in a fresh process: freed memory of the sections above cannot hide growth
    print("\n3. Trace memory of one context over governed calls (no audit trail: the trace alone)")
    for label, calls, retention in (
        ("default retention (10,000)", args.trace_calls, "10000"),
        ("unbounded (None)", args.unbounded_calls, "none"),
    ):
        command = [sys.executable, __file__, "--trace-only", str(calls), retention]
        measured = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        grown, kept, seconds = measured["rss_growth"], measured["kept"], measured["seconds"]
        per_million = grown * 1_000_000 / calls if retention == "none" else grown
        how = "scaled to" if calls != 1_000_000 and retention == "none" else "after"
        if retention != "none":
            how = "flat beyond 10,000 records; after" if calls == 1_000_000 else "flat: the same after"
        print(
            f"  {label:27} {calls:>9,} calls, {kept:>9,} records kept: RSS +{grown / 2**20:6.1f} MiB "
            f"({how} 1,000,000 calls: {per_million / 2**20:6.1f} MiB), {seconds / calls * 1e6:.1f} us/call"
        )
        results[f"trace_{retention}_bytes_per_million"] = per_million
    results["load_after"] = loadavg()
    print(
        f"\nload average after: {loadavg()} (2 cores shared with other work: read the ratios, not the times)"
    )
    if not args.no_history:
        HISTORY.parent.mkdir(exist_ok=True)
        results["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results["quick"] = args.quick
        with HISTORY.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
