"""`OtelHook`: one OpenTelemetry span per governed invocation, through the API only.

::

    from opentelemetry import trace
    from toolbox import Governance
    from toolbox.audit.sinks._otel import OtelHook

    governance = Governance(audit_hooks=[OtelHook()])   # the global tracer provider
    governance = Governance(audit_hooks=[OtelHook(tracer=provider.get_tracer("app"))])

Only ``opentelemetry-api`` is imported (``opentelemetry.trace``); the
application chooses and configures the SDK and its exporters. Without a
configured provider the API's no-op tracer makes this hook free.

Each span follows the OpenTelemetry semantic conventions for generative AI
(an ``execute_tool`` span): it is named ``execute_tool <wire name>``
(``execute_tool calculator__evaluate``, the name the model called), of kind
INTERNAL, with ``gen_ai.operation.name`` = ``execute_tool``,
``gen_ai.tool.name`` (the wire name), ``gen_ai.tool.type`` = ``function``,
``gen_ai.tool.description`` (the operation's summary, when it has one),
``gen_ai.tool.call.id`` (the model's call id, when the door was given one) and,
for an error, ``error.type`` (the reason code, else the error code, else the
status). The opt-in ``gen_ai.tool.call.arguments`` and ``.result`` are never
recorded. It starts when the operation was first dispatched (or, when it never
was, when the intent was declared), ends when the result is final, and carries
the audit event's fields as ``toolbox.*`` attributes: tool, operation, name,
status, decision, reason_code, error_code, rule_ids, effect, risk,
intent_kind, intent_text, tenant, principal, trace_id (the context's run id),
parent_run_id (for a delegated run), correlation_id, attempts and
payload_hash. Never the arguments, headers, bodies or messages: the payload
appears only as the hash of its redacted form (`Redaction`). Statuses other
than SUCCESS and APPROVAL_REQUIRED set the span status to ERROR, described by
their codes only.

The hook never refuses a call (``on_request`` returns None) and never lets a
tracing failure reach the caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

from toolbox.audit._redaction import Redaction
from toolbox.audit._refusals import decision_of
from toolbox.foundations._wire_names import to_wire_name
from toolbox.pipeline._result import ToolResult

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from opentelemetry.util.types import AttributeValue

    from toolbox.pipeline._invocation import Invocation

__all__ = ["OtelHook"]

LOGGER = logging.getLogger("toolbox.audit")
PREFIX = "toolbox."
#: The GenAI semantic conventions' operation name (and span name prefix) of a tool execution.
EXECUTE_TOOL = "execute_tool"
INSTRUMENTATION_NAME = "toolbox"
INSTALL_HINT = (
    "OtelHook needs the OpenTelemetry API. Please install it: "
    'pip install "toolbox-registry[otel]" (or pip install opentelemetry-api)'
)


def _nanoseconds(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _tool_name(invocation: Invocation) -> str:
    """The name the model calls the operation by: its wire name (``calculator__evaluate``)."""
    descriptor = invocation.descriptor
    if descriptor is None:
        return to_wire_name(f"{invocation.tool}.{invocation.operation}")
    return to_wire_name(descriptor.offered_name(invocation.operation))


def _gen_ai(invocation: Invocation, result: ToolResult) -> dict[str, AttributeValue]:
    """The GenAI semantic conventions' attributes of an ``execute_tool`` span."""
    found: dict[str, AttributeValue] = {
        "gen_ai.operation.name": EXECUTE_TOOL,
        "gen_ai.tool.name": _tool_name(invocation),
        "gen_ai.tool.type": "function",
    }
    descriptor = invocation.descriptor
    if descriptor is not None:
        summary = next((op.summary for op in descriptor.operations if op.name == invocation.operation), "")
        if summary:
            found["gen_ai.tool.description"] = summary
    if invocation.call_id is not None:
        found["gen_ai.tool.call.id"] = invocation.call_id
    if result.is_error:
        found["error.type"] = result.reason_code or result.error_code or result.status.value
    return found


@final
class OtelHook:
    """An `AuditHook` that records one span per invocation; pass it in ``Governance(audit_hooks=[...])``.

    Args:
        tracer: the tracer to use (default: ``opentelemetry.trace.get_tracer("toolbox")``,
            i.e. the globally configured provider, resolved lazily by the API).
        redaction: how the payload hash is computed; the audit trail's settings
            give the same hash as its events (default: `Redaction()`).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed.
    """

    __slots__ = ("_internal", "_redaction", "_status_code", "_status_type", "_tracer")

    def __init__(self, tracer: Tracer | None = None, redaction: Redaction | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        self._tracer: Tracer = tracer if tracer is not None else trace.get_tracer(INSTRUMENTATION_NAME)
        self._redaction = redaction or Redaction()
        self._status_type = trace.Status
        self._status_code = trace.StatusCode
        self._internal = trace.SpanKind.INTERNAL

    def on_request(self, invocation: Invocation) -> ToolResult | None:
        """Tracing never refuses a call."""
        return None

    def on_response(self, invocation: Invocation, result: ToolResult) -> None:
        """Record the invocation's span; a tracing failure is logged, never raised."""
        try:
            self._record(invocation, result)
        except Exception as exc:  # noqa: BLE001 - tracing must not break a call that already ran
            LOGGER.warning("OpenTelemetry span not recorded (%s)", type(exc).__name__)

    def attributes(self, invocation: Invocation, result: ToolResult) -> dict[str, AttributeValue]:
        """The span attributes for ``invocation`` and its ``result`` (None values left out)."""
        ctx = invocation.context
        record = invocation.record
        descriptor = invocation.descriptor
        arguments = invocation.arguments if isinstance(invocation.arguments, Mapping) else {}
        _, payload_hash = self._redaction.payload_fields(arguments)
        rules = [w.split(":", 1)[0] for w in invocation.warnings]
        rules += invocation.authorization_rules  # the policies that decided, as the audit event has them
        if result.rule and result.rule not in rules:
            rules.append(result.rule)
        values: dict[str, Any] = {
            "tool": invocation.tool,
            "operation": invocation.operation,
            "name": invocation.name,
            "status": result.status.value,
            "decision": decision_of(result),
            "reason_code": result.reason_code,
            "error_code": result.error_code,
            "rule_ids": rules or None,
            "effect": invocation.effect.value,
            "risk": descriptor.risk.value if descriptor is not None else None,
            "intent_kind": record.intent_kind or None,
            "intent_text": record.intent_text or None,
            "tenant": ctx.tenant,
            "principal": ctx.principal,
            "trace_id": ctx.run_id,
            "parent_run_id": ctx.parent_run_id,
            "correlation_id": ctx.correlation_id,
            "attempts": record.attempts,
            "payload_hash": payload_hash,
        }
        attributes: dict[str, AttributeValue] = {
            PREFIX + key: value for key, value in values.items() if value is not None
        }
        attributes.update(_gen_ai(invocation, result))
        return attributes

    def _record(self, invocation: Invocation, result: ToolResult) -> None:
        record = invocation.record
        began = record.started_at if record.started_at is not None else record.declared_at
        span = self._tracer.start_span(
            f"{EXECUTE_TOOL} {_tool_name(invocation)}",
            kind=self._internal,
            start_time=_nanoseconds(began),
            attributes=self.attributes(invocation, result),
        )
        try:
            if result.is_error:
                code = result.reason_code or result.error_code
                description = f"{result.status.value}: {code}" if code else result.status.value
                span.set_status(self._status_type(self._status_code.ERROR, description))
        finally:
            span.end(end_time=time.time_ns())
