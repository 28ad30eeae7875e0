"""Audit events: cheap slotted objects on the hot path, a pydantic schema at storage.

Each trace's events form a hash chain: an event's ``hash`` covers its fields
and the ``previous_hash`` of its trace, so editing, removing or reordering a
stored event breaks the chain where it happened.

``parent_run_id`` (the delegating run, schema version 2) and ``credential``
(the label of the caller's credential, schema version 5) are the last fields,
each hashed only when set, so events stored before they existed still verify.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import threading
import time
from datetime import datetime, timezone
from operator import attrgetter, itemgetter
from typing import Any, final

from pydantic import BaseModel, ConfigDict

__all__ = [
    "GENESIS_HASH",
    "AuditEvent",
    "AuditRecord",
    "EventType",
    "chain_hash",
    "chain_text",
    "iso_timestamp",
    "new_event_id",
    "storable_text",
]

GENESIS_HASH = "0" * 64

# Event ids: version-7 UUIDs (RFC 9562): the time in milliseconds, then 74 random bits from the
# operating system's generator. Ids made close in time sort close together, so each index on
# ``event_id`` takes a commit's rows in one leaf page, where random ids wrote one page per row
# (every page a commit touches is written and flushed again). The random bytes are drawn 256
# ids at a time: `os.urandom` lets go of the interpreter lock, and a thread writing a batch of
# thousands of events waited to get it back after every call. Each thread draws from its own
# buffer; a forked child empties the one it inherited (it would otherwise hand out its
# parent's next ids).
_ID_BYTES = 10  # 80 bits drawn, 74 used
_BUFFER_BYTES = 256 * _ID_BYTES
# The variant's hex digit: 0b10 then two random bits (the drawn digit's low two).
_VARIANT_DIGIT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


class _RandomBuffer(threading.local):
    def __init__(self) -> None:
        self.data = b""
        self.at = 0


_RANDOM = _RandomBuffer()


def _forget_inherited_randomness() -> None:
    _RANDOM.data, _RANDOM.at = b"", 0


os.register_at_fork(after_in_child=_forget_inherited_randomness)


def new_event_id() -> str:
    """A fresh event id: a version-7 UUID (time-ordered, 74 random bits) as 32 hex digits.

    Built as text: 12 digits of milliseconds, the version ``7``, 3 random digits
    (rand_a), the variant digit (2 random bits) and 15 random digits (rand_b).
    """
    buffer = _RANDOM
    at = buffer.at
    data = buffer.data
    if at >= len(data):
        buffer.data = data = os.urandom(_BUFFER_BYTES)
        at = 0
    buffer.at = at + _ID_BYTES
    drawn = data[at : at + _ID_BYTES].hex()
    return f"{time.time_ns() // 1_000_000:012x}7{drawn[:3]}{_VARIANT_DIGIT[drawn[3]]}{drawn[4:19]}"


class EventType(str, enum.Enum):
    """What an event records."""

    INTENT_DECLARED = "INTENT_DECLARED"
    GOVERNANCE_DECISION = "GOVERNANCE_DECISION"
    INVOCATION_REQUEST = "INVOCATION_REQUEST"
    INVOCATION_RESPONSE = "INVOCATION_RESPONSE"
    SYSTEM_ERROR = "SYSTEM_ERROR"


#: The fields of an event, in storage order (the chain hash covers all but ``hash``;
#: ``parent_run_id`` and ``credential`` only when set).
FIELDS = (
    "event_id",
    "trace_id",
    "correlation_id",
    "sequence",
    "timestamp",
    "type",
    "name",
    "tool",
    "operation",
    "risk",
    "effect",
    "decision",
    "reason_code",
    "rule_ids",
    "intent_kind",
    "intent_text",
    "tenant",
    "principal",
    "payload_summary",
    "payload_hash",
    "status",
    "duration",
    "attempt",
    "previous_hash",
    "hash",
    "parent_run_id",
    "credential",
)


def storable_text(text: str) -> str:
    """``text`` as every store accepts it: lone surrogates and NUL written as escape text.

    No UTF-8 store accepts a lone surrogate (kept as ``\\udXXX``) and PostgreSQL
    refuses NUL in text (kept as ``\\x00``): one such event would fail the
    transaction, and a group commit's other callers with it.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00") if "\x00" in text else text


@final
class AuditEvent:
    """One audit event before storage. Sinks assign ``sequence``, ``previous_hash`` and ``hash``."""

    __slots__ = FIELDS

    def __init__(
        self,
        type: EventType,
        *,
        trace_id: str,
        correlation_id: str | None = None,
        name: str = "",
        tool: str = "",
        operation: str = "",
        risk: str | None = None,
        effect: str | None = None,
        decision: str | None = None,
        reason_code: str | None = None,
        rule_ids: tuple[str, ...] = (),
        intent_kind: str | None = None,
        intent_text: str | None = None,
        tenant: str | None = None,
        principal: str | None = None,
        payload_summary: str | None = None,
        payload_hash: str | None = None,
        status: str | None = None,
        duration: float | None = None,
        attempt: int | None = None,
        parent_run_id: str | None = None,
        credential: str | None = None,
    ) -> None:
        self.event_id = new_event_id()
        self.trace_id = trace_id
        self.correlation_id = correlation_id
        self.sequence = 0
        self.timestamp = time.time()
        self.type = type
        # A by-name call's name (tool, operation) and intent text come from the model: keep them storable.
        self.name = name if name.isascii() and "\x00" not in name else storable_text(name)
        self.tool = tool if tool.isascii() and "\x00" not in tool else storable_text(tool)
        self.operation = (
            operation if operation.isascii() and "\x00" not in operation else storable_text(operation)
        )
        self.risk = risk
        self.effect = effect
        self.decision = decision
        self.reason_code = reason_code
        self.rule_ids = rule_ids
        self.intent_kind = intent_kind
        self.intent_text = (
            intent_text
            if intent_text is None or (intent_text.isascii() and "\x00" not in intent_text)
            else storable_text(intent_text)
        )
        self.tenant = tenant
        self.principal = principal
        self.payload_summary = payload_summary
        self.payload_hash = payload_hash
        self.status = status
        # Stored as a float: an int would hash as "1" and read back as "1.0".
        self.duration = float(duration) if duration is not None else None
        self.attempt = attempt
        self.previous_hash = GENESIS_HASH
        self.hash = ""
        self.parent_run_id = parent_run_id
        self.credential = credential

    @classmethod
    def from_storage(cls, row: dict[str, Any], timestamp: float) -> AuditEvent:
        """The event whose storage form (`as_dict`) is ``row``, made at ``timestamp``."""
        event = cls.__new__(cls)
        for name in FIELDS:
            setattr(event, name, row[name])
        event.type = EventType(row["type"])
        event.timestamp = timestamp
        event.rule_ids = tuple(row["rule_ids"])
        return event

    def as_dict(self) -> dict[str, Any]:
        """Storage form: every field, the type as its value, the time as ISO 8601 UTC."""
        data = dict(zip(FIELDS, _FIELD_VALUES(self), strict=False))  # one value per field, by construction
        data["type"] = self.type._value_
        data["timestamp"] = iso_timestamp(self.timestamp)
        data["rule_ids"] = tuple(self.rule_ids)  # a tuple: the row stays a dict the collector does not track
        return data

    def __repr__(self) -> str:
        return f"AuditEvent({self.type.value} {self.trace_id}#{self.sequence} {self.name} {self.status})"


_FIELD_VALUES = attrgetter(*FIELDS)  # an event's field values in storage order, read in C


# The text of the last whole second formatted, shared by every thread (one tuple: read atomically).
_LAST_SECOND: tuple[int, str] = (0, "1970-01-01T00:00:00")


def iso_timestamp(timestamp: float) -> str:
    """``timestamp`` as stored: fixed-width ISO 8601 UTC with microseconds.

    The same text as ``datetime.fromtimestamp(timestamp, timezone.utc).isoformat(
    timespec="microseconds")`` (microseconds rounded half to even, as there), with
    the date and time of day formatted once per second.
    """
    global _LAST_SECOND  # noqa: PLW0603 - a one-entry cache
    fraction, whole = math.modf(timestamp)
    second = int(whole)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    elif micros < 0:
        second, micros = second - 1, micros + 1_000_000
    cached, text = _LAST_SECOND
    if second != cached:
        text = datetime.fromtimestamp(second, tz=timezone.utc).isoformat(timespec="seconds")[:-6]
        _LAST_SECOND = (second, text)
    return f"{text}.{micros:06d}+00:00"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def canonical(data: dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept."""
    return _CANONICAL(data)


_HASHED = FIELDS[: FIELDS.index("hash")]  # every field before ``hash``, in storage order
#: Fields after ``hash``, added by later schema versions: hashed only when set, in this order.
_OPTIONAL = FIELDS[FIELDS.index("hash") + 1 :]
_HASHED_VALUES = itemgetter(*_HASHED)
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode
# The C encoder `_ENCODE` builds again on every call (JSONEncoder.iterencode), built once with the
# same settings, so the same text: the chain hash encodes every stored event. No cycle check (the
# hashed values are scalars and flat sequences), so no state shared between threads.
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # None without the C accelerator
_ENCODE_CHUNKS: Any = (
    None
    if _MAKE_ENCODER is None
    # markers (None: no cycle check), default, string encoder, indent, separators, sort_keys,
    # skipkeys, allow_nan: what JSONEncoder.iterencode passes for _ENCODE's settings.
    else _MAKE_ENCODER(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)
)


def chain_text(data: dict[str, Any]) -> str:
    """The text `chain_hash` hashes: a JSON array of every field but ``hash`` (``previous_hash``
    included), in storage order.

    ``parent_run_id`` and ``credential`` are appended (as ``[name, value]``) only when set: events
    without them hash as before they existed.
    """
    values: tuple[Any, ...] = _HASHED_VALUES(data)  # encoded as a JSON array, like a list
    for name in _OPTIONAL:
        value = data.get(name)
        if value is not None:
            values = (*values, [name, value])
    return _ENCODE(values) if _ENCODE_CHUNKS is None else "".join(_ENCODE_CHUNKS(values, 0))


def chain_hash(data: dict[str, Any]) -> str:
    """SHA-256 (hex) of `chain_text`: the event's hash in its trace's chain."""
    return hashlib.sha256(chain_text(data).encode("utf-8")).hexdigest()


class AuditRecord(BaseModel):
    """A stored event, as read back. Validated at the storage boundary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str
    trace_id: str
    correlation_id: str | None
    sequence: int
    timestamp: str
    type: EventType
    name: str
    tool: str
    operation: str
    risk: str | None
    effect: str | None
    decision: str | None
    reason_code: str | None
    rule_ids: list[str]
    intent_kind: str | None
    intent_text: str | None
    tenant: str | None
    principal: str | None
    payload_summary: str | None
    payload_hash: str | None
    status: str | None
    duration: float | None
    attempt: int | None
    previous_hash: str
    hash: str
    parent_run_id: str | None = None
    credential: str | None = None

    def storage_dict(self) -> dict[str, Any]:
        """The mapping the chain hash was computed over."""
        data = self.model_dump()
        data["type"] = self.type.value
        return data
