"""Held calls: a call as a tuple of plain values, for a sink that holds calls (`MemorySink.hold_call`).

An `Opening` or `Closing` object kept by a sink is walked by every full
collection for as long as the sink keeps it; a held call (`held_call`, and
`held_response` for its response) holds strings, numbers, None and tuples of
them only, so the garbage collector stops tracking it at its first pass. Until
then, a young collection walks each of its items: the fewer, the cheaper. An
opening is ``(subject key, context, intent text, timestamp, *argument values)``,
its response ``(opening, ended, duration)``: what each starts with (an int, a
tuple) tells them apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias

from toolbox.audit._batch import CallContext, CallSubject
from toolbox.audit._events import AuditEvent, EventType

__all__ = [
    "HeldContext",
    "held_call",
    "held_context",
    "held_events",
    "held_key",
    "held_response",
    "held_trace_id",
]

#: A context's fields in a held call: run, correlation, tenant, principal, parent run, credential.
HeldContext: TypeAlias = tuple[str, str, str, str, str | None, str | None]
#: The index of a held opening's first argument value (the fields before it: `held_call`'s).
_FIRST_VALUE = 4


def held_context(context: CallContext) -> HeldContext:
    """What every held call in ``context`` repeats, in `held_call`'s order: take it once per context.

    A context is immutable, and reading its fields costs more than the rest of a held call.
    """
    return (
        context.run_id,
        context.correlation_id,
        context.tenant,
        context.principal,
        context.parent_run_id,
        context.credential,
    )


def held_call(
    subject_key: int, context: HeldContext, intent_text: str, timestamp: float, values: Iterable[Any] = ()
) -> tuple[Any, ...]:
    """A call's opening as a tuple of plain values, for a sink that holds calls (`held_response` closes it).

    ``context`` is the call's `held_context`, kept as that one tuple. Plain values only (the
    argument values last, in the order of the names the sink registered with
    ``subject_key``), so the garbage collector stops tracking the tuple at its
    first pass when the arguments are scalars: a held call costs later
    collections nothing, where an `Opening` object is walked by every full
    collection for as long as the sink keeps it. The by-name route holds its
    calls this way.
    """
    # The context's fields as one shared tuple: a tuple the collector walks is one item longer per value.
    # An opening starts with its key (an int), a response with its opening (a tuple): no kind field.
    return (subject_key, context, intent_text, timestamp, *values)


def _opening_of(held: tuple[Any, ...]) -> tuple[Any, ...]:
    """The held opening ``held`` is, or names (a response)."""
    return held if type(held[0]) is int else held[0]


def held_key(held: tuple[Any, ...]) -> int:
    """The subject key of a held call (its opening or its response)."""
    key: int = _opening_of(held)[0]
    return key


def held_trace_id(held: tuple[Any, ...]) -> str:
    """The trace of a held call (its opening or its response)."""
    trace_id: str = _opening_of(held)[1][0]
    return trace_id


def held_response(opening: tuple[Any, ...], ended: float, duration: float) -> tuple[Any, ...]:
    """The response of a held call that succeeded at its first attempt: it names its held opening."""
    return (opening, ended, duration)


def held_events(held: tuple[Any, ...], subject: CallSubject, names: tuple[str, ...]) -> list[AuditEvent]:
    """The events of a held call (`held_call`, `held_response`): its `Opening`'s, or its `Closing`'s."""
    response = type(held[0]) is not int
    if response:
        opening, timestamp, duration = held
        context, text = opening[1:3]
    else:
        _, context, text, timestamp = held[:_FIRST_VALUE]
    run_id, correlation_id, tenant, principal, parent_run_id, credential = context
    common = {
        "trace_id": run_id,
        "correlation_id": correlation_id,
        "name": subject.name,
        "tool": subject.tool,
        "operation": subject.operation,
        "risk": subject.risk,
        "effect": subject.effect,
        "intent_kind": subject.intent_kind or None,
        "intent_text": text or None,
        "tenant": tenant,
        "principal": principal,
        "parent_run_id": parent_run_id,
        "credential": credential,
    }
    if response:
        made = [
            AuditEvent(
                EventType.INVOCATION_RESPONSE,
                status="SUCCESS",
                reason_code=None,
                duration=duration,
                attempt=1,
                **common,
            )
        ]
    else:
        arguments = dict(zip(names, held[_FIRST_VALUE:], strict=True))
        summary, digest = subject.redaction.payload_fields(arguments)
        made = [
            AuditEvent(EventType.INTENT_DECLARED, payload_summary=summary, payload_hash=digest, **common),
            AuditEvent(EventType.GOVERNANCE_DECISION, decision="ALLOW", rule_ids=(), **common),
            AuditEvent(EventType.INVOCATION_REQUEST, attempt=1, **common),
        ]
    for event in made:
        event.timestamp = timestamp
    return made
