"""``toolbox audit replay FALLBACK_FILE``: store a fallback file's events, once each, then verify.

The fallback file holds the events an audit trail could not store (see
`toolbox.audit._fallback`). Replay reads it line by line, in order, and stores
every event the store does not hold yet: on SQLite and PostgreSQL the check
and the insert share one transaction (`SqlSink.append_missing`), so running
replay twice, or after a crash half-way, stores each event once. The file is
never changed: delete it once replay reports the chain intact. A line that is
not a valid event is skipped and reported by line number, never by content.
Then the chain (and, on SQL stores, the trace heads) of every replayed trace
is verified.

Exit status: 0 when every line was stored or already present and the chains
verify; 1 when a line was invalid or a chain problem was found; 2 on an error
(missing file, store unavailable), reported by the ``toolbox`` command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from toolbox.audit._events import AuditEvent
from toolbox.audit._fallback import event_from_line
from toolbox.audit._sink import AuditQuery, AuditSink
from toolbox.audit._verify import ChainProblem, TraceHeads, verify_chain, verify_heads
from toolbox.cli._common import clean

__all__ = ["add_replay", "audit_replay"]

_PROG = "toolbox"
#: Events stored per transaction: a failure half-way keeps what was stored, and a rerun skips it.
_CHUNK = 500
_READ_ALL = 2**31 - 1
#: The longest line read as an event; any event the trail writes is far shorter.
_MAX_LINE = 16 * 1024 * 1024


@runtime_checkable
class _AppendsMissing(Protocol):
    """A store that skips already stored event ids in the transaction that stores the others."""

    def append_missing(self, events: Sequence[AuditEvent]) -> int:
        """Store the events not stored yet; how many were."""


def add_replay(actions: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Register ``replay`` under ``toolbox audit`` (``actions``: its sub-parsers)."""
    replay = actions.add_parser(
        "replay",
        parents=list(parents),
        help="store a fallback file's events (once each, in order), then verify their chains",
        description=(
            "Store the events of an audit fallback file that the store does not hold yet, in "
            "file order, then verify the chains of the traces they belong to. Running it twice "
            "stores each event once. The file is left as it is: delete it once the chain verifies."
        ),
    )
    replay.add_argument("fallback_file", metavar="FALLBACK_FILE", help="the fallback file (JSON Lines)")
    replay.set_defaults(audit_handler=audit_replay)


def audit_replay(args: argparse.Namespace, sink: AuditSink) -> int:
    """Replay ``args.fallback_file`` into ``sink``; print what happened; the exit status."""
    path = Path(args.fallback_file)
    if not path.is_file():
        raise ValueError(f"fallback file {clean(str(path))!r} does not exist or is not a file")
    invalid: list[int] = []
    replayed = stored = 0
    seen: set[str] = set()
    known: set[str] | None = None  # a JSON Lines store's ids, read once
    for events in _chunks(path, invalid):  # never the whole file in memory: it may be huge
        replayed += len(events)
        seen.update(event.trace_id for event in events)
        if isinstance(sink, _AppendsMissing):
            stored += sink.append_missing(events)
        else:
            if known is None:
                known = {record.event_id for record in sink.query(AuditQuery(limit=_READ_ALL))}
            stored += _store_new(sink, events, known)
    traces = sorted(seen)
    problems = _verify(sink, traces)
    if getattr(args, "json", False):
        document = {
            "ok": not invalid and not problems,
            "events": replayed,
            "stored": stored,
            "already_stored": replayed - stored,
            "invalid_lines": invalid,
            "traces": len(traces),
            "problems": [dataclasses.asdict(p) for p in problems],
        }
        print(json.dumps(document, indent=2))
    else:
        print(
            f"replayed {replayed} event(s) of {len(traces)} trace(s): {stored} stored, "
            f"{replayed - stored} already stored"
        )
        if invalid:
            print(f"skipped {len(invalid)} invalid line(s): {', '.join(map(str, invalid))}")
        for problem in problems:
            print(clean(problem))
        if not problems:
            print("chain intact" if traces else "nothing to verify")
    if problems:
        print(f"{_PROG}: audit chain broken after replay: {len(problems)} problem(s)", file=sys.stderr)
    if invalid:
        print(f"{_PROG}: {len(invalid)} line(s) of the fallback file are not valid events", file=sys.stderr)
    return 1 if invalid or problems else 0


def _chunks(path: Path, invalid: list[int]) -> Iterator[list[AuditEvent]]:
    """The valid events of the file in order, `_CHUNK` at a time; invalid line numbers go to ``invalid``.

    Lines are read one at a time, each at most `_MAX_LINE` bytes: a longer one is
    no event (skipped without being held in memory), so neither a huge line nor
    millions of lines can exhaust memory.
    """
    events: list[AuditEvent] = []
    with path.open("rb") as handle:
        for number, line in enumerate(_lines(handle), start=1):
            if line is None:
                invalid.append(number)
                continue
            if not line.strip():
                continue
            try:
                events.append(event_from_line(line))
            except (ValueError, RecursionError):  # JSON, Unicode and field errors are ValueErrors
                invalid.append(number)
            if len(events) >= _CHUNK:
                yield events
                events = []
    if events:
        yield events


def _lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """Each line of ``handle`` without its newline; None for a line longer than `_MAX_LINE`."""
    while True:
        line = handle.readline(_MAX_LINE + 1)
        if not line:
            return
        if len(line) > _MAX_LINE and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # the rest of the line, a piece at a time
                line = handle.readline(_MAX_LINE)
            yield None
            continue
        yield line.rstrip(b"\n")


def _store_new(sink: AuditSink, events: list[AuditEvent], known: set[str]) -> int:
    """Store the events whose ids are not in ``known`` (a store without `_AppendsMissing`; one writer)."""
    fresh = []
    for event in events:
        if event.event_id not in known:
            known.add(event.event_id)
            fresh.append(event)
    if fresh:
        sink.append(fresh)
    return len(fresh)


def _verify(sink: AuditSink, traces: Sequence[str]) -> list[ChainProblem]:
    problems: list[ChainProblem] = []
    for trace_id in traces:
        records = sink.read_trace(trace_id)
        problems += verify_chain(records)
        if isinstance(sink, TraceHeads):
            problems += verify_heads(records, sink.trace_heads(trace_id), trace_id=trace_id)
    return problems
