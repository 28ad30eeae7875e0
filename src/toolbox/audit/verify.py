"""Checking a trace's hash chain: edited, removed or reordered events are found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from toolbox.audit.events import GENESIS_HASH, AuditRecord, chain_hash

__all__ = ["ChainProblem", "verify_chain"]


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
