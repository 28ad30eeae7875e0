"""The ``sql`` style of the conformance matrix: the logical operations as toolbox-sql statements.

Four databases of the policy file's ``[tools.sql]``, all on one SQLite file in
the world's directory, give the tools the matrix needs, each a real
``sql.NAME`` reader or ``sql_write.NAME`` writer as the provider registers it:

- ``read(item, api_key)``: ``sql.conf.query`` of a ``SELECT`` whose parameters are
  the item and the key (a parameter named like a secret: bound, masked);
- ``ping(item)``: ``sql.confping.query``, another reader (its own rate limit);
- ``pay(to, cents)``: ``sql_write.conf.execute`` of an ``INSERT``, approved per
  statement (the writer's default); an approver is shown the statement as checked
  and its parameters;
- ``vault(item)``: ``sql.confvault.query``, a reader the policy does not allow;
- ``guarded(item)``: ``sql_write.confguard.execute``, a writer whose
  acknowledgement nobody gave (readers need none).

The authorizer and the guardrail find the item in the parameters
(``params.item`` of the arguments toolbox-sql hands governance). What ran is what
reached the database: the provider's statement runners, counted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import toolbox_sql._tool
from conformance.styles import LOGICAL, Spy, Style, _toml, counted_runs
from toolbox import ToolPolicy
from toolbox_sql import plugin

URL_ENV = "CONFORMANCE_SQL_URL"
READ = "SELECT name FROM items WHERE name = :item AND length(:api_key) >= 0"
PING = "SELECT name FROM items WHERE name = :item"
PAY = "INSERT INTO payments (recipient, cents) VALUES (:to, :cents)"
#: What an approver of ``PAY`` reads: the kind and table, then the statement as checked.
PAY_REVIEWED = "-- INSERT payments\nINSERT INTO payments (\n  recipient,\n  cents\n)\nVALUES\n  (:to, :cents)"
#: (database, kind of runner) -> the logical operation it serves.
_LOGICAL = {
    ("conf", "query"): "read",
    ("confping", "query"): "ping",
    ("confvault", "query"): "vault",
    ("conf", "write"): "pay",
    ("confguard", "write"): "guarded",
}

_ITEMS = {"columns": ["name"]}
_PAYMENTS = {"columns": ["recipient", "cents"], "write": ["insert"]}


def _policy(directory: Path) -> ToolPolicy:
    databases: dict[str, dict[str, Any]] = {
        "conf": {"tables": {"items": _ITEMS, "payments": _PAYMENTS}, "writes": {}},
        "confping": {"tables": {"items": _ITEMS}},
        "confvault": {"tables": {"items": _ITEMS}},
        "confguard": {"tables": {"items": _ITEMS, "payments": _PAYMENTS}, "writes": {}},
    }
    allowed = ["sql.conf", "sql_write.conf", "sql.confping", "sql_write.confguard"]
    lines = ["version = 1", "[allow]", f"tools = {_toml(allowed)}"]
    for name, database in databases.items():
        lines += [f"[tools.sql.databases.{name}]", f"url_env = {_toml(URL_ENV)}"]
        if "writes" in database:
            lines.append("writes = {}")
        for table, spec in database["tables"].items():
            lines.append(f"[tools.sql.databases.{name}.tables.{table}]")
            lines += [f"{key} = {_toml(value)}" for key, value in spec.items()]
    path = directory / "sql-policy.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ToolPolicy.from_file(path)


def _database(directory: Path) -> Path:
    path = directory / "conformance.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE items (name TEXT);"
            "INSERT INTO items (name) VALUES ('x'), ('fine');"
            "CREATE TABLE payments (recipient TEXT, cents INTEGER);"
        )
    connection.close()
    return path


#: The provider's statement runners: what ran is what reached the database.
_SPIES = (
    Spy(toolbox_sql._tool, "run_query", "sql", lambda database, *_: _LOGICAL[(database.name, "query")]),
    Spy(toolbox_sql._tool, "run_write", "sql", lambda database, *_: _LOGICAL[(database.name, "write")]),
)


def _wire(logical: str, given: Mapping[str, Any]) -> dict[str, Any]:
    if logical == "read":
        return {"sql": READ, "params": {"item": given.get("item"), "api_key": given.get("api_key", "")}}
    if logical == "pay":
        return {"sql": PAY, "params": dict(given)}
    if logical == "guarded":
        return {"sql": PAY, "params": {"to": given.get("item"), "cents": 0}}
    return {"sql": PING, "params": {"item": given.get("item")}}


def sql_style(directory: Path) -> Style:
    database = _database(directory)
    names = {
        "read": ("sql.conf", "query", "sql.conf.query"),
        "ping": ("sql.confping", "query", "sql.confping.query"),
        "pay": ("sql_write.conf", "execute", "sql_write.conf.execute"),
        "vault": ("sql.confvault", "query", "sql.confvault.query"),
        "guarded": ("sql_write.confguard", "execute", "sql_write.confguard.execute"),
    }
    assert set(names) == set(LOGICAL)
    stops = [spy.open() for spy in _SPIES]

    def close() -> None:
        for stop in stops:
            stop()

    return Style(
        name="sql",
        providers=[plugin],
        policy=_policy(directory),
        names=names,
        typed=lambda instance, op, arguments: getattr(instance, op)(**arguments),
        runs=counted_runs("sql"),
        close=close,
        reads=frozenset({"read", "ping", "vault"}),
        env={URL_ENV: f"sqlite:///{database}", "TOOLBOX_SQL_CONF_WRITE_ACK": "allow-sql-writes"},
        wire=_wire,
        item=lambda seen: seen.get("params.item"),
        shown=lambda _op, given: {"sql": PAY_REVIEWED, "params": dict(given)},
    )
