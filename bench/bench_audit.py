"""The audit trail's cost: sink throughput, and the governed by-name call with each sink and mode.

Run from the repository root::

    .venv/bin/python bench/bench_audit.py              # the table (about 60 s)
    .venv/bin/python bench/bench_audit.py --profile    # then cProfile appends to each sink

This is a measurement script, not a test: nothing in it asserts anything about
time. It times the way ``bench_core.py`` does: the statement is compiled into
timeit's loop (garbage collector off, ``time.perf_counter``), N is chosen so
that one repeat lasts about ``--min-time``, the repeats of every row of a
section are interleaved, a row reports the minimum time per operation over the
repeats, and ratios divide by a baseline measured in the same run. No targets
are set for the audit trail yet: every ratio is for information.

Two things differ from ``bench_core.py``, both because of ASYNC mode:

- An ASYNC row times the loop (what the caller waits: the enqueue), then the
  ``trail.flush()`` that drains the queue. It reports both the caller's time
  per op and the time per op until ``flush()`` returned, so the drained
  throughput is honest. N is chosen from the drained time, and bounded so the
  queue (``queue_size``, 10 000 batches by default) never fills: a full queue
  would refuse calls, which are cheap, and flatter the row.
- Before each repeat, and outside the timing, a row may prepare N items (fresh
  events for the appends); after each repeat it checks that the sink stored
  exactly 4 events per op, and the governed rows that every call succeeded.

Sinks: ``MemorySink``; ``JsonlSink`` and ``SqliteSink`` in a temporary
directory; ``PostgresSink`` at ``--postgres-url`` in a schema of its own
(``toolbox_bench_<pid>``), dropped at the end. When PostgreSQL cannot be
reached its rows say "unavailable".

Sections:

1. Appends of a batch of 4 events (one successful call's events): directly to
   each sink (synchronous, as STRICT writes), each durable sink against a
   floor (the same durable write without toolbox), then through an
   `AuditTrail` in STRICT and in ASYNC mode.
2. ``gateway.invoke("add", {...}, context=ctx)`` of a trivial ``MEMORY_ONLY``
   ``@tool`` function, governed with each sink in STRICT and ASYNC mode,
   against the same call with the memory sink and without an audit trail; a
   no-op sink (its append only counts) shows the trail's own cost.

The governed rows clear ``ctx.trace`` before every repeat through its private
list, as ``bench_governed.py`` does: only a benchmark should.

Group commit, batched ASYNC drains, 8 concurrent callers and trace memory are
timed by ``bench_audit_scale.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import sqlalchemy
from bench_core import fmt_time
from sqlalchemy import create_engine, event, func, select, text
from sqlalchemy.engine import make_url

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import (
    AuditEvent,
    AuditMode,
    AuditSink,
    AuditTrail,
    EventType,
    JsonlSink,
    MemorySink,
    SqliteSink,
)
from toolbox.audit._sink import chain_rows
from toolbox.audit.sinks._sql import events_table

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
EVENTS_PER_CALL = 4
"""A successful call writes 4 events: intent, decision and request in one batch, then the response."""
QUEUE_SIZE = 10_000
"""`AuditTrail`'s default ``queue_size`` (in batches); the ASYNC rows use the default."""
ASYNC_MAX_BATCHES = 9_000
"""At most this many batches queued in one ASYNC repeat, below ``QUEUE_SIZE``: nothing is refused."""
ASYNC_MIN_OPS = 50
"""At least this many ops per ASYNC repeat, so the caller's time is not a handful of enqueues."""
INVOKE_STMT = 'gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum"}, context=ctx)'

trail_closers: list[Callable[[], None]] = []
"""Every trail built: closed (queue drained, writer stopped, sink closed) before the schema is dropped."""


# -- the tool and the events ---------------------------------------------------------------


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_batch(trace_id: str, correlation_id: str = "bench-correlation") -> list[AuditEvent]:
    """The 4 events a successful by-name call of ``add`` writes, with the same field values."""
    common: dict[str, Any] = {
        "trace_id": trace_id,
        "correlation_id": correlation_id,
        "name": "add",
        "tool": "add",
        "operation": "call",
        "risk": "MEMORY_ONLY",
        "effect": "READ_ONLY",
        "intent_kind": "purpose",
        "intent_text": "Sum",
        "tenant": "bench-tenant",
        "principal": "bench-principal",
    }
    return [
        AuditEvent(
            EventType.INTENT_DECLARED,
            payload_summary='{"a":1,"b":2}',
            payload_hash="43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777",
            **common,
        ),
        AuditEvent(EventType.GOVERNANCE_DECISION, decision="ALLOW", **common),
        AuditEvent(EventType.INVOCATION_REQUEST, attempt=1, **common),
        AuditEvent(EventType.INVOCATION_RESPONSE, status="SUCCESS", duration=3.7e-05, attempt=1, **common),
    ]


def batch_lines() -> str:
    """A batch as JsonlSink writes it (4 chained JSON lines): the payload of the floors."""
    rows, _ = chain_rows(make_batch("bench-floor"), lambda _trace: (0, "0" * 64))
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


# -- backends ----------------------------------------------------------------------------------


@dataclass
class Backend:
    """One kind of sink: how to build a fresh one and how many events of a trace it holds."""

    key: str
    name: str
    new: Callable[[str], AuditSink]
    count: Callable[[AuditSink, str], int]
    unavailable: str | None = None


def _sql_count(sink: AuditSink, trace_id: str) -> int:
    engine = sink.engine  # type: ignore[attr-defined]
    query = select(func.count()).select_from(events_table).where(events_table.c.trace_id == trace_id)
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _memory_count(sink: AuditSink, _trace_id: str) -> int:
    return len(sink.records)  # type: ignore[attr-defined]  # one trace per sink


def _jsonl_count(sink: AuditSink, _trace_id: str) -> int:
    # One file per sink, one trace per file.
    path: Path = sink.path  # type: ignore[attr-defined]
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


class NullSink:
    """An `AuditSink` that counts the events it is given and stores nothing."""

    def __init__(self) -> None:
        self.count = 0

    def append(self, events: Sequence[AuditEvent]) -> None:
        self.count += len(events)

    def read_trace(self, _trace_id: str) -> list[Any]:
        return []

    def query(self, _query: object) -> list[Any]:
        return []

    def close(self) -> None:
        """Nothing held."""


NULL = Backend("Z", "no-op sink", lambda _tag: NullSink(), lambda s, _t: s.count)  # type: ignore[attr-defined]


def _unreachable(_tag: str) -> AuditSink:
    raise RuntimeError("PostgreSQL is unavailable")


def make_backends(tmp: Path, postgres_url: str, schema: str, stack: ExitStack) -> list[Backend]:
    """The four sinks; every sink built is closed when ``stack`` closes."""
    counter = iter(range(1_000_000))

    def closing(sink: AuditSink) -> AuditSink:
        """Closed with ``stack``; its schema is created now, not in a timed repeat."""
        stack.callback(sink.close)
        sink.schema_version()  # type: ignore[attr-defined]
        return sink

    backends = [
        Backend("M", "MemorySink", lambda _tag: MemorySink(), _memory_count),
        Backend("J", "JsonlSink", lambda tag: JsonlSink(tmp / f"{tag}-{next(counter)}.jsonl"), _jsonl_count),
        Backend(
            "S",
            "SqliteSink",
            lambda tag: closing(SqliteSink(tmp / f"{tag}-{next(counter)}.db")),
            _sql_count,
        ),
    ]
    postgres = Backend("P", "PostgresSink", _unreachable, _sql_count)
    try:
        from toolbox.audit import PostgresSink

        closing(PostgresSink(postgres_url, schema=schema, connect_timeout=3))  # creates schema and tables
        postgres.new = lambda _tag: closing(PostgresSink(postgres_url, schema=schema))
    except Exception as exc:  # noqa: BLE001 - any failure: the PostgreSQL rows say so
        postgres.unavailable = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    backends.append(postgres)
    return backends


def drop_schema(postgres_url: str, schema: str) -> str:
    """Drop the benchmark's schema; returns what happened, for the footer."""
    try:
        engine = create_engine(make_url(postgres_url), connect_args={"connect_timeout": 3})
        try:
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        finally:
            engine.dispose()
    except Exception as exc:  # noqa: BLE001 - report, do not mask the run's output
        return f"schema {schema} not dropped (PostgreSQL: {type(exc).__name__})"
    return f"schema {schema} dropped"


# -- floors: the same durable write without toolbox ------------------------------------------


def jsonl_floor(path: Path, payload: str) -> Callable[[], None]:
    def write() -> None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())

    return write


def sqlite_floor(path: Path, payload: str, stack: ExitStack) -> Callable[[], None]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    stack.callback(conn.close)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE floor (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    rows = [(line,) for line in payload.splitlines()]

    def write() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO floor (body) VALUES (?)", rows)
        conn.execute("COMMIT")

    return write


def postgres_floor(postgres_url: str, schema: str, payload: str, stack: ExitStack) -> Callable[[], None]:
    import psycopg

    url = make_url(postgres_url)
    conn = psycopg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, dbname=url.database
    )
    stack.callback(conn.close)
    conn.execute(f'CREATE TABLE "{schema}".floor (id bigserial PRIMARY KEY, body text NOT NULL)')
    conn.commit()
    rows = [(line,) for line in payload.splitlines()]
    insert = f'INSERT INTO "{schema}".floor (body) VALUES (%s)'

    def write() -> None:
        with conn.cursor() as cur:
            cur.executemany(insert, rows)
        conn.commit()

    return write


# -- timing -----------------------------------------------------------------------------------


@dataclass
class Row:
    """One timed statement.

    ``prepare(N)`` runs before each repeat and ``check(N)`` after it (after the
    flush), both outside the timing. ``flush`` is timed after the loop (ASYNC rows).
    """

    label: str
    stmt: str
    ns: dict[str, Any]
    events_per_op: int = EVENTS_PER_CALL
    unit: str = "ev"
    prepare: Callable[[int], None] | None = None
    check: Callable[[int], None] | None = None
    flush: Callable[[], None] | None = None
    min_number: int = 1
    max_number: int = 10**9


@dataclass
class Measurement:
    row: Row
    number: int
    per_op: float
    """Minimum over the repeats of (loop time / N): the caller's time per op."""
    drained: float
    """Minimum over the repeats of ((loop + flush) time / N); equal to ``per_op`` without a flush."""

    @property
    def rate(self) -> float:
        """Ops (or events) per second, drained: what the sink sustains."""
        per = self.row.events_per_op if self.row.unit == "ev" else 1
        return per / self.drained

    @property
    def is_async(self) -> bool:
        return self.row.flush is not None


_TEMPLATE = """
def _inner(_it, _timer, _flush):
    _t0 = _timer()
    for _i in _it:
        {stmt}
    _t1 = _timer()
    if _flush is not None:
        _flush()
    _t2 = _timer()
    return _t1 - _t0, _t2 - _t0
"""


def _runner(row: Row) -> Callable[[int], tuple[float, float]]:
    """timeit's loop for ``row``, followed by its flush: returns (loop time, loop + flush time)."""
    scope: dict[str, Any] = {}
    exec(compile(_TEMPLATE.format(stmt=row.stmt), f"<{row.label}>", "exec"), row.ns, scope)
    inner = scope["_inner"]

    def run(number: int) -> tuple[float, float]:
        if row.prepare is not None:
            row.prepare(number)
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            loop, total = inner(range(number), time.perf_counter, row.flush)
        finally:
            if gc_was_enabled:
                gc.enable()
        if row.check is not None:
            row.check(number)
        return loop, total

    return run


def _choose_number(run: Callable[[int], tuple[float, float]], row: Row, min_time: float) -> int:
    """As ``bench_core._choose_number`` (grow tenfold, then scale), on the drained time, clamped."""
    number = min(1, row.max_number)
    while True:
        _, elapsed = run(number)
        if elapsed >= min_time / 10 or number >= row.max_number:
            break
        number = min(number * 10, row.max_number)
    if elapsed < min_time:
        wanted = min_time / (elapsed / number) if elapsed > 0 else number * 10.0
        number = max(number, int(float(f"{wanted:.2g}")))
    return max(row.min_number, min(number, row.max_number))


def measure(rows: Sequence[Row], *, repeat: int, min_time: float) -> list[Measurement]:
    """N per row, then ``repeat`` repeats taken in turns by every row; minimum per op kept."""
    runners = [_runner(r) for r in rows]
    numbers = [_choose_number(run, row, min_time) for run, row in zip(runners, rows, strict=True)]
    loops: list[list[float]] = [[] for _ in rows]
    totals: list[list[float]] = [[] for _ in rows]
    for _ in range(repeat):
        for run, number, loop_times, total_times in zip(runners, numbers, loops, totals, strict=True):
            loop, total = run(number)
            loop_times.append(loop)
            total_times.append(total)
    return [
        Measurement(row, n, min(lo) / n, min(to) / n)
        for row, n, lo, to in zip(rows, numbers, loops, totals, strict=True)
    ]


# -- output -------------------------------------------------------------------------------------


def fmt_rate(value: float, unit: str) -> str:
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:6.1f}{suffix} {unit}/s"
    return f"{value:6.1f}  {unit}/s"


class Table:
    """Like ``bench_core.Table``, with a rate column; every ratio is informational."""

    LABEL = 62

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._baselines: dict[str, float] = {}

    def section(self, title: str) -> None:
        self.lines += ["", title]

    def note(self, text_: str) -> None:
        self.lines.append(f"         note: {text_}")

    def row(
        self,
        m: Measurement,
        *,
        key: str | None = None,
        against: str | None = None,
        drained: bool = False,
        label: str | None = None,
    ) -> None:
        """A row; ``key`` makes it a baseline; ``drained`` shows the until-flush time of an ASYNC row."""
        per_op = m.drained if drained else m.per_op
        if key is not None:
            self._baselines[key] = per_op
        ratio = "baseline" if key is not None and against is None else ""
        if against is not None:
            value = per_op / self._baselines[against]
            ratio = f"{value:8.2f}x {against}" if value >= 0.1 else f"{value:8.2g}x {against}"
        if m.is_async and not drained:
            rate_value = (m.row.events_per_op if m.row.unit == "ev" else 1) / m.per_op
            rate = fmt_rate(rate_value, m.row.unit) + " (enqueue)"
        else:
            rate = fmt_rate(m.rate, m.row.unit)
        shown = label if label is not None else m.row.label
        self._line(f"[{key}]" if key else "", shown, str(m.number), fmt_time(per_op), rate, ratio)

    def unavailable(self, label: str, _reason: str) -> None:
        self._line("", label, "-", "-", "unavailable (see header)", "")

    def _line(self, key: str, label: str, number: str, per_op: str, rate: str, ratio: str) -> None:
        line = f"  {key:<6} {label:<{self.LABEL}} {number:>8} {per_op:>11}  {rate:<24} {ratio}"
        self.lines.append(line.rstrip())

    @classmethod
    def header(cls) -> str:
        head = f"  {'key':<6} {'measurement':<{cls.LABEL}} {'N/repeat':>8} {'per op':>11}  {'rate':<24} ratio"
        return head + "\n  " + "-" * (len(head) + 8)


# -- section 1: appends -------------------------------------------------------------------------


def _batches_row(
    label: str, target: Callable[..., object], backend: Backend, sink: AuditSink, trace_id: str, **kw: Any
) -> Row:
    """``target(next(_batches))``: N fresh batches built before each repeat, stored events counted after."""
    ns: dict[str, Any] = {"target": target, "_batches": iter(())}
    state = {"before": 0}

    def prepare(number: int) -> None:
        ns["_batches"] = iter([make_batch(trace_id) for _ in range(number)])
        state["before"] = backend.count(sink, trace_id)

    def check(number: int) -> None:
        stored = backend.count(sink, trace_id) - state["before"]
        if stored != EVENTS_PER_CALL * number:
            raise SystemExit(f"{label}: {stored} events stored for {number} batches of {EVENTS_PER_CALL}")

    return Row(label, "target(next(_batches))", ns, prepare=prepare, check=check, **kw)


def bench_appends(
    table: Table,
    backends: list[Backend],
    floors: dict[str, Callable[[], None]],
    *,
    repeat: int,
    min_time: float,
) -> None:
    available = [b for b in backends if b.unavailable is None]
    rows: dict[str, Row] = {}
    for b in available:
        direct = b.new("direct")
        rows[f"direct {b.key}"] = _batches_row(
            f"{b.name}.append(batch)", direct.append, b, direct, f"bench-direct-{b.key}"
        )
        strict = AuditTrail(b.new("strict"), mode=AuditMode.STRICT, fallback_path=None)
        rows[f"strict {b.key}"] = _batches_row(
            f"AuditTrail(STRICT): {b.name}", strict._store, b, strict.sink, f"bench-strict-{b.key}"
        )
        asynchronous = AuditTrail(b.new("async"), mode=AuditMode.ASYNC, fallback_path=None)
        rows[f"async {b.key}"] = _batches_row(
            f"AuditTrail(ASYNC): {b.name}, caller's time (enqueue)",
            asynchronous._store,
            b,
            asynchronous.sink,
            f"bench-async-{b.key}",
            flush=asynchronous.flush,
            min_number=ASYNC_MIN_OPS,
            max_number=ASYNC_MAX_BATCHES,
        )
        trail_closers.extend((strict.close, asynchronous.close))
    for key, write in floors.items():
        rows[f"floor {key}"] = Row(f"floor {key}", "write()", {"write": write})
    rows["build"] = Row("build", 'make_batch("bench-build")', {"make_batch": make_batch})
    for row in rows.values():  # sanity: one op of each, counts checked (and the SQL schema created)
        _runner(row)(1)
    measured = dict(zip(rows, measure(list(rows.values()), repeat=repeat, min_time=min_time), strict=True))

    table.section(
        f"1. Appends of one batch of {EVENTS_PER_CALL} events (one successful call's events); "
        "fresh events, built before timing"
    )
    table.note("rate = events/s; a durable sink's append returns once its batch is on disk (fsync / commit)")
    for b in backends:
        if b.unavailable is not None:
            table.unavailable(f"{b.name}.append(batch)", b.unavailable)
            continue
        table.row(measured[f"direct {b.key}"], key=b.key, against=None if b.key == "M" else "M")
    table.row(measured["build"], against="M", label="  (building a batch: 4 AuditEvent(...); not an append)")
    table.note("floors: the same durable write of the same 4 JSON lines, without toolbox")
    floor_labels = {
        "J": ("FJ", "floor: open('a'), write 4 JSON lines, flush, fsync, close"),
        "S": ("FS", "floor: sqlite3 BEGIN IMMEDIATE, 4-row executemany, COMMIT"),
        "P": ("FP", "floor: psycopg 4-row executemany + commit, bare 2-column table"),
    }
    for b in backends:
        if b.key not in floor_labels:
            continue
        floor_key, floor_label = floor_labels[b.key]
        if b.unavailable is not None:
            table.unavailable(floor_label, b.unavailable)
            continue
        table.row(measured[f"floor {b.key}"], key=floor_key, label=floor_label)
        table.row(measured[f"direct {b.key}"], against=floor_key, label=f"  {b.name}.append vs its floor")
    table.note("SQLite (both rows): WAL, synchronous=FULL; PostgreSQL: the server's synchronous_commit")

    table.section(
        "1b. The same batches through AuditTrail._store(batch), the write step of on_request/on_response"
    )
    table.note("STRICT writes synchronously; ASYNC enqueues for a writer thread. ASYNC rows: the caller's")
    table.note("time per batch, then the time per batch until flush() returned (queue drained, rate honest)")
    for b in backends:
        if b.unavailable is not None:
            table.unavailable(f"AuditTrail(STRICT/ASYNC): {b.name}", b.unavailable)
            continue
        table.row(measured[f"strict {b.key}"], against=b.key)
        m = measured[f"async {b.key}"]
        table.row(m, against=b.key)
        table.row(m, against=b.key, drained=True, label="  the same, until flush() returned (drained)")


# -- section 2: governed calls ------------------------------------------------------------------


def _gateway_row(label: str, backend: Backend | None, mode: AuditMode | None) -> Row:
    """``gateway.invoke(...)`` with the trail built from ``backend`` and ``mode`` (none: no audit)."""
    trail = None
    if backend is not None and mode is not None:
        trail = AuditTrail(backend.new(f"gateway-{mode.value}"), mode=mode, fallback_path=None)
        trail_closers.append(trail.close)
    governance = Governance(audit=trail) if trail is not None else Governance()
    gateway = Gateway.load(providers=[add], discover=False, env={}, governance=governance)
    ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
    gateway.tools_for(ctx)  # the gateway caches one Tools per context: build it before timing
    state = {"before": 0}

    def stored() -> int:
        return 0 if trail is None or backend is None else backend.count(trail.sink, ctx.run_id)

    def prepare(_number: int) -> None:
        ctx.trace._records.clear()  # benchmark only: keep the context's in-memory trace bounded
        state["before"] = stored()

    def check(number: int) -> None:
        records = ctx.trace.records()
        bad = [r for r in records if r.status != Status.SUCCESS.value]
        if len(records) != number or bad:
            raise SystemExit(f"{label}: {len(records)} records for {number} calls; not SUCCESS: {bad[:1]!r}")
        if trail is not None and stored() - state["before"] != EVENTS_PER_CALL * number:
            raise SystemExit(f"{label}: {stored() - state['before']} events stored for {number} calls")

    is_async = mode is AuditMode.ASYNC
    return Row(
        label,
        INVOKE_STMT,
        {"gateway": gateway, "ctx": ctx},
        unit="call",
        prepare=prepare,
        check=check,
        flush=trail.flush if trail is not None and is_async else None,
        min_number=ASYNC_MIN_OPS if is_async else 1,
        max_number=ASYNC_MAX_BATCHES // 2 if is_async else 10**9,  # two batches per call
    )


def bench_calls(
    table: Table, backends: list[Backend], null: Backend, *, repeat: int, min_time: float
) -> None:
    everything = [null, *backends]
    rows: dict[str, Row] = {"none": _gateway_row("no audit trail: Governance()", None, None)}
    for mode in (AuditMode.STRICT, AuditMode.ASYNC):
        for b in everything:
            if b.unavailable is None:
                rows[f"{mode.value} {b.key}"] = _gateway_row(f"{mode.value}: {b.name}", b, mode)
    for key, row in rows.items():  # sanity: one call each, result and stored events checked
        result = eval(INVOKE_STMT, row.ns)
        if result.status is not Status.SUCCESS or result.content != 3 or result.audit_failed:
            raise SystemExit(f"sanity check failed for {key}: {result!r}")
        if row.flush is not None:
            row.flush()
        row.ns["ctx"].trace._records.clear()  # benchmark only
    measured = dict(zip(rows, measure(list(rows.values()), repeat=repeat, min_time=min_time), strict=True))

    table.section(f"2. By name: {INVOKE_STMT}")
    table.note(
        "@tool MEMORY_ONLY add(a, b); Governance(audit=AuditTrail(sink, mode=..., fallback_path=None))"
    )
    table.note(
        f"one call writes {EVENTS_PER_CALL} events in two appends (3 before the call, 1 after); "
        "rate = calls/s"
    )
    table.row(measured["none"], key="N")
    table.note(f"{null.name}: its append only counts the events; the row is the trail's cost without storage")
    modes = (
        (AuditMode.STRICT, "MS", False, "STRICT: both appends inside the call"),
        (AuditMode.ASYNC, "MA", False, "ASYNC: the caller's time (builds the events, two enqueues per call)"),
        (AuditMode.ASYNC, "MD", True, "ASYNC: the same calls, until flush() returned (queue drained)"),
    )
    for mode, key, drained, title in modes:
        table.note(title)
        for b in everything:
            if drained:
                label = f"{mode.value}: {b.name}, until flush() returned"
            elif mode is AuditMode.ASYNC:
                label = f"{mode.value}: {b.name}, caller's time"
            else:
                label = f"{mode.value}: {b.name}"
            if b.unavailable is not None:
                table.unavailable(label, b.unavailable)
                continue
            m = measured[f"{mode.value} {b.key}"]
            if b is null:
                table.row(m, against="N", drained=drained, label=label)
            elif b.key == "M":
                table.row(m, key=key, against="MS" if drained else "N", drained=drained, label=label)
            else:
                table.row(m, against=key, drained=drained, label=label)
    table.note("MD is compared with MS: the memory sink's drained ASYNC cost against its STRICT cost")


# -- profile ---------------------------------------------------------------------------------------


def _recorder(into: list[str]) -> Callable[..., None]:
    """A ``before_cursor_execute`` listener keeping the first words of each statement."""

    def seen(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        into.append(" ".join(statement.split()[:3]))

    return seen


def profile_appends(backends: list[Backend], appends: int, limit: int = 15) -> str:
    """cProfile ``appends`` appends to a fresh sink of each backend, garbage collector off as when timed.

    Also reports wall and CPU time per append, and for the SQL sinks the statements one append runs.
    """
    out = io.StringIO()
    for b in backends:
        if b.unavailable is not None:
            continue
        sink = b.new("profile")
        sink.append(make_batch("bench-profile"))
        statements: list[str] = []
        engine = getattr(sink, "engine", None)
        if engine is not None:
            seen = _recorder(statements)
            event.listen(engine, "before_cursor_execute", seen)
            sink.append(make_batch("bench-profile"))
            event.remove(engine, "before_cursor_execute", seen)
        batches = [make_batch("bench-profile") for _ in range(appends)]
        gc.collect()
        gc.disable()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            for batch in batches[: appends // 2]:
                sink.append(batch)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            profiler = cProfile.Profile()
            profiler.enable()
            for batch in batches[appends // 2 :]:
                sink.append(batch)
            profiler.disable()
        finally:
            gc.enable()
        half = appends // 2
        out.write(
            f"\n{b.name}.append(batch of {EVENTS_PER_CALL}), {half} appends unprofiled: "
            f"{fmt_time(wall / half)} wall, {fmt_time(cpu / half)} CPU (this process) per append\n"
        )
        if statements:
            out.write(f"  statements per append ({len(statements)}): {'; '.join(statements)}\n")
        out.write(f"cProfile: {appends - half} more appends, by own time\n")
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(limit)
    return out.getvalue()


# -- main ----------------------------------------------------------------------------------------------


def server_facts(backends: list[Backend], postgres_url: str) -> str:
    pg = next(b for b in backends if b.key == "P")
    if pg.unavailable is not None:
        return f"PostgreSQL unavailable ({pg.unavailable})"
    engine = create_engine(make_url(postgres_url))
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SHOW server_version")).scalar_one()
            sync = conn.execute(text("SHOW synchronous_commit")).scalar_one()
            fsync = conn.execute(text("SHOW fsync")).scalar_one()
    finally:
        engine.dispose()
    return f"PostgreSQL {version} (synchronous_commit={sync}, fsync={fsync})"


@dataclass
class Workspace:
    tmp: Path
    stack: ExitStack
    footer: list[str]
    postgres: bool = False
    """True once the PostgreSQL schema exists: it is dropped at the end."""


@contextmanager
def workspace(postgres_url: str, schema: str) -> Iterator[Workspace]:
    """A temporary directory and an exit stack; at the end trails and sinks are closed, the schema dropped.

    A failed first use of PostgreSQL leaves no schema: it is created in the transaction that failed.
    """
    with tempfile.TemporaryDirectory(prefix="toolbox-bench-audit-") as tmp, ExitStack() as stack:
        ws = Workspace(Path(tmp), stack, [])
        try:
            yield ws
        finally:
            for close in reversed(trail_closers):
                close()
            stack.close()
            if ws.postgres:
                ws.footer.append(drop_schema(postgres_url, schema))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7, help="repeats, minimum kept (default 7)")
    parser.add_argument(
        "--min-time", type=float, default=0.2, help="seconds one repeat should last (default 0.2)"
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL, help="SQLAlchemy URL of PostgreSQL")
    parser.add_argument("--profile", action="store_true", help="then cProfile appends to each sink")
    parser.add_argument("--profile-appends", type=int, default=200, help="appends per profile (default 200)")
    args = parser.parse_args(argv)

    schema = f"toolbox_bench_{os.getpid()}"
    opts = {"repeat": args.repeat, "min_time": args.min_time}
    with workspace(args.postgres_url, schema) as ws:
        backends = make_backends(ws.tmp, args.postgres_url, schema, ws.stack)
        ws.postgres = next(b for b in backends if b.key == "P").unavailable is None
        payload = batch_lines()
        floors: dict[str, Callable[[], None]] = {
            "J": jsonl_floor(ws.tmp / "floor.jsonl", payload),
            "S": sqlite_floor(ws.tmp / "floor.db", payload, ws.stack),
        }
        if ws.postgres:
            floors["P"] = postgres_floor(args.postgres_url, schema, payload, ws.stack)
        facts = server_facts(backends, args.postgres_url)
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        table = Table()
        bench_appends(table, backends, floors, **opts)
        bench_calls(table, backends, NULL, **opts)
        elapsed = time.perf_counter() - started
        profile = profile_appends(backends, args.profile_appends) if args.profile else ""

    print(
        f"toolbox audit benchmark: Python {sys.version.split()[0]} on {sys.platform}, "
        f"pydantic {pydantic.VERSION}, SQLAlchemy {sqlalchemy.__version__}, SQLite {sqlite3.sqlite_version}"
    )
    print(f"{facts}; temporary files in {tempfile.gettempdir()}")
    print(
        f"per op = min over {args.repeat} interleaved repeats of (repeat time / N); "
        "ratio = per op / per op of baseline [key], same run"
    )
    print(
        "no targets: every ratio is informational, nothing is asserted. Load average before/after: "
        f"{load_before:.2f} / {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)"
    )
    print(
        "governed rows clear ctx.trace before every repeat (benchmark only); every repeat checks "
        f"that {EVENTS_PER_CALL} events per op were stored"
    )
    print()
    print(Table.header())
    print("\n".join(table.lines))
    print()
    print("; ".join([f"measured in {elapsed:.1f} s", *ws.footer]))
    if profile:
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
