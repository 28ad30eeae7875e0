"""`AuditTrail`: turns invocations into ordered, chained events, in one of three modes.

- ``STRICT``: events are written before the operation runs; a failed write is
  DENIED/AUDIT_UNAVAILABLE with zero executions. A failed write *after* it
  never hides that it ran: the result keeps its status and sets
  ``audit_failed``, the typed door raises `AuditIncompleteError`, and the
  events go to a local fallback file for `replay_fallback`. On the async
  door, a sink with an awaitable append (the SQL sinks) is awaited
  (`awaits_writes`): the call waits for its events on the event loop without
  blocking it.
- ``ASYNC``: events go to a bounded queue drained by a background writer. A
  full queue or a dead writer fails closed like STRICT. `flush`, `close` and
  interpreter exit drain the queue: nothing accepted is lost on a normal
  shutdown.
- ``BEST_EFFORT``: a failed write logs a warning and the call goes on. Not for
  regulated use.
"""

from __future__ import annotations

import atexit
import enum
import logging
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from toolbox.audit._batch import CallSubject, Closing, LazyBatch, Opening, immutable_copy
from toolbox.audit._events import AuditEvent
from toolbox.audit._fallback import FallbackFile, FallbackReplay
from toolbox.audit._handoff import Handoff
from toolbox.audit._queued import QueuedCalls, queued
from toolbox.audit._redaction import Redaction
from toolbox.audit._refusals import call_arguments, decided_by, denial_event, refusal_events, untrusted_event
from toolbox.audit._sink import AuditSink
from toolbox.audit._trail_reads import TrailReads
from toolbox.errors import ConfigurationError
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._audit_hooks import audit_unavailable, opened
from toolbox.pipeline._result import ToolResult
from toolbox.pipeline._result_summary import result_summary

if TYPE_CHECKING:
    from toolbox.pipeline._invocation import Invocation

__all__ = ["AuditMode", "AuditTrail", "audit_unavailable"]

LOGGER = logging.getLogger("toolbox.audit")
_CACHED_SUBJECTS = 4096
_STOP = object()
#: The most queued batches the ASYNC writer stores in one append (one transaction).
_DRAIN_BATCHES = 1024


class AuditMode(str, enum.Enum):
    """How audit writes relate to the calls they record."""

    STRICT = "STRICT"
    ASYNC = "ASYNC"
    BEST_EFFORT = "BEST_EFFORT"


@final
class AuditTrail(TrailReads):
    """The audit trail of a catalog: an `AuditSink`, a mode, redaction and read-back."""

    def __init__(
        self,
        sink: AuditSink,
        *,
        mode: AuditMode | str = AuditMode.STRICT,
        fallback_path: str | os.PathLike[str] | None = "toolbox-audit-fallback.jsonl",
        redaction: Redaction | None = None,
        queue_size: int = 10_000,
        auditor_roles: Sequence[str] = ("auditor",),
    ) -> None:
        """Args:
        sink: where events are stored.
        mode: STRICT (default), ASYNC or BEST_EFFORT.
        fallback_path: where events that could not be written after a call are kept for
            `replay_fallback` (None disables it; then only the flag and the error remain).
        redaction: what of the arguments is stored.
        queue_size: ASYNC only: the bound of the queue.
        auditor_roles: principals with one of these roles read every tenant's events.
        """
        if not isinstance(sink, AuditSink):
            raise ConfigurationError(f"{sink!r} is not an audit sink (append, read_trace, query, close)")
        try:
            self.mode = AuditMode(mode)
        except ValueError:
            raise ConfigurationError(
                f"unknown audit mode {mode!r}; use STRICT, ASYNC or BEST_EFFORT"
            ) from None
        if not isinstance(queue_size, int) or queue_size < 1:
            raise ConfigurationError("queue_size must be a positive integer")
        if isinstance(auditor_roles, str) or not all(isinstance(r, str) and r for r in auditor_roles):
            raise ConfigurationError('auditor_roles must be a list of role names, e.g. ["auditor"]')
        self.sink = sink
        self._best_effort = self.mode is AuditMode.BEST_EFFORT
        self._append = sink.append  # bound once: it runs twice per call
        # A durable sink's awaitable append (SqlSink.aappend): the async door awaits its writes,
        # on the event loop. (Not in ASYNC mode: there every write only enqueues.)
        aappend = getattr(sink, "aappend", None) if self.mode is not AuditMode.ASYNC else None
        self._aappend: Callable[[Sequence[AuditEvent]], Awaitable[None]] | None = (
            aappend if callable(aappend) else None
        )
        # A sink that stores several batches in one call (SqlSink) takes the ASYNC writer's drain as it is.
        append_batches = getattr(sink, "append_batches", None)
        self._append_batches: Callable[[Sequence[Sequence[AuditEvent]]], None] | None = (
            append_batches if callable(append_batches) else None
        )
        # A sink that stores rows (SqlSink) gets the ASYNC writer's drain as rows made from calls
        # queued as plain values (toolbox.audit._queued): no batch object waits in the queue.
        append_rows = getattr(sink, "append_rows", None) if self.mode is AuditMode.ASYNC else None
        self._append_rows: Callable[[list[dict[str, Any]]], None] | None = (
            append_rows if callable(append_rows) else None
        )
        self._subjects: dict[tuple[str, str, str, str | None, str, str], CallSubject] = {}
        # A sink that holds lazy batches without failing takes them directly (no queue needed).
        hold = getattr(sink, "hold", None)
        # (Not in ASYNC mode: held and queued events would then be stored out of order.)
        direct = callable(hold) and self.mode is not AuditMode.ASYNC
        self._hold: Callable[[LazyBatch], None] | None = hold if direct else None
        if self._hold is not None:  # a held write never waits: nothing to await
            self._aappend = None
        # A sink that says so reads a closed Opening held a second time as its response.
        twice = self._hold is not None and getattr(sink, "holds_openings_twice", False) is True
        self._hold_twice = self._hold if twice else None
        # A sink that holds calls as plain tuples (toolbox.audit._held.held_call), under the same terms.
        hold_call = getattr(sink, "hold_call", None)
        held = direct and callable(hold_call) and callable(getattr(sink, "subject_key", None))
        self._hold_call: Callable[[tuple[Any, ...]], None] | None = hold_call if held else None
        self.redaction = redaction or Redaction()
        self.fallback_path = Path(fallback_path) if fallback_path is not None else None
        self._fallback = FallbackFile(self.fallback_path) if self.fallback_path is not None else None
        self.auditor_roles = frozenset(auditor_roles)
        self._queue: Handoff[object] | None = None
        self._writer: threading.Thread | None = None
        self._writer_failed = False
        self._closed = False
        if self.mode is AuditMode.ASYNC:
            self._queue = Handoff(queue_size)
            self._writer = threading.Thread(target=self._drain, name="toolbox-audit-writer", daemon=True)
            self._writer.start()
            atexit.register(self.close)

    # -- writing ------------------------------------------------------------------

    def _store(self, events: Sequence[AuditEvent]) -> bool:
        """Write or enqueue ``events``; False when they were not accepted."""
        if self._queue is not None:
            return self._enqueue(events)
        try:
            self._append(events)
        except Exception as exc:  # noqa: BLE001 - any sink failure is an audit failure
            return _write_failed(exc, events)
        return True

    async def _astore(self, events: Sequence[AuditEvent]) -> bool:
        """`_store`, the write awaited on the event loop when the sink can (`awaits_writes`)."""
        aappend = self._aappend
        if aappend is None:
            return self._store(events)
        try:
            await aappend(events)
        except Exception as exc:  # noqa: BLE001 - any sink failure is an audit failure
            return _write_failed(exc, events)
        return True

    def _enqueue(self, events: Sequence[AuditEvent]) -> bool:
        assert self._queue is not None and self._writer is not None
        if self._closed or self._writer_failed or not self._writer.is_alive():
            return False
        try:
            self._queue.offer(events if self._append_rows is None else queued(events, self.redaction))
        except queue.Full:
            LOGGER.warning("audit queue full; %d event(s) refused", len(events))
            return False
        return True

    def _drain(self) -> None:
        """The ASYNC writer: every batch queued so far goes to the sink in one append (one transaction)."""
        assert self._queue is not None
        calls = QueuedCalls(self.subject_of)
        self._queue.consume(lambda items: self._write_drained(items, calls), _DRAIN_BATCHES, _STOP)

    def _write_drained(self, items: list[object], calls: QueuedCalls) -> None:
        try:
            if self._append_rows is not None:
                self._append_rows(calls.rows(items))
            elif self._append_batches is not None:
                self._append_batches(calls.batches(items))
            else:
                batches = calls.batches(items)
                self.sink.append(batches[0] if len(batches) == 1 else [e for batch in batches for e in batch])
        except Exception as exc:  # noqa: BLE001 - keep accepted events, then fail closed
            self._writer_failed = True
            LOGGER.error("audit writer failed (%s); events kept in the fallback file", type(exc).__name__)
            self._keep([event for batch in calls.batches(items) for event in batch])

    def _keep(self, events: Sequence[AuditEvent]) -> bool:
        """Append ``events`` (unchained) to the fallback file for a later replay."""
        return self._fallback is not None and self._fallback.keep(events)

    # -- pipeline hook points ---------------------------------------------------------

    def subject(self, invocation: Invocation) -> CallSubject:
        """What the events of ``invocation`` repeat, redacted by this trail's settings."""
        descriptor = invocation.descriptor
        return self.subject_of(
            invocation.name,
            invocation.tool,
            invocation.operation,
            descriptor.risk.value if descriptor is not None else None,
            invocation.effect.value,
            invocation.record.intent_kind,
        )

    def subject_of(  # noqa: PLR0917 - the fields of a CallSubject, in order
        self, name: str, tool: str, operation: str, risk: str | None, effect: str, intent_kind: str
    ) -> CallSubject:
        """The (cached) `CallSubject` of these fields."""
        key = (name, tool, operation, risk, effect, intent_kind)
        subject = self._subjects.get(key)
        if subject is None:
            subject = CallSubject(*key, self.redaction)
            if len(self._subjects) < _CACHED_SUBJECTS:
                self._subjects[key] = subject
        return subject

    def open_call(
        self,
        subject: CallSubject,
        context: ExecutionContext,
        intent_text: str,
        arguments: Mapping[str, Any],
        rules: tuple[str, ...] = (),
    ) -> Opening | None:
        """Store the opening events of a call about to run; None means refuse the call.

        Arguments of immutable values are copied and redacted when the events are
        read; any others are redacted now, as they may change afterwards.
        """
        opening = self.opening(subject, context, intent_text, arguments, rules)
        return opening if self.store_opening(opening) else None

    def opening(
        self,
        subject: CallSubject,
        context: ExecutionContext,
        intent_text: str,
        arguments: Mapping[str, Any],
        rules: tuple[str, ...] = (),
    ) -> Opening:
        """The opening events of a call about to run, not stored yet (`open_call` stores them)."""
        snapshot = immutable_copy(arguments)
        kept = {} if snapshot is None else snapshot
        opening = Opening(subject, context, intent_text, kept, time.time())
        if snapshot is None:
            opening.payload = self.redaction.payload_fields(arguments)
        opening.rules = rules
        return opening

    def close_call(  # noqa: PLR0917 - positional on purpose: the fast paths' hot path
        self,
        opening: Opening,
        status: str,
        duration: float,
        attempts: int,
        ended: float,
        summary: tuple[str, str] | None = None,
    ) -> bool:
        """Store the response event of a call a fast path opened (``summary``: the result's own
        ``(summary, sha256)``, stored as `on_response` stores it); False means it is missing."""
        if summary is None and self._hold_twice is not None and status == "SUCCESS" and attempts == 1:
            # The sink keeps the opening a second time as the response: one object per call.
            opening.close_in_place(duration, ended)
            self._hold_twice(opening)
            return True
        return self.store_closing(self.closing(opening, status, duration, attempts, ended, summary))

    def closing(  # noqa: PLR0917 - close_call's fields
        self,
        opening: Opening,
        status: str,
        duration: float,
        attempts: int,
        ended: float,
        summary: tuple[str, str] | None = None,
    ) -> Closing:
        """The response event of an opened call, not stored yet (`close_call` stores it)."""
        closing = Closing(opening, status, None, duration, attempts, ended)
        if summary is not None:
            closing.payload = self.redaction.summary_fields(*summary)
        return closing

    @property
    def direct_hold(self) -> Callable[[LazyBatch], None] | None:
        """The sink's ``hold``, when `store_opening` and `store_closing` come down to it; else None.

        A sink's ``hold`` keeps a lazy batch and cannot fail (the memory sink's).
        """
        return self._hold

    @property
    def awaits_writes(self) -> bool:
        """Whether the async door awaits this trail's writes (`astore_opening`, `aon_request`, ...).

        True for a STRICT or BEST_EFFORT trail on a sink with an awaitable append
        (the SQL sinks): a call on the event loop then waits for its events to be
        durable without blocking the loop.
        """
        return self._aappend is not None

    @property
    def blocks_callers(self) -> bool:
        """Whether a write from the sync door may wait on I/O in the calling thread, with no
        awaitable form: a call recorded in this trail must then not run on an event loop."""
        return self._hold is None and self._queue is None and self._aappend is None

    @property
    def call_hold(self) -> Callable[[tuple[Any, ...]], None] | None:
        """The sink's ``hold_call``, when it keeps held calls (`held_call`) and cannot fail; else None."""
        return self._hold_call

    def subject_key(self, subject: CallSubject, names: tuple[str, ...]) -> int:
        """The key the sink's held calls name ``subject`` by (only when `call_hold` is not None)."""
        return self.sink.subject_key(subject, names)  # type: ignore[attr-defined, no-any-return]

    def store_opening(self, opening: Opening) -> bool:
        """Store the opening events of a call about to run; False means refuse the call."""
        if self._hold is not None:
            self._hold(opening)
            return True
        return self._store(opening) or self._best_effort

    async def astore_opening(self, opening: Opening) -> bool:
        """`store_opening`, the write awaited: True once the opening is durable (`awaits_writes`)."""
        if self._aappend is None:
            return self.store_opening(opening)
        return await self._astore(opening) or self._best_effort

    def store_closing(self, closing: Closing) -> bool:
        """Store the response event of a call whose opening was stored; False means it is missing.

        The events of a missing response go to the fallback file.
        """
        if self._hold is not None:
            self._hold(closing)
            return True
        return self._closing_stored(closing, self._store(closing))

    async def astore_closing(self, closing: Closing) -> bool:
        """`store_closing`, the write awaited: True once the response is durable (`awaits_writes`)."""
        if self._aappend is None:
            return self.store_closing(closing)
        return self._closing_stored(closing, await self._astore(closing))

    def _closing_stored(self, closing: Closing, stored: bool) -> bool:
        if stored or self._best_effort:
            return True
        self._keep(closing)
        return False

    def on_request(self, invocation: Invocation) -> ToolResult | None:
        """Before dispatch: intent, decision and request. A failed write refuses the call."""
        rules = decided_by(invocation)
        subject, text = self.subject(invocation), invocation.record.intent_text
        opening = self.open_call(subject, invocation.context, text, call_arguments(invocation), rules)
        return opened(invocation, opening)

    async def aon_request(self, invocation: Invocation) -> ToolResult | None:
        """`on_request`, the write awaited (`awaits_writes`): the tool runs only once it is durable."""
        rules = decided_by(invocation)
        subject, text = self.subject(invocation), invocation.record.intent_text
        opening = self.opening(subject, invocation.context, text, call_arguments(invocation), rules)
        return opened(invocation, opening if await self.astore_opening(opening) else None)

    def on_response(self, invocation: Invocation, result: ToolResult) -> None:
        """After the outcome: the response event (after a refusal, the decision events too)."""
        closing = self._response(invocation, result)
        if closing is not None:
            if not self.store_closing(closing):
                result.audit_failed = True
            return
        events = self._refusal(invocation, result)
        if events is not None:
            self._refusal_stored(invocation, result, events, self._store(events))

    async def aon_response(self, invocation: Invocation, result: ToolResult) -> None:
        """`on_response`, the write awaited (`awaits_writes`): the result is given once it is durable."""
        closing = self._response(invocation, result)
        if closing is not None:
            if not await self.astore_closing(closing):
                result.audit_failed = True
            return
        events = self._refusal(invocation, result)
        if events is not None:
            self._refusal_stored(invocation, result, events, await self._astore(events))

    def _response(self, invocation: Invocation, result: ToolResult) -> Closing | None:
        """The response event of a call whose opening was stored; None for a refused call."""
        opening = invocation.opening
        if opening is None:
            return None
        record = invocation.record
        status, reason = result.status.value, result.reason_code or result.error_code
        # A spend after the opening may add a warning (a fail-open rate limit): its rule goes here.
        late = decided_by(invocation) if invocation.warnings else ()
        late = tuple(rule for rule in late if rule not in opening.rules) if late else late
        closing = Closing(opening, status, reason, record.duration, record.attempts, time.time(), late)
        summary = result_summary(result.content) if result.content is not None else None
        if summary is not None:
            closing.payload = self.redaction.summary_fields(*summary)
        return closing

    def _refusal_stored(
        self, invocation: Invocation, result: ToolResult, events: list[AuditEvent], stored: bool
    ) -> None:
        if not stored and not self._best_effort:
            result.audit_failed = True
            if invocation.commit is None:
                self._keep(events)
            # else: its effect waits on this record (an approval request): the chain refuses the call
            # as AUDIT_UNAVAILABLE instead, and that outcome is what the fallback file keeps.

    def _refusal(self, invocation: Invocation, result: ToolResult) -> list[AuditEvent] | None:
        """The events of a call refused before its opening was stored, to store; None when they
        went to the fallback file (its opening could not be stored: the store is failing)."""
        summary, digest = self.redaction.payload_fields(call_arguments(invocation))
        events = refusal_events(self.subject(invocation), invocation, result, summary, digest)
        if result.reason_code == "AUDIT_UNAVAILABLE":
            self._keep(events)
            return None
        return events

    def on_denial(
        self, context: ExecutionContext, tool: str, reason_code: str, rule: str, *, operation: str = ""
    ) -> None:
        """A denial outside the chain: ``Tools.get`` (no operation yet), or a name outside a toolset."""
        event = denial_event(context, tool, reason_code, rule, operation)
        if not self._store([event]):
            self._keep([event])

    def on_untrusted(self, name: str) -> None:
        """A by-name call refused for lack of a trusted context."""
        event = untrusted_event(name)
        if not self._store([event]):
            self._keep([event])

    # -- lifecycle ----------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every accepted event is written (ASYNC); a no-op otherwise."""
        if self._queue is None:
            return
        self._queue.join(timeout)

    def close(self) -> None:
        """Drain the queue, stop the writer and close the sink. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._queue is not None and self._writer is not None and self._writer.is_alive():
            self._queue.put(_STOP)
            self._writer.join()
        self.sink.close()

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    @property
    def healthy(self) -> bool:
        """False once the ASYNC writer failed or stopped: calls are then refused."""
        if self.mode is not AuditMode.ASYNC:
            return True
        return not self._writer_failed and self._writer is not None and self._writer.is_alive()

    @property
    def queue_depth(self) -> int:
        """Batches of events (one per store) waiting for the ASYNC writer; 0 in the modes that write inline.

        Read-only and approximate: for monitoring, never for decisions.
        """
        return self._queue.qsize() if self._queue is not None else 0

    def replay_fallback(self) -> int:
        """Store the events kept in the fallback file, then empty it; returns how many were stored.

        A line that is not a valid event, or an event the sink refuses on its own, never
        blocks the others: it is moved to ``<fallback>.quarantine`` and its line number
        logged (`replay_fallback_report` says which). If the sink accepts nothing, this
        raises and the fallback file keeps its valid lines.
        """
        return self.replay_fallback_report().stored

    def replay_fallback_report(self) -> FallbackReplay:
        """`replay_fallback`, returning how many events were stored and which lines were quarantined."""
        if self._fallback is None:
            return FallbackReplay(0)
        return self._fallback.replay(self.sink.append)


def _write_failed(exc: Exception, events: Sequence[AuditEvent]) -> bool:
    """A sink failed to store ``events``: the warning names the error's type only; False."""
    LOGGER.warning("audit write failed (%s); %d event(s) not stored", type(exc).__name__, len(events))
    return False
