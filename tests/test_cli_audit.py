"""`toolbox audit show|tail|verify` over real JSONL and SQLite stores written by a governed gateway."""

import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditEvent, AuditTrail, EventType, JsonlSink, MemorySink
from toolbox.cli import _audit as cli_audit
from toolbox.cli import main
from toolbox.governance import Decision
from toolbox.testing import fake_provider

SECRET = "s3cr3t"
PURPOSE = "Find the customer's open orders"
SHOW_HEADERS = ["SEQ", "TIME", "TYPE", "NAME", "DECISION", "STATUS", "REASON", "INTENT", "PAYLOAD"]
TAIL_HEADERS = ["TIME", "TRACE", "SEQ", "TYPE", "NAME", "DECISION", "STATUS", "REASON", "TENANT", "PRINCIPAL"]


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def lookup(query: str, token: str) -> dict:
    """Look an order up."""
    return {"query": query}


def _no_fake_writes(tool_name, operation, context, arguments):
    return Decision.deny("writes are off") if operation == "write" else Decision.allow()


def write_events(sink):
    """Run realistic calls through an audited gateway; return the two contexts (traces)."""
    trail = AuditTrail(sink, fallback_path=None)
    gateway = Gateway.load(
        providers=[lookup, fake_provider("acme-fake")],
        discover=False,
        env={},
        governance=Governance(audit=trail, authorizers=[_no_fake_writes]),
    )
    alice = ExecutionContext(tenant="tenant-a", principal="alice")
    bob = ExecutionContext(tenant="tenant-b", principal="bob")
    results = [
        gateway.invoke("lookup", {"query": "orders", "token": SECRET, "purpose": PURPOSE}, context=alice),
        gateway.invoke("acme-fake.write", {"value": 1, "audit_as": "Store the note"}, context=alice),
        gateway.invoke("lookup.call", {"query": 3, "token": SECRET, "purpose": PURPOSE}, context=alice),
        gateway.invoke("acme-fake.read", {"value": 2, "purpose": "Read the note back"}, context=bob),
    ]
    assert [r.status for r in results] == [
        Status.SUCCESS,
        Status.DENIED,
        Status.INVALID_ARGUMENTS,
        Status.SUCCESS,
    ]
    trail.close()
    return alice.run_id, bob.run_id


# Trace A (alice): lookup SUCCESS (1-4), acme-fake.write DENIED (5-7), lookup.call INVALID (8-10).
# Trace B (bob): acme-fake.read SUCCESS (1-4).
A_EVENTS, B_EVENTS = 10, 4


class Store:
    def __init__(self, kind, path, trace_a, trace_b):
        self.kind, self.path, self.a, self.b = kind, path, trace_a, trace_b

    @property
    def args(self):
        return [f"--{self.kind}", str(self.path)]


@pytest.fixture
def jsonl_store(tmp_path):
    path = tmp_path / "audit.jsonl"
    return Store("jsonl", path, *write_events(JsonlSink(path)))


@pytest.fixture
def sqlite_store(tmp_path):
    from toolbox.audit import SqliteSink

    path = tmp_path / "audit.db"
    return Store("sqlite", path, *write_events(SqliteSink(path)))


@pytest.fixture(params=["jsonl", "sqlite"])
def store(request):
    return request.getfixturevalue(f"{request.param}_store")


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def table_rows(out, headers):
    """The rows of the table whose header line starts with ``headers[0]``, split on 2+ spaces."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == headers[:1])
    assert lines[start].split() == headers
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append([cell for cell in line.split("  ") if cell.strip() != ""])
    return [[cell.strip() for cell in row] for row in rows]


def read_lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def line_of(rows, trace_id, sequence):
    return next(r for r in rows if r["trace_id"] == trace_id and r["sequence"] == sequence)


# -- show -----------------------------------------------------------------------


def test_show_prints_the_trace_in_sequence_order(store, capsys):
    """show prints every event of the trace, in sequence order, aligned, with its chain state."""
    status, out, err = run(capsys, "audit", "show", store.a, *store.args)
    assert status == 0, err
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == f"Trace {store.a}: {A_EVENTS} events"
    rows = table_rows(out, SHOW_HEADERS)
    assert [r[0] for r in rows] == [str(n) for n in range(1, A_EVENTS + 1)]
    assert [r[2] for r in rows[:4]] == [
        "INTENT_DECLARED",
        "GOVERNANCE_DECISION",
        "INVOCATION_REQUEST",
        "INVOCATION_RESPONSE",
    ]
    assert rows[0][3] == "lookup"
    assert rows[1][4:7] == ["ALLOW", "-", "-"]
    assert rows[3][4:6] == ["-", "SUCCESS"]
    assert rows[0][7] == PURPOSE
    assert rows[0][8] == '{"query":"orders","token":"[REDACTED]"}'
    denied = rows[5]
    assert denied[2:7] == ["GOVERNANCE_DECISION", "acme-fake.write", "DENY", "DENIED", "AUTH_DENIED"]
    assert rows[6][2:7] == ["INVOCATION_RESPONSE", "acme-fake.write", "-", "DENIED", "AUTH_DENIED"]
    assert rows[9][2:7] == [
        "INVOCATION_RESPONSE",
        "lookup.call",
        "-",
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
    ]
    assert all(r[1].endswith("Z") and len(r[1]) == len("2024-05-01T10:00:00.123Z") for r in rows)
    assert lines[-1] == "Chain: intact"
    assert SECRET not in out


def test_show_columns_are_aligned(jsonl_store, capsys):
    """Every column of the show table starts at the same offset on every row."""
    _, out, _ = run(capsys, "audit", "show", jsonl_store.a, *jsonl_store.args)
    lines = out.splitlines()
    table = lines[2 : 2 + A_EVENTS + 1]
    for header in ("TYPE", "DECISION", "PAYLOAD"):
        offset = table[0].index(header)
        assert all(line[offset - 2 : offset] == "  " and line[offset] != " " for line in table)


def test_show_json_is_every_stored_field(store, capsys):
    """show --json prints the stored events (every field) in sequence order and the chain state."""
    status, out, _ = run(capsys, "audit", "show", store.a, *store.args, "--json")
    assert status == 0
    document = json.loads(out)
    assert document["trace_id"] == store.a
    assert document["chain_intact"] is True
    assert document["problems"] == []
    events = document["events"]
    assert [e["sequence"] for e in events] == list(range(1, A_EVENTS + 1))
    assert {e["tenant"] for e in events} == {"tenant-a"}
    first = events[0]
    assert first["type"] == "INTENT_DECLARED"
    assert first["intent_kind"] == "purpose"
    assert first["payload_summary"] == '{"query":"orders","token":"[REDACTED]"}'
    assert len(first["hash"]) == 64 and first["previous_hash"] == "0" * 64
    assert SECRET not in out

    status, global_out, _ = run(capsys, "--json", "audit", "show", store.a, *store.args)
    assert status == 0
    assert json.loads(global_out)["events"] == events


def test_show_truncates_intent_and_payload(tmp_path, capsys):
    """Long intents and payload summaries are cut with '...' so the table stays readable."""
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path)
    event = AuditEvent(
        EventType.INTENT_DECLARED,
        trace_id="trace-long",
        name="lookup",
        intent_text="x" * 500,
        payload_summary='{"query":"' + "y" * 500 + '"}',
    )
    sink.append([event])
    status, out, _ = run(capsys, "audit", "show", "trace-long", "--jsonl", path)
    assert status == 0
    row = table_rows(out, SHOW_HEADERS)[0]
    assert row[7] == "x" * 37 + "..."
    assert row[8] == '{"query":"' + "y" * 47 + "..."


def test_show_escapes_control_characters_and_reports_a_broken_chain(jsonl_store, capsys):
    """A tampered store cannot smuggle terminal escapes or lines into the output; the chain says so."""
    rows = read_lines(jsonl_store.path)
    line_of(rows, jsonl_store.a, 1)["name"] = "evil\x1b[2Jname\nFAKE LINE"
    write_lines(jsonl_store.path, rows)
    status, out, _ = run(capsys, "audit", "show", jsonl_store.a, *jsonl_store.args)
    assert status == 0
    assert "\x1b" not in out
    assert "evil\\x1b[2Jname\\x0aFAKE LINE" in out
    assert not any(line.startswith("FAKE LINE") for line in out.splitlines())
    assert "Chain: BROKEN (1 problem):" in out
    assert f"trace {jsonl_store.a} event #1 (" in out


def test_show_escapes_line_separators_and_bidi_controls(tmp_path, capsys):
    """U+2028 / U+2029 break lines and U+202E reverses text in a terminal: shown as escapes."""
    path = tmp_path / "audit.jsonl"
    JsonlSink(path).append(
        [
            AuditEvent(
                EventType.INTENT_DECLARED,
                trace_id="trace-bidi",
                name="pay\u202eyap",
                intent_text="Refund\u2028FAKE LINE\u2029\u2066x\u2069",
                principal="eve\u200f",
            )
        ]
    )
    status, out, _ = run(capsys, "audit", "show", "trace-bidi", "--jsonl", path)
    assert status == 0
    for raw in ("\u202e", "\u2028", "\u2029", "\u2066", "\u2069", "\u200f"):
        assert raw not in out
    assert "pay\\u202eyap" in out and "Refund\\u2028FAKE" in out
    assert not any(line.startswith("FAKE LINE") for line in out.splitlines())


def test_show_unknown_trace_exits_1(store, capsys):
    """A trace with no events exits 1 and says so."""
    status, out, err = run(capsys, "audit", "show", "no-such-trace", *store.args)
    assert status == 1
    assert out == ""
    assert err == "toolbox: no events for trace no-such-trace\n"

    status, out, _ = run(capsys, "audit", "show", "no-such-trace", *store.args, "--json")
    assert status == 1
    assert json.loads(out)["events"] == []


# -- tail -----------------------------------------------------------------------


def test_tail_shows_the_latest_events_across_traces(store, capsys):
    """tail -n N prints the newest N events of every tenant (auditor view), oldest first."""
    status, out, err = run(capsys, "audit", "tail", "-n", 6, *store.args)
    assert status == 0, err
    rows = table_rows(out, TAIL_HEADERS)
    assert [(r[1], r[2]) for r in rows] == [
        (store.a, "9"),
        (store.a, "10"),
        (store.b, "1"),
        (store.b, "2"),
        (store.b, "3"),
        (store.b, "4"),
    ]
    assert [r[8:] for r in rows] == [["tenant-a", "alice"]] * 2 + [["tenant-b", "bob"]] * 4
    assert rows[-1][3:7] == ["INVOCATION_RESPONSE", "acme-fake.read", "-", "SUCCESS"]


def test_tail_default_and_json(store, capsys):
    """Without -n, tail prints up to 20 events; --json prints the stored events."""
    status, out, _ = run(capsys, "audit", "tail", *store.args)
    assert status == 0
    assert len(table_rows(out, TAIL_HEADERS)) == A_EVENTS + B_EVENTS

    status, out, _ = run(capsys, "audit", "tail", "--lines", 2, *store.args, "--json")
    assert status == 0
    events = json.loads(out)["events"]
    assert [(e["trace_id"], e["sequence"]) for e in events] == [(store.b, 3), (store.b, 4)]


def test_tail_of_an_empty_store(tmp_path, capsys):
    """An empty store has no events to show."""
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    status, out, _ = run(capsys, "audit", "tail", "--jsonl", path)
    assert (status, out) == (0, "No events.\n")
    status, out, _ = run(capsys, "audit", "tail", "--jsonl", path, "--json")
    assert (status, json.loads(out)) == (0, {"events": []})


def _stamped(sink, times):
    for index, moment in enumerate(times):
        event = AuditEvent(EventType.SYSTEM_ERROR, trace_id=f"t{index}", name=f"e{index}")
        event.timestamp = moment.timestamp()
        sink.append([event])


@pytest.mark.parametrize("page", [100_000, 3], ids=["one-window", "narrowed"])
def test_latest_finds_the_newest_events_whatever_their_age(monkeypatch, page):
    """The window search returns the newest events even when the store is much older or larger."""
    monkeypatch.setattr(cli_audit, "_READ_PAGE", page)
    now = datetime.now(timezone.utc)
    times = [now - timedelta(days=400), now - timedelta(days=3), now - timedelta(hours=5)]
    times += [now - timedelta(seconds=s) for s in (50, 40, 30, 20, 10)]
    times.append(now + timedelta(minutes=5))  # a writer with a clock ahead of ours
    sink = MemorySink()
    _stamped(sink, times)
    assert [r.name for r in cli_audit._latest(sink, 2)] == ["e7", "e8"]
    assert [r.name for r in cli_audit._latest(sink, 1)] == ["e8"]
    assert [r.name for r in cli_audit._latest(sink, 9)] == [f"e{i}" for i in range(9)]
    assert len(cli_audit._latest(sink, 50)) == 9
    assert cli_audit._latest(MemorySink(), 5) == []

    old = MemorySink()
    _stamped(old, [now - timedelta(days=900 + d) for d in (3, 2, 1)])
    assert [r.name for r in cli_audit._latest(old, 2)] == ["e1", "e2"]


# -- verify ---------------------------------------------------------------------


def test_verify_intact_store(store, capsys):
    """verify over every trace: OK with the counts; exit 0."""
    status, out, err = run(capsys, "audit", "verify", *store.args)
    assert status == 0, err
    assert out == f"OK: {A_EVENTS + B_EVENTS} events in 2 traces, chain intact\n"
    assert err == ""

    status, out, _ = run(capsys, "audit", "verify", store.b, *store.args)
    assert (status, out) == (0, f"OK: {B_EVENTS} events in 1 trace, chain intact\n")

    status, out, _ = run(capsys, "audit", "verify", *store.args, "--json")
    assert status == 0
    assert json.loads(out) == {
        "ok": True,
        "trace_id": None,
        "events": A_EVENTS + B_EVENTS,
        "traces": 2,
        "problems": [],
    }


def test_store_options_before_the_action(jsonl_store, capsys):
    """`toolbox audit --jsonl F verify` is the same as `toolbox audit verify --jsonl F`."""
    status, out, _ = run(capsys, "audit", *jsonl_store.args, "verify")
    assert (status, out) == (0, f"OK: {A_EVENTS + B_EVENTS} events in 2 traces, chain intact\n")


def assert_broken(capsys, store, expected, *, trace=None):
    """verify exits 1, printing each expected (sequence, event id, words) problem line."""
    argv = ["audit", "verify", *([trace] if trace else []), *store.args]
    status, out, err = run(capsys, *argv)
    assert status == 1, out
    lines = out.splitlines()
    for sequence, event_id, words in expected:
        prefix = f"trace {store.a} event #{sequence} ({event_id}): "
        assert any(line.startswith(prefix) and words in line for line in lines), (prefix, words, out)
    assert lines[-1].startswith("FAILED: ")
    assert "in 1 of " in lines[-1]
    assert err.startswith("toolbox: audit chain broken: ")
    assert store.b not in out  # the untouched trace has no problem

    status, out, _ = run(capsys, *argv, "--json")
    document = json.loads(out)
    assert status == 1
    assert document["ok"] is False
    assert {(p["trace_id"], p["sequence"], p["event_id"]) for p in document["problems"]} >= {
        (store.a, sequence, event_id) for sequence, event_id, _ in expected
    }
    status, out, _ = run(capsys, "audit", "verify", store.b, *store.args)
    assert status == 0, out


def test_verify_names_an_edited_jsonl_line(jsonl_store, capsys):
    """Editing a stored intent_text breaks that event's hash: 'edited', naming the event."""
    rows = read_lines(jsonl_store.path)
    edited = line_of(rows, jsonl_store.a, 5)
    edited["intent_text"] = "Nothing to see here"
    write_lines(jsonl_store.path, rows)
    assert_broken(capsys, jsonl_store, [(5, edited["event_id"], "content does not match its hash (edited)")])
    assert_broken(
        capsys,
        jsonl_store,
        [(5, edited["event_id"], "(edited)")],
        trace=jsonl_store.a,
    )


def test_verify_names_a_removed_jsonl_line(jsonl_store, capsys):
    """Removing a line leaves a gap: the next event says what is missing."""
    rows = read_lines(jsonl_store.path)
    removed = line_of(rows, jsonl_store.a, 6)
    after = line_of(rows, jsonl_store.a, 7)
    write_lines(jsonl_store.path, [r for r in rows if r is not removed])
    assert_broken(
        capsys,
        jsonl_store,
        [
            (7, after["event_id"], "sequence 6 is missing (removed or reordered)"),
            (7, after["event_id"], "does not follow the previous event"),
        ],
    )


def test_verify_names_reordered_jsonl_lines(jsonl_store, capsys):
    """Swapping two events' sequence numbers is reported on both events."""
    rows = read_lines(jsonl_store.path)
    second, third = line_of(rows, jsonl_store.a, 2), line_of(rows, jsonl_store.a, 3)
    second["sequence"], third["sequence"] = 3, 2
    write_lines(jsonl_store.path, rows)
    assert_broken(
        capsys,
        jsonl_store,
        [
            (2, third["event_id"], "does not follow the previous event (removed or reordered)"),
            (3, second["event_id"], "does not follow the previous event (removed or reordered)"),
        ],
    )


def _sqlite(store):
    return sqlite3.connect(store.path)


def _event_id(conn, trace_id, sequence):
    row = conn.execute(
        "SELECT event_id FROM audit_event_log WHERE trace_id = ? AND sequence = ?", (trace_id, sequence)
    ).fetchone()
    return row[0]


def _tamper(conn, statement, parameters):
    """``statement`` on the events wherever they are: moved (audit_events) or not yet (audit_pending)."""
    for table in ("audit_events", "audit_pending"):
        conn.execute(statement.replace("audit_events", table), parameters)


def test_verify_names_an_edited_sqlite_row(sqlite_store, capsys):
    """An UPDATE behind the sink's back is found."""
    with _sqlite(sqlite_store) as conn:
        event_id = _event_id(conn, sqlite_store.a, 4)
        _tamper(conn, "UPDATE audit_events SET status = 'DENIED' WHERE event_id = ?", (event_id,))
    assert_broken(capsys, sqlite_store, [(4, event_id, "content does not match its hash (edited)")])


def test_verify_names_a_removed_sqlite_row(sqlite_store, capsys):
    """A DELETE leaves a gap the next event reports."""
    with _sqlite(sqlite_store) as conn:
        after = _event_id(conn, sqlite_store.a, 3)
        _tamper(conn, "DELETE FROM audit_events WHERE trace_id = ? AND sequence = 2", (sqlite_store.a,))
    assert_broken(capsys, sqlite_store, [(3, after, "sequence 2 is missing (removed or reordered)")])


def test_verify_names_reordered_sqlite_rows(sqlite_store, capsys):
    """Swapping two rows' sequences (through a free number: (trace, sequence) is unique) is found."""
    with _sqlite(sqlite_store) as conn:
        eight, nine, ten = (_event_id(conn, sqlite_store.a, n) for n in (8, 9, 10))
        _tamper(conn, "UPDATE audit_events SET sequence = -1 WHERE event_id = ?", (eight,))
        _tamper(conn, "UPDATE audit_events SET sequence = 8 WHERE event_id = ?", (nine,))
        _tamper(conn, "UPDATE audit_events SET sequence = 9 WHERE event_id = ?", (eight,))
    assert_broken(
        capsys,
        sqlite_store,
        [(8, nine, "reordered"), (9, eight, "reordered"), (10, ten, "does not follow")],
    )


def test_verify_unknown_trace_exits_1(store, capsys):
    """A trace with no events cannot be verified: exit 1."""
    status, out, err = run(capsys, "audit", "verify", "no-such-trace", *store.args)
    assert (status, out) == (1, "")
    assert err == "toolbox: no events for trace no-such-trace\n"


def test_verify_an_empty_store(tmp_path, capsys):
    """An empty store verifies (nothing to break)."""
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    status, out, _ = run(capsys, "audit", "verify", "--jsonl", path)
    assert (status, out) == (0, "OK: 0 events in 0 traces, chain intact\n")


# -- --policy -------------------------------------------------------------------


def _policy(tmp_path, audit):
    path = tmp_path / "policy.toml"
    path.write_text(f"version = 1\n{audit}", encoding="utf-8")
    return path


def test_policy_reads_the_first_sink(jsonl_store, tmp_path, capsys):
    """--policy reads the first [[audit.sinks]] of the file's [audit] table."""
    policy = _policy(
        tmp_path,
        f'[audit]\n[[audit.sinks]]\ntype = "jsonl"\npath = "{jsonl_store.path.as_posix()}"\n'
        '[[audit.sinks]]\ntype = "memory"\n',
    )
    status, out, err = run(capsys, "audit", "verify", "--policy", policy)
    assert status == 0, err
    assert out == f"OK: {A_EVENTS + B_EVENTS} events in 2 traces, chain intact\n"


def test_policy_sqlite_sink(sqlite_store, tmp_path, capsys):
    """A SQLite sink of the policy file is read the same way."""
    policy = _policy(
        tmp_path, f'[audit]\n[[audit.sinks]]\ntype = "sqlite"\npath = "{sqlite_store.path.as_posix()}"\n'
    )
    status, out, _ = run(capsys, "audit", "show", sqlite_store.b, "--policy", policy, "--json")
    assert status == 0
    assert len(json.loads(out)["events"]) == B_EVENTS


# -- errors ---------------------------------------------------------------------


def assert_error(capsys, argv, *expected):
    status, out, err = run(capsys, *argv)
    assert status == 2, (out, err)
    assert out == ""
    assert err.startswith("toolbox: error: "), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for text in expected:
        assert text in err, (text, err)
    return err


def test_a_store_is_required(capsys):
    """No store at all is an error naming the options."""
    assert_error(
        capsys, ["audit", "verify"], "--sqlite PATH", "--jsonl PATH", "--postgres-url-env", "--policy"
    )


def test_only_one_store(jsonl_store, tmp_path, capsys):
    """Two stores are an error naming both options, before or after the action."""
    assert_error(
        capsys, ["audit", "verify", *jsonl_store.args, "--sqlite", tmp_path / "x.db"], "--sqlite and --jsonl"
    )
    assert_error(
        capsys,
        ["audit", "--sqlite", tmp_path / "x.db", "verify", *jsonl_store.args],
        "--sqlite and --jsonl",
    )


def test_missing_files_are_errors_and_nothing_is_created(tmp_path, capsys):
    """A missing JSONL file or SQLite database is reported; the command never creates a store."""
    missing_db = tmp_path / "missing.db"
    assert_error(capsys, ["audit", "tail", "--sqlite", missing_db], "does not exist", "missing.db")
    assert not missing_db.exists()
    missing_file = tmp_path / "missing.jsonl"
    assert_error(capsys, ["audit", "tail", "--jsonl", missing_file], "does not exist")
    assert not missing_file.exists()


def test_sqlite_file_that_is_not_an_audit_database(tmp_path, capsys):
    """A database without the audit schema, or a file that is no database, is refused untouched."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    assert_error(capsys, ["audit", "verify", "--sqlite", other], "not a toolbox audit database")
    with sqlite3.connect(other) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"notes"}

    text = tmp_path / "text.db"
    text.write_text("this is not a database\n" * 100, encoding="utf-8")
    assert_error(capsys, ["audit", "verify", "--sqlite", text], "cannot read audit database")


def test_malformed_jsonl_is_an_error(tmp_path, capsys):
    """A JSONL file that is not audit events is an error, not a traceback."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"not": "an event"}\n', encoding="utf-8")
    assert_error(capsys, ["audit", "verify", "--jsonl", path], "cannot read audit file")


def test_postgres_url_is_never_taken_from_the_command_line(capsys):
    """--postgres-url-env wants a variable name; a URL is refused without being echoed."""
    url = "postgresql://auditor:hunter2@db.example.com/audit"
    err = assert_error(
        capsys, ["audit", "verify", "--postgres-url-env", url], "NAME of an environment variable"
    )
    assert "hunter2" not in err
    assert "db.example.com" not in err


def test_postgres_url_env_unset(capsys, monkeypatch):
    """An unset variable is named."""
    monkeypatch.delenv("TOOLBOX_TEST_AUDIT_URL", raising=False)
    assert_error(
        capsys,
        ["audit", "verify", "--postgres-url-env", "TOOLBOX_TEST_AUDIT_URL"],
        "environment variable TOOLBOX_TEST_AUDIT_URL is not set",
    )


def test_postgres_connection_failure_hides_the_password(capsys, monkeypatch):
    """An unreachable database is one error line without the password or the URL."""
    url = "postgresql://auditor:hunter2@127.0.0.1:1/audit"
    monkeypatch.setenv("TOOLBOX_TEST_AUDIT_URL", url)
    for variable in ("TOOLBOX_TEST_AUDIT_URL",):
        err = assert_error(capsys, ["audit", "tail", "--postgres-url-env", variable])
        assert "hunter2" not in err
        assert url not in err
    monkeypatch.setenv("TOOLBOX_TEST_AUDIT_URL", "postgresql://auditor:hunter2@[not a host")
    err = assert_error(capsys, ["audit", "tail", "--postgres-url-env", "TOOLBOX_TEST_AUDIT_URL"])
    assert "hunter2" not in err


def test_schema_needs_postgres(jsonl_store, capsys):
    """--schema with another store is an error."""
    assert_error(capsys, ["audit", "verify", *jsonl_store.args, "--schema", "audit"], "--schema")


@pytest.mark.parametrize(
    ("audit", "expected"),
    [
        ("", "no [audit] table"),
        ('[audit]\n[[audit.sinks]]\ntype = "memory"\n', "memory sink"),
        ('[audit]\n[[audit.sinks]]\ntype = "carrier-pigeon"\n', "type must be one of"),
        ('[audit]\n[[audit.sinks]]\ntype = "postgres"\nurl_env = "postgresql://u:hunter2@h/d"\n', "NAME"),
    ],
    ids=["no-audit", "memory", "bad-type", "url-instead-of-variable"],
)
def test_policy_errors(tmp_path, capsys, audit, expected):
    """A policy file without a readable first sink is an error naming the problem."""
    err = assert_error(capsys, ["audit", "verify", "--policy", _policy(tmp_path, audit)], expected)
    assert "hunter2" not in err


def test_missing_policy_file(tmp_path, capsys):
    """A missing policy file is the usual error."""
    assert_error(capsys, ["audit", "verify", "--policy", tmp_path / "nope.toml"], "does not exist")


@pytest.mark.parametrize(
    "argv",
    [
        ["audit"],
        ["audit", "frobnicate"],
        ["audit", "show"],
        ["audit", "tail", "-n", "0"],
        ["audit", "tail", "-n", "many"],
        ["audit", "verify", "a", "b"],
    ],
    ids=["no-action", "unknown-action", "show-without-trace", "tail-zero", "tail-word", "two-traces"],
)
def test_usage_errors_exit_2(capsys, argv):
    """Usage errors exit 2 with a toolbox: error: line (after the usage line)."""
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert "toolbox: error: " in err
    assert "Traceback" not in err


def test_help_says_the_cli_reads_as_an_auditor(capsys):
    """The help text says every tenant's events are read."""
    status, out, _ = run(capsys, "audit", "--help")
    assert status == 0
    assert "auditor" in out
    assert "no tenant scoping" in out
    status, out, _ = run(capsys, "audit", "verify", "--help")
    assert status == 0
    assert "--postgres-url-env VAR" in out
    assert "never accepted on the command line" in " ".join(out.split())


def test_console_script_verifies(jsonl_store):
    """The installed `toolbox` script runs the audit commands."""
    script = shutil.which("toolbox", path=str(Path(sys.executable).parent))
    assert script, "console script missing: run `.venv/bin/pip install -e .`"
    result = subprocess.run(
        [script, "audit", "verify", *jsonl_store.args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"OK: {A_EVENTS + B_EVENTS} events in 2 traces, chain intact\n"


def test_a_url_after_a_wrong_option_is_echoed_without_its_password(capsys):
    """argparse echoes unrecognized arguments: a URL's password is masked there too."""
    status, _, err = run(capsys, "audit", "verify", "trace", "--url", "postgresql://auditor:hunter2@db/audit")
    assert status == 2
    assert "hunter2" not in err
    assert "postgresql://auditor:***@db/audit" in err
