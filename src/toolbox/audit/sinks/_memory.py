"""`MemorySink`: events in a list, for tests and short-lived programs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, final

from toolbox.audit._batch import LAZY_BATCHES, CallSubject, Closing, LazyBatch, Opening
from toolbox.audit._events import AuditEvent, AuditRecord, EventType, storable_text
from toolbox.audit._filtering import select
from toolbox.audit._held import held_events, held_key, held_trace_id
from toolbox.audit._sink import AuditQuery, ChainState, chain_dicts

__all__ = ["MemorySink"]

LOGGER = logging.getLogger("toolbox.audit")
UNSTORABLE = "AUDIT_EVENT_UNSTORABLE"


@final
class MemorySink:
    """Keeps every event in memory, chained per trace.

    An append only queues the batch; batches are chained, in append order,
    when the sink is next read. Nothing can observe the difference: the
    chain a reader sees is the one an eager sink would have written.

    A batch whose events cannot be made or stored (a bug, or a value no
    serialiser accepts) never costs another batch: it is replaced by one
    ``SYSTEM_ERROR`` event with reason ``AUDIT_EVENT_UNSTORABLE`` in its
    trace, and logged.
    """

    __slots__ = ("_chain", "_keys", "_pending", "_rows", "_subjects", "hold", "hold_call")
    #: ``hold`` reads an `Opening` held a second time, after `Opening.close_in_place`, as its response.
    holds_openings_twice = True

    def __init__(self) -> None:
        # Rows are chained and validated into AuditRecord when the sink is read: writes stay cheap.
        self._rows: list[AuditRecord] = []
        # Lazy batches and held calls as given (they are immutable); any other batch as rows made now.
        self._pending: list[LazyBatch | tuple[Any, ...] | list[dict[str, Any]]] = []
        self._chain = ChainState()
        # The subjects (and argument names) held calls name by key (a held call is plain values).
        self._subjects: list[tuple[CallSubject, tuple[str, ...]]] = []
        self._keys: dict[tuple[CallSubject, tuple[str, ...]], int] = {}
        #: Keep a lazy batch as it is (cannot fail): what the audit trail calls for each call. An
        #: `Opening` held again after `Opening.close_in_place` is read as the call's response.
        self.hold: Callable[[LazyBatch], None] = self._pending.append
        #: Keep a held call (`toolbox.audit._held.held_call`), the by-name route's form: a tuple the
        #: garbage collector stops tracking, so a long history costs its collections nothing.
        self.hold_call: Callable[[tuple[Any, ...]], None] = self._pending.append

    def subject_key(self, subject: CallSubject, names: tuple[str, ...]) -> int:
        """The key held calls name ``subject`` by, their argument values following in ``names``' order.

        Registered on first use and kept for good (one per compiled by-name route).
        """
        entry = (subject, names)
        with self._chain.lock:
            key = self._keys.get(entry)
            if key is None:
                key = self._keys[entry] = len(self._subjects)
                self._subjects.append(entry)
            return key

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
                try:
                    records = self._chained(batch)
                except Exception as exc:  # noqa: BLE001 - one bad batch must not cost the others
                    LOGGER.error(
                        "audit: a batch could not be stored (%s); recorded as %s in its trace",
                        type(exc).__name__,
                        UNSTORABLE,
                    )
                    records = self._chained([_unstorable(batch).as_dict()])
                self._rows.extend(records)

    def _chained(self, batch: LazyBatch | tuple[Any, ...] | list[dict[str, Any]]) -> list[AuditRecord]:
        """``batch`` chained and validated; the heads move only when all of it is valid."""
        rows: list[dict[str, Any]]
        if type(batch) is tuple:
            rows = [e.as_dict() for e in held_events(batch, *self._subjects[held_key(batch)])]
        elif type(batch) is Opening and batch.held_by is self and batch.ended is not None:
            # Held a second time, closed in place: this copy stands for the call's response.
            rows = [batch.response().as_dict()]
        elif isinstance(batch, LazyBatch):
            if type(batch) is Opening:
                batch.held_by = self  # marked first: the next copy is the response even if this fails
            rows = [e.as_dict() for e in batch]
        else:
            rows = batch  # type: ignore[assignment]  # rows made at append
        chained, heads = chain_dicts(rows, self._chain.head)
        records = [AuditRecord.model_validate(row) for row in chained]
        for trace_id, (sequence, digest) in heads.items():
            self._chain.set_head(trace_id, sequence, digest)
        return records

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """Every event of ``trace_id`` in sequence order."""
        self._settle()
        return sorted((r for r in list(self._rows) if r.trace_id == trace_id), key=lambda r: r.sequence)

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Events matching ``query``."""
        return select(self.records, query)

    @property
    def records(self) -> list[AuditRecord]:
        """Every stored event, in write order."""
        self._settle()
        return list(self._rows)

    def close(self) -> None:
        """Nothing to release."""


def _unstorable(batch: LazyBatch | tuple[Any, ...] | list[dict[str, Any]]) -> AuditEvent:
    """The event that stands for a batch that could not be stored, in the batch's trace."""
    if type(batch) is tuple:
        trace_id = held_trace_id(batch)
    elif isinstance(batch, Opening):
        trace_id = batch.context.run_id
    elif isinstance(batch, Closing):
        trace_id = batch.opening.context.run_id
    elif isinstance(batch, list) and batch:
        trace_id = str(batch[0].get("trace_id", "unattributed"))
    else:
        trace_id = "unattributed"
    return AuditEvent(
        EventType.SYSTEM_ERROR, trace_id=storable_text(trace_id), reason_code=UNSTORABLE, decision="ERROR"
    )
