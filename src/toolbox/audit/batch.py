"""Audit batches built lazily: a call is captured once, its events are made when a sink reads them.

A governed call stores two batches: its `Opening` (intent declared,
governance decision, invocation request) before the operation runs, and its
`Closing` (the response) after. Making an `AuditEvent` costs microseconds (an
id, a redacted payload and its hash, 25 fields), so a batch keeps only
references to immutable values and makes its events the first time it is
read. A sink that writes at once reads it in ``append`` (JSONL its events, the
SQL sinks its storage rows, made without event objects); the memory sink reads
it when it is queried.

The events (or rows) of a batch are made once, under a lock: every sink of a
fan-out stores the same event ids.

A sink that holds calls (`MemorySink.hold_call`) takes the by-name route's
calls as *held calls* instead (`held_call`): tuples of plain values, which the
garbage collector stops tracking, where `Opening` and `Closing` objects stay
tracked for as long as the sink keeps them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from decimal import Decimal
from typing import TYPE_CHECKING, Any, final, overload
from uuid import UUID

from toolbox.audit.events import (
    GENESIS_HASH,
    AuditEvent,
    EventType,
    iso_timestamp,
    new_event_id,
    storable_text,
)

if TYPE_CHECKING:
    from toolbox.audit.redaction import Redaction
    from toolbox.context import ExecutionContext

__all__ = [
    "HELD_OPENING",
    "HELD_RESPONSE",
    "IMMUTABLE_TYPES",
    "LAZY_BATCHES",
    "CallSubject",
    "Closing",
    "LazyBatch",
    "Opening",
    "call_event",
    "held_call",
    "held_events",
    "held_response",
    "immutable_copy",
]

_BUILD_LOCK = threading.Lock()

#: Values of these types cannot change once a call has them: they may be redacted later.
IMMUTABLE_TYPES = frozenset(
    {str, int, float, bool, bytes, type(None), Decimal, datetime, date, dt_time, timedelta, UUID}
)


def immutable_copy(arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """A shallow copy of ``arguments`` when every value is of an `IMMUTABLE_TYPES` type, else None."""
    for value in arguments.values():
        if type(value) not in IMMUTABLE_TYPES:
            return None
    return dict(arguments)


@final
class CallSubject:
    """What every event of one operation repeats, and how its arguments are redacted.

    Immutable; the trail keeps one per name, operation and intent kind (`AuditTrail.subject_of`).
    """

    __slots__ = ("effect", "intent_kind", "name", "operation", "redaction", "risk", "tool")

    def __init__(  # noqa: PLR0917 - positional on purpose: built on the hot path
        self,
        name: str,
        tool: str,
        operation: str,
        risk: str | None,
        effect: str | None,
        intent_kind: str,
        redaction: Redaction,
    ) -> None:
        self.name = name
        self.tool = tool
        self.operation = operation
        self.risk = risk
        self.effect = effect
        self.intent_kind = intent_kind
        self.redaction = redaction


def call_event(
    kind: EventType,
    subject: CallSubject,
    context: ExecutionContext,
    intent_text: str,
    timestamp: float,
    **fields: Any,
) -> AuditEvent:
    """One event of the call ``subject`` describes, in ``context``, at ``timestamp``."""
    event = AuditEvent(
        kind,
        trace_id=context.run_id,
        correlation_id=context.correlation_id,
        name=subject.name,
        tool=subject.tool,
        operation=subject.operation,
        risk=subject.risk,
        effect=subject.effect,
        intent_kind=subject.intent_kind or None,
        intent_text=intent_text or None,
        tenant=context.tenant,
        principal=context.principal,
        parent_run_id=context.parent_run_id,
        **fields,
    )
    event.timestamp = timestamp
    return event


class LazyBatch(Sequence[AuditEvent]):
    """A batch whose events are made on first read, once.

    A sink that stores rows (`storage_rows`) gets them without event objects:
    the batch then keeps its rows, and events made later from them carry the
    same ids, so every sink of a fan-out stores the same events.
    """

    __slots__ = ("_events", "_rows")

    timestamp: float  #: when the batch's events happened (each kind of batch holds it)

    def __init__(self) -> None:
        self._events: list[AuditEvent] | None = None
        self._rows: list[dict[str, Any]] | None = None

    def _make(self) -> list[AuditEvent]:  # pragma: no cover - every batch defines it
        raise NotImplementedError

    def _make_rows(self) -> list[dict[str, Any]]:  # pragma: no cover - every batch defines it
        raise NotImplementedError

    @property
    def events(self) -> list[AuditEvent]:
        """The events, made now if this is the first read."""
        events = self._events
        if events is None:
            with _BUILD_LOCK:
                events = self._events
                if events is None:
                    if self._rows is None:
                        events = self._make()
                    else:
                        events = [AuditEvent.from_storage(row, self.timestamp) for row in self._rows]
                    self._events = events
        return events

    def storage_rows(self) -> list[dict[str, Any]]:
        """The events in storage form (`AuditEvent.as_dict`): new dicts, whose keys the caller may set."""
        rows = self._rows
        if rows is None:
            with _BUILD_LOCK:
                rows = self._rows
                if rows is None:
                    events = self._events
                    rows = self._make_rows() if events is None else [e.as_dict() for e in events]
                    self._rows = rows
        return [row.copy() for row in rows]

    #: How many events a batch of this kind makes: ``len`` and ``bool`` make none.
    SIZE = 0

    def __len__(self) -> int:
        return self.SIZE

    @overload
    def __getitem__(self, index: int) -> AuditEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[AuditEvent]: ...

    def __getitem__(self, index: int | slice) -> AuditEvent | Sequence[AuditEvent]:
        return self.events[index]

    def __iter__(self) -> Iterator[AuditEvent]:
        return iter(self.events)


@final
class Opening(LazyBatch):
    """INTENT_DECLARED, GOVERNANCE_DECISION (ALLOW) and INVOCATION_REQUEST of a call about to run.

    ``arguments`` are redacted when the events are made, so the caller must
    hand over a mapping nobody changes afterwards (the by-name fast path's
    validated scalars). Otherwise set ``payload`` (summary and hash) at once.

    A call that succeeded at its first attempt may be closed in place
    (`close_in_place`) instead of with a `Closing`: a sink whose ``hold`` reads
    it so (``holds_openings_twice``) then keeps it a second time, for its
    response. One object per call instead of two is what the typed fast path
    leaves behind.
    """

    SIZE = 3

    __slots__ = (
        "arguments",
        "context",
        "duration",
        "ended",
        "held_by",
        "intent_text",
        "payload",
        "rules",
        "subject",
        "timestamp",
    )

    def __init__(
        self,
        subject: CallSubject,
        context: ExecutionContext,
        intent_text: str,
        arguments: Mapping[str, Any],
        timestamp: float,
    ) -> None:
        self._events = None
        self._rows = None
        self.subject = subject
        self.context = context
        self.intent_text = intent_text
        self.arguments = arguments
        self.timestamp = timestamp
        self.payload: tuple[str | None, str | None] | None = None
        #: Ids of the rules that let the call run with a warning.
        self.rules: tuple[str, ...] = ()
        #: Set by `close_in_place`: the call's duration and when it ended.
        self.duration: float | None = None
        self.ended: float | None = None
        #: The sink that made this opening's events from its ``hold`` (its next read is the response).
        self.held_by: object | None = None

    def _make(self) -> list[AuditEvent]:
        summary, digest = self.payload or self.subject.redaction.payload_fields(self.arguments)
        at = (self.subject, self.context, self.intent_text, self.timestamp)
        return [
            call_event(EventType.INTENT_DECLARED, *at, payload_summary=summary, payload_hash=digest),
            call_event(EventType.GOVERNANCE_DECISION, *at, decision="ALLOW", rule_ids=self.rules),
            call_event(EventType.INVOCATION_REQUEST, *at, attempt=1),
        ]

    def _make_rows(self) -> list[dict[str, Any]]:
        summary, digest = self.payload or self.subject.redaction.payload_fields(self.arguments)
        common = _common_row(self.subject, self.context, self.intent_text, self.timestamp)
        intent, decision, request = common, common.copy(), common.copy()
        intent["event_id"] = new_event_id()
        intent["type"] = "INTENT_DECLARED"
        intent["payload_summary"], intent["payload_hash"] = summary, digest
        decision["event_id"] = new_event_id()
        decision["type"] = "GOVERNANCE_DECISION"
        decision["decision"], decision["rule_ids"] = "ALLOW", list(self.rules)
        request["event_id"] = new_event_id()
        request["type"] = "INVOCATION_REQUEST"
        request["rule_ids"], request["attempt"] = [], 1
        return [intent, decision, request]

    def close_in_place(self, duration: float, ended: float) -> None:
        """Record that the call succeeded at its first attempt: hold this opening again for the response.

        Only for an opening given to a sink's ``hold`` (never to a fan-out): that sink
        reads its second copy as the INVOCATION_RESPONSE a `Closing` would have made.
        """
        self.duration = duration
        self.ended = ended

    def response(self) -> AuditEvent:
        """The INVOCATION_RESPONSE of a call closed in place (`close_in_place`)."""
        assert self.ended is not None
        return call_event(
            EventType.INVOCATION_RESPONSE,
            self.subject,
            self.context,
            self.intent_text,
            self.ended,
            status="SUCCESS",
            reason_code=None,
            duration=self.duration,
            attempt=1,
        )


@final
class Closing(LazyBatch):
    """INVOCATION_RESPONSE of a call whose `Opening` was stored."""

    SIZE = 1

    __slots__ = ("attempt", "duration", "opening", "reason_code", "status", "timestamp")

    def __init__(  # noqa: PLR0917 - positional on purpose: built on the hot path
        self,
        opening: Opening,
        status: str,
        reason_code: str | None,
        duration: float | None,
        attempt: int,
        timestamp: float,
    ) -> None:
        self._events = None
        self._rows = None
        self.opening = opening
        self.status = status
        self.reason_code = reason_code
        self.duration = duration
        self.attempt = attempt
        self.timestamp = timestamp

    def _make(self) -> list[AuditEvent]:
        o = self.opening
        return [
            call_event(
                EventType.INVOCATION_RESPONSE,
                o.subject,
                o.context,
                o.intent_text,
                self.timestamp,
                status=self.status,
                reason_code=self.reason_code,
                duration=self.duration,
                attempt=self.attempt,
            )
        ]

    def _make_rows(self) -> list[dict[str, Any]]:
        o = self.opening
        opened = o._rows  # the opening's rows, when a sink made them, hold the call's fields
        if opened is None:
            row = _common_row(o.subject, o.context, o.intent_text, self.timestamp)
        else:
            row = opened[2].copy()  # its INVOCATION_REQUEST: no decision, rules nor payload
            row["timestamp"] = iso_timestamp(self.timestamp)
            row["rule_ids"] = []
        row["event_id"] = new_event_id()
        row["type"] = "INVOCATION_RESPONSE"
        row["status"], row["reason_code"] = self.status, self.reason_code
        row["duration"] = float(self.duration) if self.duration is not None else None
        row["attempt"] = self.attempt
        return [row]


def _common_row(
    subject: CallSubject, context: ExecutionContext, intent_text: str, timestamp: float
) -> dict[str, Any]:
    """The storage form every event of a call shares, as `call_event` and `AuditEvent.as_dict` make it.

    The caller sets ``event_id`` and ``type`` and the fields of its kind of event.
    """
    return {
        "event_id": "",
        "trace_id": context.run_id,
        "correlation_id": context.correlation_id,
        "sequence": 0,
        "timestamp": iso_timestamp(timestamp),
        "type": "",
        "name": storable_text(subject.name),
        "tool": storable_text(subject.tool),
        "operation": storable_text(subject.operation),
        "risk": subject.risk,
        "effect": subject.effect,
        "decision": None,
        "reason_code": None,
        "rule_ids": [],
        "intent_kind": subject.intent_kind or None,
        "intent_text": storable_text(intent_text) if intent_text else None,
        "tenant": context.tenant,
        "principal": context.principal,
        "payload_summary": None,
        "payload_hash": None,
        "status": None,
        "duration": None,
        "attempt": None,
        "previous_hash": GENESIS_HASH,
        "hash": "",
        "parent_run_id": context.parent_run_id,
    }


#: The batch types, for a type test cheaper than ``isinstance(x, LazyBatch)`` (an ABC check).
LAZY_BATCHES = frozenset({Opening, Closing})

#: A held call's first field: its opening (3 events) or its response (1 event).
HELD_OPENING = 0
HELD_RESPONSE = 1


def held_call(  # noqa: PLR0917 - the tuple's fields, in order
    kind: int,
    subject_key: int,
    context: ExecutionContext,
    intent_text: str,
    timestamp: float,
    duration: float | None,
    values: Sequence[Any] = (),
) -> tuple[Any, ...]:
    """A call's opening as a tuple of plain values, for a sink that holds calls (`held_response` closes it).

    Strings, numbers and None only (the argument values last, in the order of
    the names the sink registered with ``subject_key``), so the garbage
    collector stops tracking the tuple at its first pass when the arguments
    are scalars: a held call costs later collections nothing, where an
    `Opening` object is walked by every full collection for as long as the
    sink keeps it. The by-name route builds the same tuple inline.
    """
    return (
        kind,
        subject_key,
        context.run_id,
        context.correlation_id,
        context.tenant,
        context.principal,
        context.parent_run_id,
        intent_text,
        timestamp,
        duration,
        *values,
    )


def held_response(opening: tuple[Any, ...], ended: float, duration: float) -> tuple[Any, ...]:
    """The response of a held call that succeeded at its first attempt: it names its held opening."""
    return (HELD_RESPONSE, opening, ended, duration)


def held_events(held: tuple[Any, ...], subject: CallSubject, names: tuple[str, ...]) -> list[AuditEvent]:
    """The events of a held call (`held_call`, `held_response`): its `Opening`'s, or its `Closing`'s."""
    if held[0] == HELD_RESPONSE:
        _, opening, timestamp, duration = held
        _, _, run_id, correlation_id, tenant, principal, parent_run_id, text = opening[:8]
        kind = HELD_RESPONSE
    else:
        kind, _, run_id, correlation_id, tenant, principal, parent_run_id, text, timestamp, _ = held[:10]
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
    }
    if kind == HELD_RESPONSE:
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
        arguments = dict(zip(names, held[10:], strict=True))
        summary, digest = subject.redaction.payload_fields(arguments)
        made = [
            AuditEvent(EventType.INTENT_DECLARED, payload_summary=summary, payload_hash=digest, **common),
            AuditEvent(EventType.GOVERNANCE_DECISION, decision="ALLOW", rule_ids=(), **common),
            AuditEvent(EventType.INVOCATION_REQUEST, attempt=1, **common),
        ]
    for event in made:
        event.timestamp = timestamp
    return made
