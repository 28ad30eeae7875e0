"""The fallback file: events a sink could not store, kept on local disk for a later replay.

Lines are JSON with every non-ASCII character escaped, so no string a model
sends (U+2028, U+0085, a lone surrogate, ...) can split a line or fail to
encode. On replay each line is read on its own: a line that is not a valid
event is moved to a quarantine file beside the fallback file and reported by
line number (never by content), and every valid event is stored.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, final

from toolbox.audit._events import FIELDS, AuditEvent, EventType

__all__ = ["FallbackFile", "FallbackReplay", "event_from_line", "event_line"]

LOGGER = logging.getLogger("toolbox.audit")

_TEXT = ("event_id", "trace_id", "name", "tool", "operation")
_OPTIONAL_TEXT = (
    "correlation_id",
    "risk",
    "effect",
    "decision",
    "reason_code",
    "intent_kind",
    "intent_text",
    "tenant",
    "principal",
    "payload_summary",
    "payload_hash",
    "status",
    "parent_run_id",
    "credential",
)
_EVENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Assigned by the sink when the event is stored: never taken from the file.
_CHAIN_FIELDS = frozenset({"sequence", "previous_hash", "hash"})


@final
@dataclass(frozen=True)
class FallbackReplay:
    """What `FallbackFile.replay` did."""

    stored: int
    """Events stored in the sink."""
    quarantined: tuple[int, ...] = ()
    """Line numbers (1-based) of the lines that were not valid events, moved to `quarantine_path`."""
    quarantine_path: Path | None = None
    """Where the quarantined lines went (None when there were none)."""


def event_line(event: AuditEvent) -> str:
    """One fallback line for ``event``: ASCII-only JSON, so it survives any string it holds."""
    return json.dumps(event.as_dict(), ensure_ascii=True, allow_nan=False) + "\n"


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a storable number")


def event_from_line(line: bytes) -> AuditEvent:
    """The event one fallback line holds.

    Raises:
        ValueError: the line is not JSON, not an event, or holds a value no sink can store.
            The message names the field, never its content.
    """
    data = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    unknown = set(data) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    _check_fields(data)
    event = AuditEvent(EventType(data["type"]), trace_id=data["trace_id"])
    for name, value in data.items():
        if name in ("type", "timestamp") or name in _CHAIN_FIELDS:
            continue
        setattr(event, name, tuple(value) if name == "rule_ids" else value)
    try:
        event.timestamp = datetime.fromisoformat(data["timestamp"]).timestamp()
        event.as_dict()  # the storage form must be made: a year out of range is not
    except (OverflowError, OSError):
        raise ValueError("timestamp is out of range") from None
    return event


def _check_fields(data: Mapping[str, Any]) -> None:
    for name in (*_TEXT, "type", "timestamp"):
        if not isinstance(data.get(name), str):
            raise ValueError(f"{name} must be a string")
    for name in _OPTIONAL_TEXT:
        if not isinstance(data.get(name), (str, type(None))):
            raise ValueError(f"{name} must be a string or null")
    if data["type"] not in EventType._value2member_map_:
        raise ValueError("type is not an event type")
    if not _EVENT_ID.match(data["event_id"]):
        raise ValueError("event_id is not an event id")  # a key column: 64 characters at most
    _check_values(data)


def _check_values(data: Mapping[str, Any]) -> None:
    rule_ids = data.get("rule_ids", [])
    if not isinstance(rule_ids, list) or not all(isinstance(r, str) for r in rule_ids):
        raise ValueError("rule_ids must be a list of strings")
    duration = data.get("duration")
    if duration is not None and (
        type(duration) not in (int, float) or not math.isfinite(duration)  # bool is not a duration
    ):
        raise ValueError("duration must be a finite number or null")
    attempt = data.get("attempt")
    if attempt is not None and (type(attempt) is not int or not -(2**63) <= attempt < 2**63):
        raise ValueError("attempt must be a 64-bit integer or null")  # what an SQL store holds
    try:
        aware = datetime.fromisoformat(data["timestamp"]).tzinfo is not None
    except ValueError:
        raise ValueError("timestamp is not ISO 8601") from None
    if not aware:
        raise ValueError("timestamp has no time zone")
    for name in (*_TEXT, *_OPTIONAL_TEXT):
        _check_storable(name, data.get(name))
    for value in rule_ids:
        _check_storable("rule_ids", value)


def _check_storable(name: str, value: object) -> None:
    """A text no store refuses: one refused row would fail a replay's whole transaction."""
    if not isinstance(value, str):
        return
    if "\x00" in value:
        raise ValueError(f"{name} holds a NUL character")  # PostgreSQL refuses NUL in text
    if not value.isascii():
        value.encode("utf-8")  # a lone surrogate cannot be stored: UnicodeEncodeError is a ValueError


@final
class FallbackFile:
    """Appends events to a local file with ``fsync``; replays them into a sink."""

    __slots__ = ("_lock", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    @property
    def quarantine_path(self) -> Path:
        """Where replay moves the lines that are not valid events."""
        return self.path.with_name(self.path.name + ".quarantine")

    def keep(self, events: Sequence[AuditEvent]) -> bool:
        """Append ``events`` (unchained); False when the file could not be written.

        An event that cannot be serialised (a NaN duration, say) is logged and
        skipped: it never costs the others.
        """
        lines = []
        for event in events:
            try:
                lines.append(event_line(event))
            except (ValueError, OverflowError) as exc:
                LOGGER.error("audit event not serialisable (%s); 1 event lost", type(exc).__name__)
        try:
            with self._lock, self.path.open("a", encoding="ascii") as handle:
                handle.write("".join(lines))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            LOGGER.error("audit fallback file unwritable (%s); %d event(s) lost", exc.strerror, len(lines))
            return False
        return len(lines) == len(events)

    def replay(self, append: Callable[[Sequence[AuditEvent]], None]) -> FallbackReplay:
        """Store the kept events with ``append``, quarantine the bad lines, then empty the file.

        Lines that are not valid events are quarantined (with ``fsync``) before anything
        is stored. If the sink refuses the batch, each event is offered on its own: the
        ones it refuses while it accepts others (a duplicate event id, say) are
        quarantined too. If it accepts none, the store is taken to be down: the
        fallback file keeps its valid lines and the sink's error propagates.
        """
        if not self.path.exists():
            return FallbackReplay(0)
        with self._lock:
            kept: list[tuple[int, bytes, AuditEvent]] = []
            bad: list[tuple[int, bytes]] = []
            for number, line in enumerate(self.path.read_bytes().split(b"\n"), start=1):
                if not line.strip():
                    continue
                try:
                    kept.append((number, line, event_from_line(line)))
                except (ValueError, RecursionError):  # JSON, Unicode and field errors are ValueErrors
                    bad.append((number, line))
            if bad:
                self._quarantine(bad)
            refused = self._store(append, kept)
            if refused:
                self._quarantine([(number, line) for number, line, _ in refused])
            self.path.write_bytes(b"")
        stored = len(kept) - len(refused)
        if not bad and not refused:
            return FallbackReplay(stored)
        numbers = tuple(sorted([number for number, _ in bad] + [number for number, _, _ in refused]))
        LOGGER.warning(
            "audit fallback replay: %d line(s) were not valid events and %d were refused by the sink; "
            "moved to %s (lines %s)",
            len(bad),
            len(refused),
            self.quarantine_path,
            ", ".join(map(str, numbers)),
        )
        return FallbackReplay(stored, numbers, self.quarantine_path)

    def _store(
        self, append: Callable[[Sequence[AuditEvent]], None], kept: list[tuple[int, bytes, AuditEvent]]
    ) -> list[tuple[int, bytes, AuditEvent]]:
        """Append the events of ``kept``; the entries the sink refused one by one."""
        if not kept:
            return []
        try:
            append([event for _, _, event in kept])
        except Exception as batch_error:
            refused = []
            for entry in kept:
                try:
                    append([entry[2]])
                except Exception:  # noqa: BLE001 - judged below, against the whole batch
                    refused.append(entry)
            if len(refused) == len(kept):  # nothing accepted: the store is down, keep everything
                self._rewrite([line for _, line, _ in kept])
                raise batch_error
            return refused
        return []

    def _rewrite(self, lines: Sequence[bytes]) -> None:
        """Replace the file by ``lines`` (atomically: a sibling file, then a rename)."""
        temporary = self.path.with_name(self.path.name + ".replay")
        with temporary.open("wb") as handle:
            handle.write(b"".join(line + b"\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)

    def _quarantine(self, lines: Sequence[tuple[int, bytes]]) -> None:
        with self.quarantine_path.open("ab") as handle:
            handle.write(b"".join(line + b"\n" for _, line in lines))
            handle.flush()
            os.fsync(handle.fileno())
