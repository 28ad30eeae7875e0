"""The Merkle log of a SQL store: sequencing, signed checkpoints, witnesses, proofs (SQLite, PostgreSQL)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from audit_log_support import NOON, ORIGIN, Log, at, signing_key
from audit_sql_support import Store, make_store
from toolbox.audit._log import MerkleLog, event_leaf
from toolbox.audit._merkle import root_hash, verify_consistency, verify_inclusion
from toolbox.audit._note import Checkpoint, CheckpointError, KeyFileSigner, VerifierKey, open_checkpoint
from toolbox.audit._witness import DirectoryWitness, SqlWitness, Witness, WitnessError


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def log(store: Store, tmp_path: Path) -> Log:
    return Log(store, tmp_path)


def test_sequencing_is_dense_stable_and_off_the_write_path(log: Log) -> None:
    log.sink.append([at(0, "a"), at(1, "a")])
    assert log.log.entries() == []  # storing gives no index: the sequencer does, later
    assert log.log.sequence() == 2
    log.sink.append([at(2, "b")])
    assert log.log.sequence() == 3
    assert log.log.sequence() == 3  # nothing new: nothing changes
    entries = log.log.entries()
    assert [e.index for e in entries] == [0, 1, 2]
    records = {r.event_id: r for r in log.sink.read_trace("a") + log.sink.read_trace("b")}
    assert [records[e.event_id].trace_id for e in entries] == ["a", "a", "b"]
    assert all(e.leaf == event_leaf(records[e.event_id].hash) for e in entries)


def test_an_event_committed_late_gets_the_next_index_not_its_place_in_time(log: Log) -> None:
    """Commits land out of time order: an index once given never moves (history is not rewritten)."""
    log.sink.append([at(10, "a")])
    log.log.sequence()
    log.sink.append([at(5, "late")])  # made before, committed after the first sequencing
    log.log.sequence()
    ids = [e.event_id for e in log.log.entries()]
    assert ids == [log.sink.read_trace("a")[0].event_id, log.sink.read_trace("late")[0].event_id]


def test_checkpoint_is_signed_witnessed_and_not_repeated(log: Log) -> None:
    log.sink.append([at(i, "a") for i in range(5)])
    note = log.checkpoint()
    checkpoint = open_checkpoint(note, [log.key])
    assert (checkpoint.origin, checkpoint.size, checkpoint.timestamp) == (ORIGIN, 5, "2026-01-01T12:00:00Z")
    assert checkpoint.root == root_hash([e.leaf for e in log.log.entries()])
    assert log.checkpoint(NOON + timedelta(hours=1)) == note  # nothing new: the same checkpoint
    assert [w.latest_size(ORIGIN) for w in log.witnesses] == [5, 5]
    log.sink.append([at(7260, "b")])  # 12:01, after the first checkpoint
    log.checkpoint(NOON + timedelta(hours=1))
    assert [len(w.checkpoints(ORIGIN)) for w in log.witnesses] == [2, 2]
    assert log.problems() == []


def test_inclusion_and_consistency_proofs_verify_against_the_signed_roots(log: Log) -> None:
    log.sink.append([at(i, f"t{i % 3}") for i in range(7)])
    first = open_checkpoint(log.checkpoint(), [log.key])
    log.sink.append([at(7260 + i, "t9") for i in range(6)])
    second = open_checkpoint(log.checkpoint(NOON + timedelta(hours=1)), [log.key])
    entries = log.log.entries()
    for entry in entries:
        proof = log.log.inclusion(entry.index, second.size)
        assert verify_inclusion(entry.leaf, entry.index, second.size, proof, second.root)
    proof = log.log.consistency(first.size, second.size)
    assert verify_consistency(first.size, second.size, first.root, second.root, proof)


# -- the checkpoint format ------------------------------------------------------


def test_the_note_is_the_c2sp_signed_note_form(tmp_path: Path) -> None:
    signer, key = signing_key(tmp_path)
    from toolbox.audit._note import sign_checkpoint

    checkpoint = Checkpoint(ORIGIN, 3, bytes(range(32)), "2026-01-01T12:00:00Z")
    note = sign_checkpoint(checkpoint, signer)
    body, signature = note.split("\n\n")
    assert (
        body + "\n"
        == f"{ORIGIN}\n3\n{base64.b64encode(bytes(range(32))).decode()}\ntimestamp 2026-01-01T12:00:00Z\n"
    )
    assert signature.startswith("\u2014 audit-log ") and signature.endswith("\n")
    assert base64.b64decode(signature.split(" ")[2])[:4] == key.key_id
    assert VerifierKey.parse(key.text()) == key
    assert open_checkpoint(note, [key]) == checkpoint


@pytest.mark.parametrize(
    "tamper",
    [
        lambda n: n.replace("\n3\n", "\n4\n"),  # another size
        lambda n: n.replace("timestamp 2026", "timestamp 2027"),  # another time
        lambda n: n.replace(ORIGIN, "audit.example.com/other"),  # another log
    ],
)
def test_an_altered_checkpoint_fails_its_signature(tmp_path: Path, tamper: object) -> None:
    from toolbox.audit._note import sign_checkpoint

    signer, key = signing_key(tmp_path)
    note = sign_checkpoint(Checkpoint(ORIGIN, 3, bytes(32), "2026-01-01T12:00:00Z"), signer)
    assert callable(tamper)
    with pytest.raises(CheckpointError, match="does not verify"):
        open_checkpoint(tamper(note), [key])


def test_notes_signed_by_someone_else_or_malformed_are_refused(tmp_path: Path) -> None:
    from toolbox.audit._note import sign_checkpoint

    signer, key = signing_key(tmp_path)
    other_signer, other = signing_key(tmp_path, "audit-log-other")
    note = sign_checkpoint(Checkpoint(ORIGIN, 3, bytes(32), "2026-01-01T12:00:00Z"), other_signer)
    with pytest.raises(CheckpointError, match="no signature by a trusted key"):
        open_checkpoint(note, [key])
    # A same-named impostor key: its id differs, so it is not taken for ours.
    impostor = VerifierKey("audit-log", other.public_key)
    assert impostor.key_id != key.key_id
    good = sign_checkpoint(Checkpoint(ORIGIN, 3, bytes(32), "2026-01-01T12:00:00Z"), signer)
    for bad in [
        "",
        "x\n",
        good.replace("\n\n", "\n"),
        good + "\x07",
        good * 400,
        good.replace("\u2014", "-"),
    ]:
        with pytest.raises(CheckpointError):
            open_checkpoint(bad, [key])
    with pytest.raises(CheckpointError):
        VerifierKey.parse(key.text().replace("+", "+0", 1))
    with pytest.raises(CheckpointError):
        Checkpoint("two\nlines", 1, bytes(32), "2026-01-01T12:00:00Z")


def test_a_key_file_others_can_read_is_refused_and_never_shown(tmp_path: Path) -> None:
    signer, _ = signing_key(tmp_path)
    path = tmp_path / "audit-log.pem"
    pem = path.read_bytes()
    path.chmod(0o644)
    with pytest.raises(CheckpointError, match="chmod 600") as refused:
        KeyFileSigner(path, name="audit-log")
    assert pem.decode() not in str(refused.value) and "PRIVATE" not in repr(signer)
    raw = tmp_path / "raw.key"
    raw.write_bytes(os.urandom(32))
    raw.chmod(0o600)
    assert len(KeyFileSigner(raw, name="raw").sign(b"x")) == 64
    junk = tmp_path / "junk.key"
    junk.write_bytes(b"-----BEGIN PRIVATE KEY-----\nnope\n")
    junk.chmod(0o600)
    with pytest.raises(CheckpointError, match="not an unencrypted PEM"):
        KeyFileSigner(junk, name="junk")


# -- witnesses ------------------------------------------------------------------


@pytest.fixture(params=["directory", "sql"])
def witness_store(request: pytest.FixtureRequest, tmp_path: Path) -> DirectoryWitness | SqlWitness:
    if request.param == "directory":
        return DirectoryWitness(tmp_path / "w")
    return SqlWitness(f"sqlite:///{tmp_path / 'w.db'}", origin=ORIGIN)


def test_a_witness_refuses_a_fork_a_shrink_and_a_rewritten_history(
    store: Store, tmp_path: Path, witness_store: DirectoryWitness | SqlWitness
) -> None:
    log = Log(store, tmp_path)
    witness = Witness(witness_store, [log.key])
    log.sink.append([at(i, "a") for i in range(4)])
    first = log.log.checkpoint(log.signer, ORIGIN, now=NOON)
    log.log.publish(first, [witness])
    log.log.publish(first, [witness])  # again: already held, fine
    log.sink.append([at(7260, "b")])
    second = log.log.checkpoint(log.signer, ORIGIN, now=NOON + timedelta(hours=1))
    log.log.publish(second, [witness])
    from toolbox.audit._note import sign_checkpoint

    def signed(size: int, root: bytes) -> str:
        return sign_checkpoint(Checkpoint(ORIGIN, size, root, "2026-01-01T13:00:00Z"), log.signer)

    with pytest.raises(WitnessError, match="FORK"):
        witness.add(signed(4, bytes(32)), [])
    with pytest.raises(WitnessError, match="larger tree"):
        witness.add(signed(3, bytes(32)), [])
    with pytest.raises(WitnessError, match="does not extend"):
        witness.add(signed(9, bytes(32)), log.log.consistency(5, 5))
    with pytest.raises(WitnessError, match="refuses the checkpoint: the signature"):
        witness.add(second.replace("\n5\n", "\n6\n"), [])
    assert [c.size for c in witness.checkpoints(ORIGIN)] == [4, 5]


def test_a_directory_witness_never_overwrites_a_file(tmp_path: Path) -> None:
    witness = DirectoryWitness(tmp_path / "w")
    assert witness.add_new(3, "first\n")
    assert not witness.add_new(3, "second\n")
    assert witness.notes() == ["first\n"]
    assert [p.name for p in (tmp_path / "w").iterdir()] == ["00000000000000000003.checkpoint"]
    assert (tmp_path / "w" / "00000000000000000003.checkpoint").stat().st_mode & 0o222 == 0


def test_a_postgresql_witness_keeps_checkpoints(log: Log, store: Store) -> None:
    from audit_sql_support import POSTGRES_URL

    origin = f"{ORIGIN}/{os.urandom(6).hex()}"
    witness_store = SqlWitness(POSTGRES_URL, origin=origin)
    try:
        witness = Witness(witness_store, [log.key])
        log.sink.append([at(0, "a")])
        note = log.log.checkpoint(log.signer, origin, now=NOON)
        log.log.publish(note, [witness])
        assert [c.size for c in witness.checkpoints(origin)] == [1]
    finally:
        witness_store.close()
    assert "s3cr3t" not in SqlWitness("postgresql://auditor:s3cr3t@127.0.0.1/w", origin=origin).name


def test_proofs_through_the_tile_cache_match_the_proofs_over_every_leaf(log: Log) -> None:
    """Across tile boundaries (256 entries): roots, inclusion and consistency proofs are the RFC's."""
    from toolbox.audit._merkle import consistency_proof, inclusion_proof

    log.sink.append([at(i, f"t{i % 7}") for i in range(300)])
    log.log.sequence()
    assert log.log.root(300) == root_hash([e.leaf for e in log.log.entries()])
    log.sink.append([at(400 + i, "u") for i in range(420)])
    log.log.sequence()
    leaves = [e.leaf for e in log.log.entries()]
    for size in (1, 255, 256, 257, 300, 512, 513, 720):
        assert log.log.root(size) == root_hash(leaves[:size])
        for index in {0, size // 2, size - 1, min(255, size - 1), min(256, size - 1)}:
            assert log.log.inclusion(index, size) == inclusion_proof(leaves, index, size)
        for first in {1, size // 3 or 1, min(256, size), size}:
            assert log.log.consistency(first, size) == (
                consistency_proof(leaves, first, size) if first < size else []
            )


def test_concurrent_sequencers_and_writers_give_each_event_one_index_without_gaps(
    log: Log, store: Store
) -> None:
    """Two sequencers race four writers: every event ends up at exactly one index, densely."""
    import threading

    stop = threading.Event()
    failures: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(25):
                log.sink.append([at(n * 100 + i, f"w{n}"), at(n * 100 + i, f"w{n}")])
        except BaseException as exc:
            failures.append(exc)

    def sequence() -> None:
        other = MerkleLog(store.sink())
        try:
            while not stop.is_set():
                other.sequence()
        except BaseException as exc:
            failures.append(exc)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    sequencers = [threading.Thread(target=sequence) for _ in range(2)]
    for thread in (*sequencers, *writers):
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in sequencers:
        thread.join()
    assert failures == []
    assert log.log.sequence() == 200
    entries = log.log.entries()
    assert [e.index for e in entries] == list(range(200))
    assert len({e.event_id for e in entries}) == 200


def test_racing_forks_at_a_witness_one_wins_the_other_is_refused(tmp_path: Path) -> None:
    import threading

    from toolbox.audit._note import sign_checkpoint

    signer, key = signing_key(tmp_path)
    notes = [
        sign_checkpoint(Checkpoint(ORIGIN, 5, bytes([n]) * 32, "2026-01-01T12:00:00Z"), signer)
        for n in range(8)
    ]
    witnesses = [Witness(DirectoryWitness(tmp_path / "w"), [key]) for _ in notes]
    outcomes: list[str] = []

    def add(witness: Witness, note: str) -> None:
        try:
            witness.add(note, [])
            outcomes.append("kept")
        except WitnessError as exc:
            outcomes.append("FORK" if "FORK" in str(exc) else str(exc))

    threads = [threading.Thread(target=add, args=pair) for pair in zip(witnesses, notes, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["FORK"] * 7 + ["kept"]
    assert len(DirectoryWitness(tmp_path / "w").notes()) == 1


def test_a_directory_witness_ignores_other_files_and_refuses_a_huge_one(tmp_path: Path) -> None:
    _, key = signing_key(tmp_path)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "README").write_text("not a checkpoint")
    (tmp_path / "w" / "00000000000000000001.checkpoint").write_bytes(b"x" * (1 << 20))
    witness = Witness(DirectoryWitness(tmp_path / "w"), [key])
    with pytest.raises(CheckpointError, match="too large"):
        witness.checkpoints(ORIGIN)
