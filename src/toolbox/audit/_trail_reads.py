"""`TrailReads`: reading an audit trail back, scoped by tenant unless the reader is an auditor."""

from __future__ import annotations

from datetime import datetime

from toolbox.audit._events import AuditRecord
from toolbox.audit._sink import AuditQuery, AuditSink
from toolbox.audit._verify import ChainProblem, TraceHeads, verify_chain, verify_heads
from toolbox.foundations._context import ExecutionContext

__all__ = ["TrailReads"]


class TrailReads:
    """What `toolbox.audit.AuditTrail` answers about stored events: read-back, queries, verification."""

    #: Where the events are stored.
    sink: AuditSink
    #: Principals with one of these roles read every tenant's events.
    auditor_roles: frozenset[str]

    def _is_auditor(self, context: ExecutionContext) -> bool:
        return bool(self.auditor_roles & context.roles)

    def read_trace(self, trace_id: str, *, context: ExecutionContext) -> list[AuditRecord]:
        """The events of ``trace_id`` in order, limited to ``context``'s tenant unless it is an auditor."""
        records = self.sink.read_trace(trace_id)
        if self._is_auditor(context):
            return records
        return [r for r in records if r.tenant == context.tenant]

    def query(
        self,
        *,
        context: ExecutionContext,
        tool: str | None = None,
        principal: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 1000,
        parent_run_id: str | None = None,
    ) -> list[AuditRecord]:
        """Events by tool, principal, status, time range and delegating run; scoped like `read_trace`."""
        tenant = None if self._is_auditor(context) else context.tenant
        return self.sink.query(
            AuditQuery(tenant, tool, principal, status, since, until, limit, parent_run_id)
        )

    def verify(self, trace_id: str, *, context: ExecutionContext) -> list[ChainProblem]:
        """Chain problems of ``trace_id`` (auditors only: verification needs every event).

        With a sink that keeps trace heads (SQLite, PostgreSQL), removed last events
        and a removed trace are problems too.
        """
        if not self._is_auditor(context):
            raise PermissionError("verifying a trace needs an auditor role")
        records = self.sink.read_trace(trace_id)
        problems = verify_chain(records)
        if isinstance(self.sink, TraceHeads):
            problems += verify_heads(records, self.sink.trace_heads(trace_id), trace_id=trace_id)
        return problems
