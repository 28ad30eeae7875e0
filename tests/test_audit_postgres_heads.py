"""PostgresSink guesses its traces' heads and lets the server check the guesses.

A group goes in one statement, chained after the heads the sink committed
last (or none: a new trace). The statement moves each head only from exactly
its guess, creates one only where none exists, and stores the events only if
every head did; a wrong guess stores nothing and the sink locks the heads and
writes again. These tests make the guess wrong in every way a fleet or a hand
edit can, and check that no event is lost, doubled or chained after a stale head.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError

from audit_sql_support import POSTGRES_URL, Store, assert_intact, event, make_store
from toolbox.audit import AuditQuery, AuditSinkError, PostgresSink, verify_chain, verify_heads


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    yield from make_store("postgres", tmp_path)


@pytest.fixture
def relocks(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The trace ids of every group that took the two-trip path (the head locked and read)."""
    seen: list[list[str]] = []
    original = PostgresSink._write_pipelined

    def spy(self: PostgresSink, plain: Any, conn: Any, driver: Any, trace_ids: list[str], rows: Any) -> None:
        seen.append(list(trace_ids))
        original(self, plain, conn, driver, trace_ids, rows)

    monkeypatch.setattr(PostgresSink, "_write_pipelined", spy)
    return seen


def postgres_sink(store: Store) -> PostgresSink:
    sink = store.sink()
    assert isinstance(sink, PostgresSink)
    return sink


def test_a_lone_writer_never_locks_a_head(store: Store, relocks: list[list[str]]) -> None:
    """A new trace and every later group of it: one statement each, no two-trip write."""
    sink = postgres_sink(store)
    for _ in range(5):
        sink.append([event("alone"), event("alone"), event("alone")])
        sink.append([event("alone")])
    assert relocks == []
    assert_intact(sink, "alone", 20)


def test_two_sinks_alternating_on_one_trace_stay_gap_free(store: Store, relocks: list[list[str]]) -> None:
    first, second = postgres_sink(store), postgres_sink(store)
    writers = [first if index % 3 else second for index in range(20)]
    for writer in writers:
        writer.append([event("shared"), event("shared")])
    switches = sum(1 for before, after in itertools.pairwise(writers) if before is not after)
    assert relocks == [["shared"]] * switches  # each change of writer: one wrong guess, one relock
    assert_intact(first, "shared", 40)


def test_a_trace_another_sink_created_is_not_taken_for_a_new_one(
    store: Store, relocks: list[list[str]]
) -> None:
    store.sink().append([event("t"), event("t")])
    late = postgres_sink(store)
    late.append([event("t")])
    assert relocks == [["t"]]
    assert_intact(late, "t", 3)


def test_a_group_of_known_or_of_new_traces_goes_in_one_statement(
    store: Store, relocks: list[list[str]]
) -> None:
    sink = postgres_sink(store)
    sink.append([event("a"), event("b"), event("a")])  # all new
    sink.append([event("b"), event("a")])  # all known
    assert relocks == []
    sink.append([event("a"), event("new")])  # both at once: locked (no deadlock with a creator)
    assert relocks == [["a", "new"]]
    sink.append([event("a"), event("new")])
    assert relocks == [["a", "new"]]
    assert_intact(sink, "a", 5)
    assert_intact(sink, "b", 2)
    assert_intact(sink, "new", 2)


def test_one_stale_guess_refuses_the_whole_group(store: Store, relocks: list[list[str]]) -> None:
    """Two traces, one moved by another sink: nothing of the group is stored until both are locked."""
    first, second = postgres_sink(store), postgres_sink(store)
    first.append([event("t"), event("u")])
    second.append([event("u")])  # second took u for a new trace: refused, relocked
    first.append([event("t"), event("u"), event("t")])
    assert relocks == [["u"], ["t", "u"]]
    assert_intact(first, "t", 3)
    assert_intact(first, "u", 3)


def test_sinks_racing_on_the_same_traces_in_groups_lose_and_double_nothing(store: Store) -> None:
    """Groups of two shared traces from two sinks: guesses go stale and heads are locked by both
    paths at once; a refused guess (stale, or a lock order clash) is written again."""
    sinks = [postgres_sink(store), postgres_sink(store)]
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def work(index: int) -> None:
        start.wait(30)
        try:
            for round_ in range(20):
                pair = ["x", "y"] if (index + round_) % 2 else ["y", "x"]
                sinks[index % 2].append([event(pair[0]), event(pair[1])])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert_intact(sinks[0], "x", 120)
    assert_intact(sinks[0], "y", 120)


def test_a_guess_the_server_aborts_as_a_deadlock_is_written_again(
    store: Store, relocks: list[list[str]]
) -> None:
    """40P01 (another writer creating a head this one waits for): nothing stored, the heads locked."""
    sink = postgres_sink(store)
    sink.append([event("t")])
    deadlock = f'"{store.schema}".toolbox_test_deadlock'
    store.execute(
        f"CREATE FUNCTION {deadlock}() RETURNS integer LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END $$"
    )
    statements = sink._sql
    assert statements is not None
    statements.insert_guessed = (
        f"SELECT {deadlock}() WHERE %s::text IS NOT NULL AND %s::text IS NOT NULL "
        "AND %s::integer IS NOT NULL AND %s::text IS NOT NULL"
    )
    sink.append([event("t"), event("t")])
    assert relocks == [["t"]]
    assert_intact(sink, "t", 3)


def test_a_head_moved_by_hand_is_locked_and_read_again(store: Store) -> None:
    sink = postgres_sink(store)
    sink.append([event("t")])
    store.execute("UPDATE audit_trace_heads SET last_sequence = 41, last_hash = :h", h="e" * 64)
    sink.append([event("t")])
    last = sink.read_trace("t")[-1]
    assert (last.sequence, last.previous_hash) == (42, "e" * 64)


def test_a_refused_guess_stores_nothing_and_keeps_every_field(store: Store) -> None:
    """The retry stores the events as given: rule ids as a list, once, after the real head."""
    first, second = postgres_sink(store), postgres_sink(store)
    first.append([event("t")])
    second.append([event("t")])  # first's guess is now stale
    first.append([event("t", rule_ids=["r-1", 'quote"d']), event("t", rule_ids=[])])
    records = first.read_trace("t")
    assert [r.sequence for r in records] == [1, 2, 3, 4]
    assert [r.rule_ids for r in records[2:]] == [["r-1", 'quote"d'], []]
    assert store.execute("SELECT count(*) FROM audit_events")[0][0] == 4
    assert_intact(first, "t", 4)


def test_a_removed_head_refuses_the_write_and_stores_nothing(store: Store) -> None:
    """Neither the guess (no head to move) nor the relock (sequence 1 exists) may fork the chain."""
    sink = postgres_sink(store)
    sink.append([event("t"), event("t")])
    store.execute("DELETE FROM audit_trace_heads WHERE trace_id = 't'")
    with pytest.raises(AuditSinkError):
        sink.append([event("t")])
    records = sink.read_trace("t")
    assert [r.sequence for r in records] == [1, 2]
    assert sink.trace_heads("t") == {}
    problems = verify_heads(records, sink.trace_heads())
    assert len(problems) == 1 and "no head" in problems[0].problem


def test_a_value_the_server_refuses_fails_only_its_group(store: Store) -> None:
    """Not a wrong guess (a data error): raised, nothing stored, the next write goes on."""
    sink = postgres_sink(store)
    sink.append([event("t")])
    bad = event("t")
    bad.event_id = "x" * 65  # longer than the column allows
    with pytest.raises(AuditSinkError) as raised:
        sink.append([bad, event("t")])
    assert "x" * 65 not in str(raised.value)
    sink.append([event("t")])
    assert_intact(sink, "t", 2)


def test_racing_writers_of_one_trace_in_two_sinks_lose_and_double_nothing(store: Store) -> None:
    """8 threads, two sinks, one trace: guesses go stale while the server checks them."""
    sinks = [postgres_sink(store), postgres_sink(store)]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(index: int) -> None:
        start.wait(30)
        try:
            for _ in range(25):
                sinks[index % 2].append([event("race"), event(f"own-{index}")])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert_intact(sinks[0], "race", 200)
    every = sinks[1].query(AuditQuery(limit=10**6))
    assert len(every) == 400
    assert verify_chain(every) == [] and verify_heads(every, sinks[1].trace_heads()) == []


def test_the_documented_writer_grants_suffice_and_deny_deletes(store: Store) -> None:
    """docs/deployment.md's role: every write path works, and the role cannot remove an event."""
    store.sink().schema_version()  # the owner creates the tables
    role = f"toolbox_writer_{uuid.uuid4().hex[:12]}"
    schema = store.schema
    assert schema is not None
    store.execute(
        f'CREATE ROLE "{role}" LOGIN',
        f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"',
        f'GRANT SELECT, INSERT ON "{schema}".audit_events TO "{role}"',
        f'GRANT SELECT, INSERT, UPDATE ON "{schema}".audit_trace_heads TO "{role}"',
        f'GRANT SELECT ON "{schema}".audit_schema_version TO "{role}"',
    )
    try:
        url = make_url(POSTGRES_URL).set(username=role, password=None)
        writer = PostgresSink(url, schema=schema)
        other = PostgresSink(url, schema=schema)
        try:
            writer.append([event("t"), event("t")])  # a new trace: guessed, one statement
            writer.append([event("t")])  # its own head: guessed
            other.append([event("t")])  # a wrong guess: locked and written again
            writer.append([event("t"), event("u")])  # two traces: the locking path
            writer.append([event("t") for _ in range(70)])  # COPY
            assert_intact(writer, "t", 75)
        finally:
            writer.close()
            other.close()
        denied = create_engine(url, connect_args={"options": f"-c search_path={schema}"})
        try:
            with pytest.raises(ProgrammingError, match="permission denied"), denied.begin() as conn:
                conn.execute(text("DELETE FROM audit_events"))
        finally:
            denied.dispose()
    finally:
        store.execute(f'DROP OWNED BY "{role}"', f'DROP ROLE "{role}"')


HOSTILE_TRACES = [
    "t'; DROP TABLE audit_trace_heads; --",
    'quote"d\\slash',
    "ünïcödé-\u2028-\U0001f600",
    "{a,b}",
    "null",
    "",
    "x" * 5000,
]


def test_hostile_trace_ids_are_bound_values_on_every_path(store: Store, relocks: list[list[str]]) -> None:
    """New, known, mixed and stale guesses for trace ids an attacker picks: stored as given, nothing run."""
    first, second = postgres_sink(store), postgres_sink(store)
    for trace_id in HOSTILE_TRACES:
        first.append([event(trace_id)])  # new
        first.append([event(trace_id), event(trace_id)])  # known
        second.append([event(trace_id)])  # second's guess "new" is refused, then locked
        first.append([event(trace_id), event("plain")])  # mixed, then stale
    first.append([event(trace_id) for trace_id in HOSTILE_TRACES])  # all known, several traces
    for trace_id in HOSTILE_TRACES:
        assert_intact(first, trace_id, 6)
    assert store.execute("SELECT count(*) FROM audit_trace_heads")[0][0] == len(HOSTILE_TRACES) + 1
    assert relocks  # the refused guesses were written again
