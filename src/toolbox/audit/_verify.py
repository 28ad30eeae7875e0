"""Checking a trace's hash chain: edited, removed or reordered events are found.

The chain alone cannot show that a trace's *last* events, or a whole trace,
were removed: what is left still chains. A store that keeps per-trace heads
(the SQL sinks' ``audit_trace_heads``: last sequence and last hash, moved in
the transaction that stores the events) lets `verify_heads` find both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, final, runtime_checkable

from toolbox.audit._events import GENESIS_HASH, AuditRecord, chain_hash

__all__ = ["ChainProblem", "TraceHeads", "verify_chain", "verify_heads"]


@final
@dataclass(frozen=True)
class ChainProblem:
    """What is wrong, and where."""

    trace_id: str
    sequence: int
    event_id: str
    problem: str

    def __str__(self) -> str:
        return f"trace {self.trace_id} event #{self.sequence} ({self.event_id}): {self.problem}"


def verify_chain(records: Sequence[AuditRecord]) -> list[ChainProblem]:
    """Problems in the chains of ``records`` (any order, several traces); empty when intact."""
    problems: list[ChainProblem] = []
    by_trace: dict[str, list[AuditRecord]] = {}
    for record in records:
        by_trace.setdefault(record.trace_id, []).append(record)
    for trace_id, stored in by_trace.items():
        expected_sequence, expected_previous = 1, GENESIS_HASH
        for record in sorted(stored, key=lambda r: r.sequence):
            where = (trace_id, record.sequence, record.event_id)
            if record.sequence != expected_sequence:
                gap = "missing" if record.sequence > expected_sequence else "duplicated"
                problems.append(
                    ChainProblem(*where, f"sequence {expected_sequence} is {gap} (removed or reordered)")
                )
            if record.previous_hash != expected_previous:
                problems.append(
                    ChainProblem(*where, "does not follow the previous event (removed or reordered)")
                )
            if chain_hash(record.storage_dict()) != record.hash:
                problems.append(ChainProblem(*where, "content does not match its hash (edited)"))
            expected_sequence, expected_previous = record.sequence + 1, record.hash
    return problems


@runtime_checkable
class TraceHeads(Protocol):
    """A store that keeps each trace's head: its last sequence number and last hash."""

    def trace_heads(self, trace_id: str | None = None) -> dict[str, tuple[int, str]]:
        """The head of ``trace_id``, or of every trace."""


def verify_heads(
    records: Sequence[AuditRecord], heads: Mapping[str, tuple[int, str]], *, trace_id: str | None = None
) -> list[ChainProblem]:
    """Problems between the stored events and their traces' heads; empty when they agree.

    ``records`` are the events of ``trace_id`` (or of every trace when it is
    None) and ``heads`` the heads the store holds for them. Finds events
    removed from the end of a trace, a removed trace (a head without events),
    a replaced last event, and events or traces the heads do not account for.
    """
    last: dict[str, AuditRecord] = {}
    for record in records:
        seen = last.get(record.trace_id)
        if seen is None or record.sequence > seen.sequence:
            last[record.trace_id] = record
    problems: list[ChainProblem] = []
    for trace, (sequence, digest) in sorted(heads.items()):
        if trace_id is not None and trace != trace_id:
            continue
        final_record = last.get(trace)
        if final_record is None:
            problems.append(
                ChainProblem(trace, sequence, "-", f"trace removed: its head records {sequence} event(s)")
            )
        elif final_record.sequence < sequence:
            missing = (
                f"event {sequence}"
                if final_record.sequence + 1 == sequence
                else (f"events {final_record.sequence + 1} to {sequence}")
            )
            problems.append(
                ChainProblem(
                    trace, sequence, "-", f"{missing} removed from the end (the trace head records them)"
                )
            )
        elif final_record.sequence > sequence:
            problems.append(
                ChainProblem(
                    trace,
                    final_record.sequence,
                    final_record.event_id,
                    f"not recorded by the trace head (it ends at {sequence}): stored behind the sink's back",
                )
            )
        elif final_record.hash != digest:
            problems.append(
                ChainProblem(
                    trace,
                    sequence,
                    final_record.event_id,
                    "is not the last event the trace head records (replaced)",
                )
            )
    for trace, record in sorted(last.items()):
        if trace not in heads:
            problems.append(
                ChainProblem(
                    trace, record.sequence, record.event_id, "trace has no head (the heads were edited)"
                )
            )
    return problems
