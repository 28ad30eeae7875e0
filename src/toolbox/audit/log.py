"""The Merkle log over a SQL store's events: a sequencer, checkpoints and proofs.

The write path is untouched: a STRICT call stores its events exactly as before. Later (at
checkpoint time, from the command line or a background thread), `MerkleLog.sequence` gives
every stored event that has no log index yet the next indexes, densely (0, 1, 2, ...), in one
transaction under a lock, ordered by (timestamp, trace, sequence). Indexes are never taken
from the table's own order: PostgreSQL commits land out of id order and sequences have gaps,
so "ORDER BY id" at checkpoint time could rewrite history; an index once given never changes.

Each log entry keeps its event's RFC 9162 leaf hash, ``SHA-256(0x00 || event hash)`` with the
event hash (the per-trace chain hash, which covers every field) as its 64 ASCII hex digits. A
checkpoint reads the leaf hashes, never the events, so a tree of a million events takes seconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, final

from sqlalchemy import Table, func, insert, select, union_all

from toolbox.audit.merkle import consistency_proof, inclusion_proof, leaf_hash, roots_at
from toolbox.audit.note import Checkpoint, CheckpointError, Signer, sign_checkpoint
from toolbox.audit.sink import AuditSinkError
from toolbox.audit.sql import SqlSink
from toolbox.audit.sql_schema import checkpoints_table, events_table, log_table, pending_table
from toolbox.audit.witness import Witness, WitnessError

__all__ = ["LogEntry", "MerkleLog", "check_origin", "event_leaf"]

_CHUNK = 5000  # log rows inserted per statement


def event_leaf(event_hash: str) -> bytes:
    """The leaf hash of an event whose chain hash is ``event_hash`` (hex)."""
    return leaf_hash(event_hash.encode("ascii", "replace"))


@final
@dataclass(frozen=True)
class LogEntry:
    """One sequenced event: its index, id and stored leaf hash."""

    index: int
    event_id: str
    leaf: bytes


@final
class MerkleLog:
    """The Merkle log of ``sink``'s store (SQLite or PostgreSQL)."""

    __slots__ = ("_sink",)

    def __init__(self, sink: SqlSink) -> None:
        self._sink = sink

    def _event_tables(self, dialect: str) -> tuple[Table, ...]:
        return (events_table, pending_table) if dialect == "sqlite" else (events_table,)

    def sequence(self) -> int:
        """Give every stored, unsequenced event the next log index; the log's new size."""
        with self._sink.transaction("sequence the audit log") as conn:
            if conn.dialect.name == "postgresql":  # one sequencer at a time (SQLite: BEGIN IMMEDIATE)
                key = int.from_bytes(hashlib.sha256(b"toolbox.audit.log").digest()[:8], "big", signed=True)
                conn.execute(select(func.pg_advisory_xact_lock(key)))
            size = int(conn.execute(select(func.count()).select_from(log_table)).scalar_one())
            parts = [
                select(t.c.event_id, t.c.hash, t.c.timestamp, t.c.trace_id, t.c.sequence).where(
                    ~select(log_table.c.event_id).where(log_table.c.event_id == t.c.event_id).exists()
                )
                for t in self._event_tables(conn.dialect.name)
            ]
            union = union_all(*parts).subquery() if len(parts) > 1 else parts[0].subquery()
            fresh = conn.execute(
                select(union.c.event_id, union.c.hash).order_by(
                    union.c.timestamp, union.c.trace_id, union.c.sequence, union.c.event_id
                )
            ).all()
            rows: list[dict[str, Any]] = [
                {"log_index": size + i, "event_id": event_id, "leaf_hash": event_leaf(digest).hex()}
                for i, (event_id, digest) in enumerate(fresh)
            ]
            for start in range(0, len(rows), _CHUNK):
                conn.execute(insert(log_table), rows[start : start + _CHUNK])
            return size + len(rows)

    def entries(self) -> list[LogEntry]:
        """Every log entry, by index."""
        with self._sink.reading("read the audit log") as conn:
            result = conn.execute(
                select(log_table.c.log_index, log_table.c.event_id, log_table.c.leaf_hash).order_by(
                    log_table.c.log_index
                )
            )
            return [LogEntry(int(i), str(e), _unhex(h)) for i, e, h in result]

    def leaves(self, size: int) -> list[bytes]:
        """The leaf hashes of the first ``size`` entries (refused unless indexes 0..size-1 are all there)."""
        with self._sink.reading("read the audit log") as conn:
            result = conn.execute(
                select(log_table.c.leaf_hash)
                .where(log_table.c.log_index < size)
                .order_by(log_table.c.log_index)
            )
            leaves = [_unhex(h) for (h,) in result]
        if len(leaves) != size:
            raise AuditSinkError(f"the audit log holds {len(leaves)} of the first {size} entries: run verify")
        return leaves

    def index_of(self, event_id: str) -> int | None:
        """The log index of ``event_id`` (None: not sequenced yet, or not stored)."""
        with self._sink.reading("read the audit log") as conn:
            found = conn.execute(
                select(log_table.c.log_index).where(log_table.c.event_id == event_id)
            ).scalar()
        return None if found is None else int(found)

    def trace_of(self, event_id: str) -> str | None:
        """The trace of the stored event ``event_id`` (None: not stored)."""
        with self._sink.reading("read the audit log") as conn:
            for table in self._event_tables(conn.dialect.name):
                found = conn.execute(select(table.c.trace_id).where(table.c.event_id == event_id)).scalar()
                if found is not None:
                    return str(found)
        return None

    def checkpoint(self, signer: Signer, origin: str, *, now: datetime | None = None) -> str:
        """Sequence, then sign the tree head of the whole log; the signed note (also kept in the store).

        When nothing was added since the last checkpoint, that one is returned again.
        """
        size = self.sequence()
        latest = self.latest_checkpoint()
        if latest is not None and latest[0] == size:
            return latest[1]
        root = roots_at(self.leaves(size), [size])[size]
        moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        checkpoint = Checkpoint(origin, size, root, moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
        note = sign_checkpoint(checkpoint, signer)
        with self._sink.transaction("store the checkpoint") as conn:
            conn.execute(insert(checkpoints_table).values(tree_size=size, root_hash=root.hex(), note=note))
        return note

    def latest_checkpoint(self) -> tuple[int, str] | None:
        """The size and note of the store's latest checkpoint (its own copy)."""
        with self._sink.reading("read the checkpoints") as conn:
            row = conn.execute(
                select(checkpoints_table.c.tree_size, checkpoints_table.c.note)
                .order_by(checkpoints_table.c.tree_size.desc())
                .limit(1)
            ).first()
        return None if row is None else (int(row[0]), str(row[1]))

    def checkpoint_covering(self, index: int) -> tuple[int, str] | None:
        """The store's first checkpoint that includes log index ``index``."""
        with self._sink.reading("read the checkpoints") as conn:
            row = conn.execute(
                select(checkpoints_table.c.tree_size, checkpoints_table.c.note)
                .where(checkpoints_table.c.tree_size > index)
                .order_by(checkpoints_table.c.tree_size)
                .limit(1)
            ).first()
        return None if row is None else (int(row[0]), str(row[1]))

    def inclusion(self, index: int, size: int) -> list[bytes]:
        """The inclusion proof of entry ``index`` in the tree of ``size`` entries."""
        return inclusion_proof(self.leaves(size), index, size)

    def publish(self, note: str, witnesses: Sequence[Witness]) -> None:
        """Hand the signed ``note`` to every witness with the consistency proof from what it holds.

        Every witness is tried; the first refusal is raised after the others had their turn.
        """
        checkpoint = Checkpoint.parse(note[: note.rfind("\n\n") + 1])
        refused: list[str] = []
        for witness in witnesses:
            try:
                held = witness.latest_size(checkpoint.origin)
                proof = self.consistency(held, checkpoint.size) if held <= checkpoint.size else []
                witness.add(note, proof)
            except (WitnessError, CheckpointError) as exc:
                refused.append(str(exc))
        if refused:
            raise WitnessError("; ".join(refused))

    def consistency(self, first: int, second: int) -> list[bytes]:
        """The consistency proof from the tree of ``first`` entries to that of ``second``."""
        if first in (0, second):
            return []
        return consistency_proof(self.leaves(second), first, second)


def _unhex(text: str) -> bytes:
    try:
        value = bytes.fromhex(text)
    except ValueError:
        value = b""
    return value if len(value) == 32 else hashlib.sha256(b"malformed:" + text.encode()).digest()


def check_origin(origin: str) -> str:
    """``origin`` if a checkpoint may carry it (raises `CheckpointError` otherwise)."""
    Checkpoint(origin, 0, bytes(32), "2000-01-01T00:00:00Z")
    return origin
