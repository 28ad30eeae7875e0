"""Checking a store against its Merkle log and the witnessed checkpoints: the owner is caught.

The per-trace chains (`toolbox.audit._verify`) have no key: whoever can write the database can
recompute them. The checkpoints the witnesses hold are signed and out of the owner's reach, so
any rewrite of what a checkpoint covers shows, whatever else was recomputed:

- an event whose content no longer gives the leaf hash its log entry keeps (edited after it was
  logged), or whose log entry was rewritten too: then the tree no longer has the signed root,
  and the checkpoints that still match and the first that does not bound the changed indexes;
- a log entry whose event is gone (removed from a trace's middle or end, or with its trace);
- a missing index, or fewer entries than a checkpoint covers (removed from the end of the log);
- an event that claims a time before a checkpoint that did not include it (inserted in the past);
- two checkpoints of one size with different roots (a fork), a signature that does not verify.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import final

from toolbox.audit._events import AuditRecord
from toolbox.audit._log import LogEntry, event_leaf
from toolbox.audit._merkle import roots_at
from toolbox.audit._note import Checkpoint, CheckpointError, VerifierKey, open_checkpoint

__all__ = ["LogProblem", "WitnessedNote", "verify_log"]

#: How long an event may take from its timestamp to its commit (a slow transaction, a clock
#: skew between hosts) before one a checkpoint missed counts as inserted in the past.
DEFAULT_GRACE = timedelta(minutes=5)


@final
@dataclass(frozen=True)
class LogProblem:
    """What is wrong with the log, and where: a log index, a trace, or a checkpoint."""

    problem: str
    index: int | None = None
    trace_id: str | None = None

    def __str__(self) -> str:
        where = []
        if self.index is not None:
            where.append(f"log index {self.index}")
        if self.trace_id is not None:
            where.append(f"trace {self.trace_id}")
        return f"{', '.join(where) or 'log'}: {self.problem}"


@final
@dataclass(frozen=True)
class WitnessedNote:
    """A signed checkpoint as a witness (named ``witness``) holds it."""

    witness: str
    note: str


def _open_all(
    notes: Sequence[WitnessedNote], keys: Sequence[VerifierKey], origin: str | None
) -> tuple[list[tuple[str, Checkpoint]], list[LogProblem]]:
    opened: list[tuple[str, Checkpoint]] = []
    problems: list[LogProblem] = []
    for held in notes:
        try:
            checkpoint = open_checkpoint(held.note, keys)
        except CheckpointError as exc:
            problems.append(LogProblem(f"a checkpoint held by {held.witness} is refused: {exc}"))
            continue
        if origin is None or checkpoint.origin == origin:
            opened.append((held.witness, checkpoint))
    return opened, problems


def _forks(opened: Sequence[tuple[str, Checkpoint]]) -> list[LogProblem]:
    by_size: dict[int, dict[bytes, str]] = {}
    for witness, checkpoint in opened:
        by_size.setdefault(checkpoint.size, {}).setdefault(checkpoint.root, witness)
    return [
        LogProblem(
            f"FORK: {len(roots)} signed checkpoints of tree size {size} with different roots "
            f"({', '.join(sorted(roots.values()))})"
        )
        for size, roots in sorted(by_size.items())
        if len(roots) > 1
    ]


def _entry_problems(
    entries: Sequence[LogEntry], events: Mapping[str, AuditRecord]
) -> tuple[list[LogProblem], int]:
    """Gaps, entries without their event, events that no longer give their leaf; the gap-free size."""
    problems: list[LogProblem] = []
    dense = len(entries)
    for position, entry in enumerate(entries):
        if entry.index != position and dense == len(entries):
            dense = position
            problems.append(
                LogProblem(f"entries {position} to {entry.index - 1} are missing (removed)", position)
            )
        record = events.get(entry.event_id)
        if record is None:
            problems.append(
                LogProblem(f"event {entry.event_id} is gone (removed after it was logged)", entry.index)
            )
        elif event_leaf(record.hash) != entry.leaf:
            problems.append(
                LogProblem(
                    f"event #{record.sequence} ({record.event_id}) changed after it was logged",
                    entry.index,
                    record.trace_id,
                )
            )
    return problems, dense


def _root_problems(
    entries: Sequence[LogEntry], dense: int, opened: Sequence[tuple[str, Checkpoint]]
) -> list[LogProblem]:
    """Each checkpoint's root against the tree the stored leaves give at its size."""
    checkpoints = sorted({c.size: c for _, c in opened}.values(), key=lambda c: c.size)
    roots = roots_at((e.leaf for e in entries[:dense]), [c.size for c in checkpoints])
    problems: list[LogProblem] = []
    last_good = 0
    for checkpoint in checkpoints:
        if checkpoint.size > dense:
            problems.append(
                LogProblem(
                    f"checkpoint of tree size {checkpoint.size} (signed {checkpoint.timestamp}) "
                    f"covers entries {dense} to {checkpoint.size - 1} the log no longer holds (removed)",
                    dense,
                )
            )
        elif roots[checkpoint.size] != checkpoint.root:
            problems.append(
                LogProblem(
                    f"entries {last_good} to {checkpoint.size - 1} were rewritten: the tree of "
                    f"{checkpoint.size} entries no longer has the root signed {checkpoint.timestamp}",
                    last_good,
                )
            )
        else:
            last_good = checkpoint.size
    return problems


def _backdated(
    records: Sequence[AuditRecord],
    index_of: Mapping[str, int],
    opened: Sequence[tuple[str, Checkpoint]],
    grace: timedelta,
) -> list[LogProblem]:
    """Events a checkpoint signed after their time (plus ``grace``) did not include."""
    checkpoints = sorted({c.size: c for _, c in opened}.values(), key=lambda c: c.size)
    sizes = [c.size for c in checkpoints]
    latest_before: list[datetime] = []  # the latest signing time among checkpoints up to each size
    for checkpoint in checkpoints:
        signed = datetime.strptime(checkpoint.timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        latest_before.append(max(signed, latest_before[-1]) if latest_before else signed)
    problems: list[LogProblem] = []
    for record in records:
        index = index_of.get(record.event_id)
        # The checkpoints that do not include this event: size <= its index (all, if unsequenced).
        count = len(sizes) if index is None else bisect.bisect_right(sizes, index)
        if not count:
            continue
        try:
            claimed = datetime.fromisoformat(record.timestamp)
        except ValueError:
            continue  # the chain check reports an edited event
        if latest_before[count - 1] > claimed + grace:
            problems.append(
                LogProblem(
                    f"event #{record.sequence} ({record.event_id}) claims {record.timestamp}, but the "
                    f"checkpoint signed {latest_before[count - 1]:%Y-%m-%dT%H:%M:%SZ} did not include it "
                    "(inserted in the past)",
                    index,
                    record.trace_id,
                )
            )
    return problems


def verify_log(
    records: Sequence[AuditRecord],
    entries: Sequence[LogEntry],
    notes: Sequence[WitnessedNote],
    keys: Sequence[VerifierKey],
    *,
    origin: str | None = None,
    grace: timedelta = DEFAULT_GRACE,
) -> list[LogProblem]:
    """Problems between the stored events, their log entries and the witnessed checkpoints.

    ``records`` are every stored event, ``entries`` the log by index, ``notes`` every
    checkpoint every witness holds, ``keys`` the log's trusted public keys. Empty when all agree
    (and when no witness holds anything: then only the log's own consistency is checked).
    """
    opened, problems = _open_all(notes, keys, origin)
    problems += _forks(opened)
    by_id = {r.event_id: r for r in records}
    entry_problems, dense = _entry_problems(entries, by_id)
    problems += entry_problems
    problems += _root_problems(entries, dense, opened)
    index_of = {e.event_id: e.index for e in entries}
    problems += _backdated(records, index_of, opened, grace)
    return problems
