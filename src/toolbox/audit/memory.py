"""`MemorySink`: events in a list, for tests and short-lived programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

from toolbox.audit.events import AuditEvent, AuditRecord
from toolbox.audit.filtering import select
from toolbox.audit.sink import AuditQuery, ChainState, chain_rows

__all__ = ["MemorySink"]


@final
class MemorySink:
    """Keeps every event in memory, chained per trace."""

    __slots__ = ("_chain", "_rows")

    def __init__(self) -> None:
        # Rows are validated into AuditRecord when read: writes stay cheap.
        self._rows: list[dict[str, Any]] = []
        self._chain = ChainState()

    def append(self, events: Sequence[AuditEvent]) -> None:
        """Store ``events`` in order."""
        with self._chain.lock:
            rows, heads = chain_rows(events, self._chain.head)
            self._rows.extend(rows)
            for trace_id, (sequence, digest) in heads.items():
                self._chain.set_head(trace_id, sequence, digest)

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """Every event of ``trace_id`` in sequence order."""
        rows = sorted((r for r in list(self._rows) if r["trace_id"] == trace_id), key=lambda r: r["sequence"])
        return [AuditRecord.model_validate(row) for row in rows]

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Events matching ``query``."""
        return select(self.records, query)

    @property
    def records(self) -> list[AuditRecord]:
        """Every stored event, in write order."""
        return [AuditRecord.model_validate(row) for row in list(self._rows)]

    def close(self) -> None:
        """Nothing to release."""
