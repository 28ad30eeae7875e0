"""`MemorySink`: events in a list, for tests and short-lived programs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, final

from toolbox.audit.batch import LAZY_BATCHES, LazyBatch
from toolbox.audit.events import AuditEvent, AuditRecord
from toolbox.audit.filtering import select
from toolbox.audit.sink import AuditQuery, ChainState, chain_dicts

__all__ = ["MemorySink"]


@final
class MemorySink:
    """Keeps every event in memory, chained per trace.

    An append only queues the batch; batches are chained, in append order,
    when the sink is next read. Nothing can observe the difference: the
    chain a reader sees is the one an eager sink would have written.
    """

    __slots__ = ("_chain", "_pending", "_rows", "hold")

    def __init__(self) -> None:
        # Rows are validated into AuditRecord when read: writes stay cheap.
        self._rows: list[dict[str, Any]] = []
        # Lazy batches as given (they are immutable); any other batch as storage rows made now.
        self._pending: list[LazyBatch | list[dict[str, Any]]] = []
        self._chain = ChainState()
        #: Keep a lazy batch as it is (cannot fail): what the audit trail calls for each call.
        self.hold: Callable[[LazyBatch], None] = self._pending.append

    def append(self, events: Sequence[AuditEvent]) -> None:
        """Store ``events`` in order."""
        # list.append is atomic: no lock on the write path; _settle takes batches in this order.
        # (A type test, not isinstance: LazyBatch is a Sequence, and ABC checks are slow.)
        if type(events) in LAZY_BATCHES:
            self._pending.append(events)  # type: ignore[arg-type]
        else:
            self._pending.append([e.as_dict() for e in events])

    def _settle(self) -> None:
        """Chain the batches appended since the last read."""
        with self._chain.lock:
            count = len(self._pending)
            batches = self._pending[:count]
            del self._pending[:count]
            for batch in batches:
                rows = [e.as_dict() for e in batch] if isinstance(batch, LazyBatch) else batch
                chained, heads = chain_dicts(rows, self._chain.head)
                self._rows.extend(chained)
                for trace_id, (sequence, digest) in heads.items():
                    self._chain.set_head(trace_id, sequence, digest)

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """Every event of ``trace_id`` in sequence order."""
        self._settle()
        rows = sorted((r for r in list(self._rows) if r["trace_id"] == trace_id), key=lambda r: r["sequence"])
        return [AuditRecord.model_validate(row) for row in rows]

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Events matching ``query``."""
        return select(self.records, query)

    @property
    def records(self) -> list[AuditRecord]:
        """Every stored event, in write order."""
        self._settle()
        return [AuditRecord.model_validate(row) for row in list(self._rows)]

    def close(self) -> None:
        """Nothing to release."""
