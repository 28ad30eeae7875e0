"""Issue 31, item 5: each rewrite an attacker with full access to the audit database can make, made as
they would make it (every per-trace hash and head recomputed, the log's leaf hashes rewritten too), is
caught by the witnessed, signed checkpoints, naming the log index or the trace. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from audit_log_support import NOON, ORIGIN, Log, at, rebuild_log, rewrite_trace
from audit_sql_support import Store, make_store
from toolbox.audit._events import GENESIS_HASH
from toolbox.audit._log_verify import LogProblem, WitnessedNote
from toolbox.audit._note import Checkpoint, sign_checkpoint
from toolbox.audit._witness import DirectoryWitness, Witness, WitnessError


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def log(store: Store, tmp_path: Path) -> Log:
    """Traces a, b, c (4 events each, 10:00) under the noon checkpoint (12 entries); trace d
    (12:01) under the 13:00 checkpoint (16 entries). Both in two witnesses."""
    log = Log(store, tmp_path)
    for n, trace in enumerate("abc"):
        log.sink.append([at(n * 10 + i, trace, operation=f"op{i}") for i in range(4)])
    log.checkpoint()
    log.sink.append([at(7260 + i, "d", operation=f"op{i}") for i in range(4)])
    log.checkpoint(NOON + timedelta(hours=1))
    assert log.problems() == [] and log.chain_problems() == []
    return log


def _index(log: Log, trace: str, sequence: int) -> int:
    event_id = next(r.event_id for r in log.sink.read_trace(trace) if r.sequence == sequence)
    found = log.log.index_of(event_id)
    assert found is not None
    return found


def _text(problems: list[LogProblem]) -> str:
    return "\n".join(map(str, problems))


def _edit_second_event(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows[1]["decision"] = "ALLOW"  # the deny becomes an allow
    return rows


def test_an_edited_event_with_every_later_hash_and_head_recomputed(log: Log, store: Store) -> None:
    index = _index(log, "b", 2)
    rewrite_trace(store, log.sink, "b", _edit_second_event)
    assert log.chain_problems() == []  # the keyless chain and heads are fooled
    problems = log.problems()
    assert (
        LogProblem(
            f"event #2 ({log.sink.read_trace('b')[1].event_id}) changed after it was logged", index, "b"
        )
        in problems
    )


def test_an_edited_event_with_the_log_rebuilt_too(log: Log, store: Store) -> None:
    """Leaf hashes recomputed and the log rebuilt: the signed roots no longer match."""
    rewrite_trace(store, log.sink, "b", _edit_second_event)
    rebuild_log(store, log.log)
    problems = log.problems()
    assert log.chain_problems() == []
    assert [p.index for p in problems] == [0, 0]  # both checkpoints cover the change
    assert "entries 0 to 11 were rewritten: the tree of 12 entries no longer has the root signed" in _text(
        problems
    )


def test_events_removed_from_the_end_of_a_trace(log: Log, store: Store) -> None:
    gone = [_index(log, "a", 3), _index(log, "a", 4)]
    rewrite_trace(store, log.sink, "a", lambda rows: rows[:2])
    assert log.chain_problems() == []
    problems = log.problems()
    assert [p.index for p in problems if "is gone" in p.problem] == gone


def test_events_removed_from_the_middle_of_a_trace(log: Log, store: Store) -> None:
    gone = _index(log, "c", 2)
    rewrite_trace(store, log.sink, "c", lambda rows: [rows[0], *rows[2:]])
    assert log.chain_problems() == []
    problems = log.problems()
    assert gone in [p.index for p in problems if "is gone" in p.problem]
    # The events after it were renumbered and rehashed: their entries name the trace.
    assert {p.trace_id for p in problems if "changed after it was logged" in p.problem} == {"c"}


def test_a_whole_trace_removed_with_its_head(log: Log, store: Store) -> None:
    gone = [_index(log, "b", s) for s in range(1, 5)]
    rewrite_trace(store, log.sink, "b", lambda rows: [])
    assert log.chain_problems() == []
    assert [p.index for p in log.problems()] == gone


def test_a_whole_trace_removed_with_its_log_entries_renumbered(log: Log, store: Store) -> None:
    rewrite_trace(store, log.sink, "b", lambda rows: [])
    rebuild_log(store, log.log)
    problems = log.problems()
    assert "entries 0 to 11 were rewritten" in _text(problems)
    assert "covers entries 12 to 15 the log no longer holds" in _text(problems)


def test_the_latest_events_removed_from_the_end_of_the_log(log: Log, store: Store) -> None:
    rewrite_trace(store, log.sink, "d", lambda rows: [])
    store.execute("DELETE FROM audit_log WHERE log_index >= 12")
    problems = log.problems()
    assert log.chain_problems() == []
    assert problems == [
        LogProblem(
            "checkpoint of tree size 16 (signed 2026-01-01T13:00:00Z) covers entries 12 to 15 "
            "the log no longer holds (removed)",
            12,
        )
    ]


def test_a_log_entry_removed_from_the_middle(log: Log, store: Store) -> None:
    store.execute("DELETE FROM audit_log WHERE log_index = 5")
    assert LogProblem("entries 5 to 5 are missing (removed)", 5) in log.problems()


def test_events_inserted_in_the_past_as_a_new_trace(log: Log, store: Store) -> None:
    """A trace made to look as if it ran at 10:30, stored after the noon checkpoint."""
    log.sink.append([at(1800, "forged"), at(1801, "forged")])
    problems = log.problems()
    assert log.chain_problems() == []
    assert [(p.trace_id, p.index) for p in problems] == [("forged", None), ("forged", None)]
    assert "did not include it (inserted in the past)" in problems[0].problem
    log.log.sequence()  # sequenced (by the attacker or the next checkpoint): still caught, at its index
    assert [(p.trace_id, p.index) for p in log.problems()] == [("forged", 16), ("forged", 17)]


def test_an_event_inserted_in_the_past_inside_a_trace(log: Log, store: Store) -> None:
    def insert(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        forged = {**rows[0], "event_id": "f" * 32, "operation": "forged", "previous_hash": GENESIS_HASH}
        return [rows[0], forged, *rows[1:]]

    rewrite_trace(store, log.sink, "a", insert)
    assert log.chain_problems() == []
    problems = log.problems()
    assert ("a", None) in [(p.trace_id, p.index) for p in problems if "inserted in the past" in p.problem]
    assert {p.trace_id for p in problems if "changed after it was logged" in p.problem} == {"a"}


def test_an_event_committed_late_within_the_grace_is_not_an_insertion(log: Log) -> None:
    log.sink.append([at(3 * 3600 - 60, "late")])  # 12:59, stored after the 13:00 checkpoint was signed
    assert log.problems() == []


def test_a_checkpoint_whose_signature_fails(log: Log, tmp_path: Path) -> None:
    """A witness copy altered (or forged without the key) is refused, and named."""
    held = sorted((tmp_path / "witness").iterdir())[0]
    forged = held.read_text().replace("\n12\n", "\n11\n")
    held.chmod(0o644)
    held.write_text(forged)
    problems = log.problems()
    assert any(
        "a checkpoint held by directory" in p.problem and "does not verify" in p.problem for p in problems
    )


def test_a_forked_log(log: Log, store: Store, tmp_path: Path) -> None:
    """The key holder signs a second history of size 12 and gets a fresh witness to keep it."""
    rewrite_trace(store, log.sink, "b", _edit_second_event)
    rebuild_log(store, log.log)
    other_root = Checkpoint(ORIGIN, 12, bytes(32), "2026-01-01T12:30:00Z")
    fork = sign_checkpoint(other_root, log.signer)
    with pytest.raises(WitnessError, match="FORK"):  # a witness that holds size 12 refuses it
        log.witnesses[0].add(fork, [])
    elsewhere = Witness(DirectoryWitness(tmp_path / "fresh-witness"), [log.key])
    elsewhere.add(fork, [])
    notes = [*log.notes(), WitnessedNote(elsewhere.name, fork)]
    from toolbox.audit import AuditQuery
    from toolbox.audit._log_verify import verify_log

    problems = verify_log(
        log.sink.query(AuditQuery(limit=1000)), log.log.entries(), notes, [log.key], origin=ORIGIN
    )
    assert any(p.problem.startswith("FORK: 2 signed checkpoints of tree size 12") for p in problems)
