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
calls as *held calls* instead (`toolbox.audit._held`), and an ASYNC trail
queues them as plain values (`toolbox.audit._queued`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, cast, final, overload
from uuid import UUID

from toolbox.audit._events import (
    GENESIS_HASH,
    AuditEvent,
    EventType,
    iso_timestamp,
    new_event_id,
    storable_text,
)

if TYPE_CHECKING:
    from toolbox.audit._redaction import Redaction

__all__ = [
    "IMMUTABLE_TYPES",
    "LAZY_BATCHES",
    "CallContext",
    "CallSubject",
    "Closing",
    "LazyBatch",
    "Opening",
    "call_event",
    "immutable_copy",
    "response_row",
    "rows_of",
]

_BUILD_LOCK = threading.Lock()

#: Values of these types cannot change once a call has them: they may be redacted later.
IMMUTABLE_TYPES = frozenset(
    {str, int, float, bool, bytes, type(None), Decimal, datetime, date, dt_time, timedelta, UUID}
)


def immutable_copy(arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of ``arguments`` nobody else can change, else None.

    Every value is of an `IMMUTABLE_TYPES` type, or a dict of such values
    under text keys (toolbox-sql's ``params``), which is copied too: the
    caller may change its own dict after the call.
    """
    copied: dict[str, Any] | None = None
    for name, value in arguments.items():
        if type(value) in IMMUTABLE_TYPES:
            continue
        if type(value) is not dict or not _flat(value):
            return None
        if copied is None:
            copied = dict(arguments)
        copied[name] = dict(value)
    return dict(arguments) if copied is None else copied


def _flat(value: dict[Any, Any]) -> bool:
    """Whether ``value`` holds only `IMMUTABLE_TYPES` values under text keys."""
    return all(type(key) is str and type(item) in IMMUTABLE_TYPES for key, item in value.items())


class CallContext(Protocol):
    """What a call's events take from its `toolbox.ExecutionContext`."""

    @property
    def run_id(self) -> str: ...
    @property
    def correlation_id(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def principal(self) -> str: ...
    @property
    def parent_run_id(self) -> str | None: ...
    @property
    def credential(self) -> str | None: ...


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
    context: CallContext,
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
        credential=context.credential,
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

    def fresh_rows(self) -> list[dict[str, Any]]:
        """The events in storage form, made now and not kept: for a batch read once."""
        return self._make_rows()

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
        "queued",
        "rules",
        "subject",
        "timestamp",
    )

    def __init__(
        self,
        subject: CallSubject,
        context: CallContext,
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
        #: Its form in an ASYNC queue (`toolbox.audit._queued`), once queued: its closing names it.
        self.queued: tuple[Any, ...] | None = None

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
        decision["decision"], decision["rule_ids"] = "ALLOW", self.rules
        request["event_id"] = new_event_id()
        request["type"] = "INVOCATION_REQUEST"
        request["rule_ids"], request["attempt"] = (), 1
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
    """INVOCATION_RESPONSE of a call whose `Opening` was stored.

    ``payload``, when set, is the result's own summary and hash
    (`toolbox.pipeline._result_summary`), stored as the event's payload fields.
    """

    SIZE = 1

    __slots__ = ("attempt", "duration", "opening", "payload", "reason_code", "rules", "status", "timestamp")

    def __init__(  # noqa: PLR0917 - positional on purpose: built on the hot path
        self,
        opening: Opening,
        status: str,
        reason_code: str | None,
        duration: float | None,
        attempt: int,
        timestamp: float,
        rules: tuple[str, ...] = (),
    ) -> None:
        self._events = None
        self._rows = None
        self.opening = opening
        self.status = status
        self.reason_code = reason_code
        self.duration = duration
        self.attempt = attempt
        self.timestamp = timestamp
        self.payload: tuple[str | None, str | None] | None = None
        #: Rules that decided after the opening was stored (a spend's warning, e.g. a fail-open rate).
        self.rules = rules

    def _make(self) -> list[AuditEvent]:
        o = self.opening
        summary, digest = self.payload or (None, None)
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
                payload_summary=summary,
                payload_hash=digest,
                rule_ids=self.rules,
            )
        ]

    def _make_rows(self) -> list[dict[str, Any]]:
        o = self.opening
        opened = o._rows  # the opening's rows, when a sink made them, hold the call's fields
        if opened is None:
            request = _common_row(o.subject, o.context, o.intent_text, self.timestamp)
        else:
            request = opened[2]  # its INVOCATION_REQUEST: no decision, rules nor payload
        outcome = (self.status, self.reason_code, self.duration, self.attempt, self.timestamp)
        row = response_row(request, *outcome)
        if self.payload is not None:
            row["payload_summary"], row["payload_hash"] = self.payload
        if self.rules:
            row["rule_ids"] = self.rules
        return [row]


def response_row(  # noqa: PLR0917 - a Closing's fields, in order
    request: dict[str, Any],
    status: str,
    reason_code: str | None,
    duration: float | None,
    attempt: int,
    timestamp: float,
) -> dict[str, Any]:
    """The INVOCATION_RESPONSE row of a call, from its INVOCATION_REQUEST row (left as it is)."""
    row = request.copy()
    row["timestamp"] = iso_timestamp(timestamp)
    row["event_id"] = new_event_id()
    row["type"] = "INVOCATION_RESPONSE"
    row["status"], row["reason_code"] = status, reason_code
    row["duration"] = float(duration) if duration is not None else None
    row["attempt"] = attempt
    return row


def _common_row(
    subject: CallSubject, context: CallContext, intent_text: str, timestamp: float
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
        "rule_ids": (),  # a tuple: a row of scalars and tuples is a dict the collector does not track
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
        "credential": context.credential,
    }


#: The batch types, for a type test cheaper than ``isinstance(x, LazyBatch)`` (an ABC check).
LAZY_BATCHES = frozenset({Opening, Closing})


def rows_of(events: Sequence[AuditEvent]) -> list[dict[str, Any]]:
    """``events`` in storage form (new dicts); a call's batch makes them without event objects."""
    if type(events) in LAZY_BATCHES:  # a type test, not isinstance: ABC checks are slow
        return cast(LazyBatch, events).storage_rows()
    return [event.as_dict() for event in events]
