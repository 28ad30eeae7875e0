"""The Merkle log over a SQL store's events: a sequencer, checkpoints and proofs.

The write path is untouched: a STRICT call stores its events exactly as before. Later (at
checkpoint time, from the command line or a background thread), `MerkleLog.sequence` gives
every stored event that has no log index yet the next indexes, densely (0, 1, 2, ...), in one
``INSERT .. SELECT`` under a lock, ordered by (timestamp, trace, sequence). Indexes are never
taken from the table's own order: PostgreSQL commits land out of id order and sequences have
gaps, so "ORDER BY id" at checkpoint time could rewrite history; an index once given never
changes.

Each log entry keeps its event's hash as it was when sequenced; the RFC 9162 leaf is
``SHA-256(0x00 || event hash)`` with the event hash (the per-trace chain hash, which covers
every field) as its 64 ASCII hex digits. ``audit_log_tiles`` caches the hash of each full run
of 256 entries, so a checkpoint hashes only what is new and a proof reads a few thousand rows
(`_StoredTree`). Nothing here is trusted by verification, which recomputes from the events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, final

from sqlalchemy import Table, func, insert, literal, select, union_all
from sqlalchemy.engine import Connection

from toolbox.audit._merkle import (
    EMPTY_ROOT,
    consistency_path,
    inclusion_path,
    leaf_hash,
    node_hash,
    root_hash,
)
from toolbox.audit._note import Checkpoint, CheckpointError, Signer, sign_checkpoint
from toolbox.audit._sink import AuditSinkError
from toolbox.audit._witness import CheckpointWitness, WitnessError
from toolbox.audit.sinks._sql import SqlSink
from toolbox.audit.sinks._sql_schema import (
    checkpoints_table,
    create_log_tables,
    events_table,
    log_table,
    pending_table,
    tiles_table,
)

__all__ = ["TILE", "LogEntry", "MerkleLog", "check_origin", "event_leaf"]

#: Entries per cached tile (a perfect subtree of height 8, as C2SP tlog-tiles uses).
TILE = 256
_LOCK_KEY = int.from_bytes(hashlib.sha256(b"toolbox.audit._log").digest()[:8], "big", signed=True)


def event_leaf(event_hash: str) -> bytes:
    """The leaf hash of an event whose chain hash is ``event_hash`` (hex)."""
    return leaf_hash(event_hash.encode("ascii", "replace"))


@final
@dataclass(frozen=True)
class LogEntry:
    """One sequenced event: its index, id and leaf hash (from its hash when sequenced)."""

    index: int
    event_id: str
    leaf: bytes


def _leaves(conn: Connection, start: int, end: int) -> list[bytes]:
    """The leaf hashes of entries ``[start, end)``; refused unless every index is there."""
    rows = conn.execute(
        select(log_table.c.event_hash)
        .where(log_table.c.log_index >= start, log_table.c.log_index < end)
        .order_by(log_table.c.log_index)
    )
    leaves = [event_leaf(h) for (h,) in rows]
    if len(leaves) != end - start:
        raise AuditSinkError(f"the audit log lacks entries between {start} and {end - 1}: run verify")
    return leaves


class _StoredTree:
    """The tree of the first ``size`` entries, read through the tile cache (full tiles must be there)."""

    def __init__(self, conn: Connection, size: int) -> None:
        self._conn = conn
        self._size = size
        rows = conn.execute(
            select(tiles_table.c.tile_hash)
            .where(tiles_table.c.tile_index < size // TILE)
            .order_by(tiles_table.c.tile_index)
        )
        self._tiles = [bytes.fromhex(h) for (h,) in rows]
        if len(self._tiles) != size // TILE:
            raise AuditSinkError("the audit log's tile cache is incomplete: run a checkpoint")
        self._tile_leaves: dict[int, list[bytes]] = {}

    def _in_tile(self, tile: int) -> list[bytes]:
        if tile not in self._tile_leaves:
            start = tile * TILE
            self._tile_leaves[tile] = _leaves(self._conn, start, min(start + TILE, self._size))
        return self._tile_leaves[tile]

    def subtree(self, start: int, end: int) -> bytes:
        """MTH of entries ``[start, end)``, split as RFC 9162 splits."""
        if end - start <= 0:
            return EMPTY_ROOT
        tile = start // TILE
        if tile == (end - 1) // TILE:  # inside one tile: from its leaves
            leaves = self._in_tile(tile)
            return root_hash(leaves[start - tile * TILE : end - tile * TILE])
        count = end - start
        if count & (count - 1) == 0:  # a perfect subtree of whole tiles (it starts at a multiple of its size)
            return root_hash(self._tiles[start // TILE : end // TILE])
        k = 1 << ((count - 1).bit_length() - 1)
        return node_hash(self.subtree(start, start + k), self.subtree(start + k, end))


@final
class MerkleLog:
    """The Merkle log of ``sink``'s store (SQLite or PostgreSQL)."""

    __slots__ = ("_ready", "_sink")

    def __init__(self, sink: SqlSink) -> None:
        self._sink = sink
        self._ready = False

    def _read(self, action: str) -> Any:
        return self._sink.reading(action)  # no table made for a reader: the first checkpoint makes them

    def _write(self, action: str) -> Any:
        self._prepare()
        return self._sink.transaction(action)

    def _prepare(self) -> None:
        """The log's tables where missing (a PostgreSQL store made before version 6 has none)."""
        if self._ready:
            return
        with self._sink.transaction("prepare the audit log") as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_LOCK_KEY)))
                create_log_tables(conn)
        self._ready = True

    def _event_tables(self, dialect: str) -> tuple[Table, ...]:
        return (events_table, pending_table) if dialect == "sqlite" else (events_table,)

    def _unsequenced(self, dialect: str, since: str | None) -> Any:
        """The stored events without a log index (with a timestamp from ``since`` on), as a subquery."""
        parts = []
        for t in self._event_tables(dialect):
            part = select(t.c.event_id, t.c.hash, t.c.timestamp, t.c.trace_id, t.c.sequence).where(
                ~select(log_table.c.event_id).where(log_table.c.event_id == t.c.event_id).exists()
            )
            parts.append(part if since is None else part.where(t.c.timestamp >= since))
        return (union_all(*parts) if len(parts) > 1 else parts[0]).subquery()

    def sequence(self) -> int:
        """Give every stored, unsequenced event the next log index; the log's new size.

        The scan for the oldest unsequenced event runs first, outside the write transaction (a
        reader never blocks the writers); the transaction then only looks at events from that
        time on, through the timestamp index. An event stored in between with an older time is
        sequenced at the next turn.
        """
        self._prepare()
        with self._read("read the audit log") as conn:
            if (
                conn.execute(select(log_table.c.log_index).limit(1)).first() is None
            ):  # an empty log: every event
                times = [
                    select(func.min(t.c.timestamp)).scalar_subquery()
                    for t in self._event_tables(conn.dialect.name)
                ]
                found = [conn.execute(select(t)).scalar() for t in times]
                oldest = min((f for f in found if f is not None), default=None)
            else:
                fresh = self._unsequenced(conn.dialect.name, None)
                oldest = conn.execute(select(func.min(fresh.c.timestamp))).scalar()
        with self._write("sequence the audit log") as conn:
            if conn.dialect.name == "postgresql":  # one sequencer at a time (SQLite: BEGIN IMMEDIATE)
                conn.execute(select(func.pg_advisory_xact_lock(_LOCK_KEY)))
            size = select(func.coalesce(func.max(log_table.c.log_index) + 1, 0))
            base = int(conn.execute(size).scalar_one())
            if oldest is None:
                return base
            fresh = self._unsequenced(conn.dialect.name, str(oldest))
            order = (fresh.c.timestamp, fresh.c.trace_id, fresh.c.sequence, fresh.c.event_id)
            conn.execute(
                insert(log_table).from_select(
                    ["log_index", "event_id", "event_hash"],
                    select(
                        literal(base - 1) + func.row_number().over(order_by=order),
                        fresh.c.event_id,
                        fresh.c.hash,
                    ),
                )
            )
            return int(conn.execute(size).scalar_one())

    def _extend_tiles(self, size: int) -> None:
        """Cache the hash of every full tile of the first ``size`` entries not cached yet."""
        with self._read("read the audit log") as conn:
            cached = int(conn.execute(select(func.count()).select_from(tiles_table)).scalar_one())
            full = size // TILE
            if cached >= full:
                return
            leaves = _leaves(conn, cached * TILE, full * TILE)
        rows = [
            {"tile_index": cached + i, "tile_hash": root_hash(leaves[i * TILE : (i + 1) * TILE]).hex()}
            for i in range(full - cached)
        ]
        with self._write("cache the audit log's tiles") as conn:
            now = int(conn.execute(select(func.count()).select_from(tiles_table)).scalar_one())
            if now == cached:  # else a concurrent checkpoint cached them first
                conn.execute(insert(tiles_table), rows)

    def stored_events(self) -> int:
        """How many events the store holds (sequenced or not)."""
        with self._read("count the stored events") as conn:
            return sum(
                int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in self._event_tables(conn.dialect.name)
            )

    def entries(self) -> list[LogEntry]:
        """Every log entry, by index."""
        with self._read("read the audit log") as conn:
            result = conn.execute(
                select(log_table.c.log_index, log_table.c.event_id, log_table.c.event_hash).order_by(
                    log_table.c.log_index
                )
            )
            return [LogEntry(int(i), str(e), event_leaf(h)) for i, e, h in result]

    def root(self, size: int) -> bytes:
        """The root of the tree of the first ``size`` entries."""
        self._extend_tiles(size)
        with self._read("read the audit log") as conn:
            return _StoredTree(conn, size).subtree(0, size)

    def index_of(self, event_id: str) -> int | None:
        """The log index of ``event_id`` (None: not sequenced yet, or not stored)."""
        with self._read("read the audit log") as conn:
            found = conn.execute(
                select(log_table.c.log_index).where(log_table.c.event_id == event_id)
            ).scalar()
        return None if found is None else int(found)

    def trace_of(self, event_id: str) -> str | None:
        """The trace of the stored event ``event_id`` (None: not stored)."""
        with self._read("read the audit log") as conn:
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
        root = self.root(size)
        moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        checkpoint = Checkpoint(origin, size, root, moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
        note = sign_checkpoint(checkpoint, signer)
        with self._write("store the checkpoint") as conn:
            held = conn.execute(
                select(checkpoints_table.c.note).where(checkpoints_table.c.tree_size == size)
            ).scalar()
            if held is not None:  # a concurrent checkpoint of the same size was first
                return str(held)
            conn.execute(insert(checkpoints_table).values(tree_size=size, root_hash=root.hex(), note=note))
        return note

    def latest_checkpoint(self) -> tuple[int, str] | None:
        """The size and note of the store's latest checkpoint (its own copy)."""
        with self._read("read the checkpoints") as conn:
            row = conn.execute(
                select(checkpoints_table.c.tree_size, checkpoints_table.c.note)
                .order_by(checkpoints_table.c.tree_size.desc())
                .limit(1)
            ).first()
        return None if row is None else (int(row[0]), str(row[1]))

    def checkpoint_covering(self, index: int) -> tuple[int, str] | None:
        """The store's first checkpoint that includes log index ``index``."""
        with self._read("read the checkpoints") as conn:
            row = conn.execute(
                select(checkpoints_table.c.tree_size, checkpoints_table.c.note)
                .where(checkpoints_table.c.tree_size > index)
                .order_by(checkpoints_table.c.tree_size)
                .limit(1)
            ).first()
        return None if row is None else (int(row[0]), str(row[1]))

    def inclusion(self, index: int, size: int) -> list[bytes]:
        """The inclusion proof of entry ``index`` in the tree of ``size`` entries."""
        self._extend_tiles(size)
        with self._read("read the audit log") as conn:
            return inclusion_path(_StoredTree(conn, size).subtree, index, size)

    def publish(self, note: str, witnesses: Sequence[CheckpointWitness]) -> None:
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
        self._extend_tiles(second)
        with self._read("read the audit log") as conn:
            return consistency_path(_StoredTree(conn, second).subtree, first, second)


def check_origin(origin: str) -> str:
    """``origin`` if a checkpoint may carry it (raises `CheckpointError` otherwise)."""
    Checkpoint(origin, 0, bytes(32), "2000-01-01T00:00:00Z")
    return origin
