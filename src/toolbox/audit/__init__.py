"""The audit trail: ordered, chained, redacted events in memory, files or databases."""

from typing import TYPE_CHECKING

from toolbox.audit._events import AuditEvent, AuditRecord, EventType
from toolbox.audit._fallback import FallbackReplay
from toolbox.audit._fanout import FanOutSink
from toolbox.audit._redaction import PayloadMode, Redaction
from toolbox.audit._sink import AuditQuery, AuditSink, AuditSinkError
from toolbox.audit._trail import AuditMode, AuditTrail
from toolbox.audit._verify import ChainProblem, TraceHeads, verify_chain, verify_heads
from toolbox.audit.sinks._jsonl import JsonlSink
from toolbox.audit.sinks._memory import MemorySink

if TYPE_CHECKING:
    # Typed for mypy and editors; at run time `__getattr__` imports them on first use.
    from toolbox.audit.sinks._otel import OtelHook
    from toolbox.audit.sinks._postgres import PostgresSink
    from toolbox.audit.sinks._sqlite import SqliteSink

__all__ = [
    "AuditEvent",
    "AuditMode",
    "AuditQuery",
    "AuditRecord",
    "AuditSink",
    "AuditSinkError",
    "AuditTrail",
    "ChainProblem",
    "EventType",
    "FallbackReplay",
    "FanOutSink",
    "JsonlSink",
    "MemorySink",
    "OtelHook",
    "PayloadMode",
    "PostgresSink",
    "Redaction",
    "SqliteSink",
    "TraceHeads",
    "verify_chain",
    "verify_heads",
]


def __getattr__(name: str) -> object:
    # The SQL sinks need SQLAlchemy (and psycopg): import them only when asked for.
    if name == "SqliteSink":
        from toolbox.audit.sinks._sqlite import SqliteSink

        return SqliteSink
    if name == "OtelHook":  # OpenTelemetry's API is an optional dependency
        from toolbox.audit.sinks._otel import OtelHook

        return OtelHook
    if name == "PostgresSink":
        from toolbox.audit.sinks._postgres import PostgresSink

        return PostgresSink
    raise AttributeError(f"module 'toolbox.audit' has no attribute {name!r}")
