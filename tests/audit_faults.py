"""A sink that fails on demand, for the audit trail's fault tests."""

from __future__ import annotations

from typing import Any

from toolbox.audit import AuditSinkError, MemorySink


class FlakySink:
    """A MemorySink without ``hold`` whose appends fail while `failing` is set.

    With `fail_after` set, the batches after that many fail too.
    """

    def __init__(self) -> None:
        self.inner = MemorySink()
        self.failing = False
        self.fail_after: int | None = None
        self.batches = 0
        self.closed = False

    def append(self, events: Any) -> None:
        self.batches += 1
        if self.failing or (self.fail_after is not None and self.batches > self.fail_after):
            raise AuditSinkError("disk full")
        self.inner.append(events)

    def read_trace(self, trace_id: str) -> Any:
        return self.inner.read_trace(trace_id)

    def query(self, query: Any) -> Any:
        return self.inner.query(query)

    def close(self) -> None:
        self.closed = True

    @property
    def records(self) -> Any:
        """Every stored event."""
        return self.inner.records
