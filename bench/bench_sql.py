"""A governed toolbox-sql query of one row, against the same query through SQLAlchemy with bound parameters.

Run from the repository root::

    .venv/bin/python bench/bench_sql.py                  # SQLite and PostgreSQL (about 40 s)
    .venv/bin/python bench/bench_sql.py --engines sqlite --repeat 15 --calls 500

A measurement script, not a test: it asserts nothing about time. The garbage
collector stays on (`retained.py`); every row makes ``--calls`` calls per
repeat, the rows of an engine take turns in each repeat (alternating order),
a row reports the median time per call, and a ratio is the median of the
per-repeat ratios to the baseline [S] of the same engine and run.

Rows, per engine (``SELECT id, customer, total FROM orders WHERE id = :id``,
one row of a 1,000-row table):

- [S] ``with engine.connect() as c: c.execute(text(SQL), {"id": 7}).fetchall()``:
  SQLAlchemy with a bound parameter, a pooled connection, a transaction per
  call (the baseline);
- typed: ``shop.query(SQL, {"id": 7}).purpose(...).execute()`` with an audit
  trail (STRICT) to memory: the statement's plan comes from the cache (parse
  and checks ran once), the row is read on the reader's read-only
  transaction, its result summarised in the audit trail;
- by name: ``gateway.invoke("sql.shop.query", {...})``, the same through the
  by-name door (schema validation, the whole chain);
- first sight: the typed row with a new statement text every call (a
  comment with a counter): parse and checks every time, what the cache saves.

Target: the typed governed query of one row within 1.3x of [S].

``--cpu`` times the calling thread's CPU (``time.thread_time``) instead of
wall-clock time: steadier on a loaded machine, and blind to waits (on
PostgreSQL the server's share and the round trip are not counted).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).parent))

from retained import Row, measure_retained

from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy, Tools
from toolbox.audit import AuditTrail, MemorySink
from toolbox_sql import plugin

SQL = "SELECT id, customer, total FROM orders WHERE id = :id"
POSTGRES_URL = os.environ.get(
    "TOOLBOX_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _policy(schema: str | None) -> ToolPolicy:
    database: dict[str, Any] = {
        "url_env": "BENCH_URL",
        "tables": {"orders": {"columns": ["id", "customer", "total"]}},
    }
    if schema:
        database["schema"] = schema
    return ToolPolicy(allow=["sql.shop"], governance={"tools": {"sql": {"databases": {"shop": database}}}})


def _sqlite(folder: Path) -> tuple[str, str | None, str]:
    path = folder / "bench.db"
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total NUMERIC)")
        setup.executemany(
            "INSERT INTO orders (customer, total) VALUES (?, ?)", [(f"c{i}", i) for i in range(1000)]
        )
    return f"sqlite:///{path}", None, SQL


def _postgres() -> tuple[str, str | None, str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    engine = create_engine(POSTGRES_URL)
    with engine.begin() as c:
        c.execute(text(f"CREATE SCHEMA {schema}"))
        c.execute(
            text(f"CREATE TABLE {schema}.orders (id INTEGER PRIMARY KEY, customer TEXT, total NUMERIC)")
        )
        c.execute(
            text(f"INSERT INTO {schema}.orders SELECT i, 'c' || i, i FROM generate_series(1, 1000) AS i")
        )
    engine.dispose()
    return POSTGRES_URL, schema, SQL.replace("FROM orders", f"FROM {schema}.orders")


def _drop(schema: str) -> None:
    engine = create_engine(POSTGRES_URL)
    with engine.begin() as c:
        c.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


def rows_for(url: str, schema: str | None, raw_sql: str) -> tuple[list[Row], list[Any]]:
    """The rows of one engine, and what to close afterwards."""
    baseline = create_engine(url)
    statement = text(raw_sql)
    context = ExecutionContext(tenant="acme", principal="bench")
    env = {"BENCH_URL": url}
    sink = MemorySink()
    governance = Governance(audit=AuditTrail(sink, fallback_path=None))
    tools = Tools.load(
        context, policy=_policy(schema), providers=[plugin], discover=False, env=env, governance=governance
    )
    gateway = Gateway.load(
        policy=_policy(schema),
        providers=[plugin],
        discover=False,
        env=env,
        governance=Governance(audit=AuditTrail(MemorySink(), fallback_path=None)),
    )
    shop = tools.get("sql.shop")
    counter = iter(range(10**9))
    arguments = {"sql": SQL, "params": {"id": 7}, "purpose": "Look up an order"}

    def raw() -> Any:
        with baseline.connect() as connection:
            return connection.execute(statement, {"id": 7}).fetchall()

    assert raw() == [(7, "c6", 6)] or len(raw()) == 1
    assert shop.query(SQL, {"id": 7}).purpose("Check").execute().row_count == 1
    namespace = {
        "raw": raw,
        "shop": shop,
        "gateway": gateway,
        "context": context,
        "arguments": arguments,
        "SQL": SQL,
        "counter": counter,
    }
    rows = [
        Row("[S] SQLAlchemy, bound parameter", "raw()", namespace),
        Row(
            "typed governed query",
            'shop.query(SQL, {"id": 7}).purpose("Look up an order").execute()',
            namespace,
        ),
        Row(
            "by-name governed query",
            'gateway.invoke("sql.shop.query", arguments, context=context)',
            namespace,
        ),
        Row(
            "typed, new text each call (no cache)",
            'shop.query(SQL + f" -- {next(counter)}", {"id": 7}).purpose("Look up an order").execute()',
            namespace,
        ),
    ]
    return rows, [tools, gateway, baseline]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--cpu", action="store_true", help="time the thread's CPU, not the wall clock")
    options = parser.parse_args()
    clock = "CPU time of the calling thread" if options.cpu else "wall clock"
    print(
        f"toolbox-sql: governed query of one row vs SQLAlchemy; median of {options.repeat} repeats; "
        f"{clock}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    timer = time.thread_time if options.cpu else time.perf_counter
    for engine in options.engines.split(","):
        folder = Path(tempfile.mkdtemp())
        url, schema, raw_sql = _sqlite(folder) if engine == "sqlite" else _postgres()
        try:
            rows, closing = rows_for(url, schema, raw_sql)
            sampled = measure_retained(rows, repeat=options.repeat, calls=options.calls, timer=timer)
            baseline = sampled[0]
            print(f"\n{engine}")
            print("| row | per call | ratio to [S] |\n|---|---|---|")
            for row in sampled:
                ratio = "" if row is baseline else f"{row.ratio_to(baseline):.2f}x"
                print(f"| {row.label} | {row.median * 1e6:.1f} us | {ratio} |")
            for item in closing:
                (getattr(item, "close", None) or item.dispose)()
        finally:
            if schema:
                _drop(schema)


if __name__ == "__main__":
    main()
