"""`FanOutSink`: write every batch to several sinks; read from the first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from toolbox.audit._events import AuditEvent, AuditRecord
from toolbox.audit._sink import AuditQuery, AuditSink, AuditSinkError

__all__ = ["FanOutSink"]


@final
class FanOutSink:
    """Every sink must accept a batch for the write to count; each keeps its own chain.

    A failure in any sink raises (the others may already hold the batch: the
    audit trail's fallback file and replay exist for that).
    """

    __slots__ = ("_sinks",)

    def __init__(self, sinks: Sequence[AuditSink]) -> None:
        if not sinks:
            raise ValueError("FanOutSink needs at least one sink")
        self._sinks = tuple(sinks)

    def append(self, events: Sequence[AuditEvent]) -> None:
        """Write ``events`` to every sink, in order."""
        failed = []
        for sink in self._sinks:
            try:
                sink.append(events)
            except Exception as exc:  # noqa: BLE001 - try every sink, then report all failures
                failed.append(f"{type(sink).__name__}: {type(exc).__name__}")
        if failed:
            raise AuditSinkError(f"audit write failed in {len(failed)} sink(s): {'; '.join(failed)}")

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """From the first sink."""
        return self._sinks[0].read_trace(trace_id)

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """From the first sink."""
        return self._sinks[0].query(query)

    def close(self) -> None:
        """Close every sink."""
        for sink in self._sinks:
            sink.close()
