"""Queued calls: a call's `Opening` and `Closing` as plain values while they wait for the ASYNC writer.

A batch object waiting in the ASYNC queue outlives the collections its
callers' allocations trigger, so the garbage collector promotes it to its
oldest generation; those promotions are what trigger full collections, and
each full collection walks every object of the process. The same batch as a
tuple of strings, numbers and None (the arguments' names and values flat) is
untracked by the collector at its first pass (a closing at its first pass
after its opening's). The writer makes the drain's storage rows straight from
the tuples (`QueuedCalls.rows`): dicts of scalars, which the collector does
not track either; the batches themselves only after a failed write, for the
fallback file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, final

from toolbox.audit._batch import CallSubject, Closing, Opening, response_row, rows_of
from toolbox.audit._events import AuditEvent
from toolbox.audit._redaction import Redaction

__all__ = ["QueuedCalls", "queued"]

# Tags of the queued forms: plain ``object`` instances, which the collector never tracks.
_OPENING = object()
_CLOSING = object()
_FIRST_ARGUMENT = 17  # the index of an opening's first argument name; values alternate with names

#: The (cached) subject of a queued opening's fields: `AuditTrail.subject_of`.
SubjectOf = Callable[[str, str, str, "str | None", str, str], CallSubject]


def queued(batch: Sequence[AuditEvent], redaction: Redaction) -> object:
    """``batch`` as the ASYNC queue keeps it: a call's batch as a tuple, any other batch as it is.

    Only a batch whose subject redacts with ``redaction`` (the trail's) becomes a
    tuple: the writer finds the subject again by its fields, in the trail.
    """
    kind = type(batch)
    if kind is Opening:
        return _queued_opening(batch, redaction) or batch  # type: ignore[arg-type]
    if kind is Closing:
        closing: Closing = batch  # type: ignore[assignment]
        if closing.payload is not None:
            return batch  # a result's summary: the closing waits as it is (rare)
        opening = _queued_opening(closing.opening, redaction)
        if opening is None or closing.rules:  # rules decided after the opening: rare, kept as a batch
            return batch
        outcome = (closing.status, closing.reason_code, closing.duration, closing.attempt, closing.timestamp)
        return (_CLOSING, opening, *outcome)
    return batch


def _queued_opening(opening: Opening, redaction: Redaction) -> tuple[Any, ...] | None:
    """``opening``'s queued form, made once (its closing names the same tuple); None if it has none."""
    made = opening.queued
    if made is not None:
        return made
    subject, context = opening.subject, opening.context
    if subject.redaction is not redaction or opening.duration is not None:  # not the trail's, or closed
        return None
    made = opening.queued = (
        _OPENING,
        subject.name,
        subject.tool,
        subject.operation,
        subject.risk,
        subject.effect,
        subject.intent_kind,
        context.run_id,
        context.correlation_id,
        context.tenant,
        context.principal,
        context.parent_run_id,
        context.credential,
        opening.intent_text,
        opening.timestamp,
        opening.payload,
        opening.rules,
        # Names and values in turn: a dict (tracked or not), or a tuple made after this one,
        # would keep the tuple tracked.
        *chain.from_iterable(opening.arguments.items()),
    )
    return made


@final
class _QueuedContext:
    """The fields of a queued call's `toolbox.ExecutionContext` that its events carry."""

    __slots__ = ("correlation_id", "credential", "parent_run_id", "principal", "run_id", "tenant")

    def __init__(self, fields: tuple[Any, ...]) -> None:
        (
            self.run_id,
            self.correlation_id,
            self.tenant,
            self.principal,
            self.parent_run_id,
            self.credential,
        ) = fields


@final
class QueuedCalls:
    """The writer's side: a drain's items (as `queued` left them) as storage rows, or as batches."""

    __slots__ = ("_subject_of",)

    def __init__(self, subject_of: SubjectOf) -> None:
        self._subject_of = subject_of

    def rows(self, items: Sequence[object]) -> list[dict[str, Any]]:
        """Every event of ``items``, in order, in storage form (new dicts, like `LazyBatch.storage_rows`).

        A closing queued with its opening in the same drain copies the opening's
        request row, as a `Closing` does.
        """
        rows: list[dict[str, Any]] = []
        requests: dict[int, dict[str, Any]] = {}  # id of an opening's tuple (alive in items) -> its row
        for item in items:
            call: tuple[Any, ...] = item if type(item) is tuple and item else (None,)
            tag = call[0]
            if tag is _OPENING:
                made = self._opening(call).fresh_rows()
                requests[id(item)] = made[-1]
                rows += made
            elif tag is _CLOSING:
                _, opening, *outcome = call
                request = requests.get(id(opening))
                if request is None:  # its opening was stored by an earlier drain
                    rows += Closing(self._opening(opening), *outcome).fresh_rows()
                else:
                    rows.append(response_row(request, *outcome))
            else:
                rows += rows_of(item)  # type: ignore[arg-type]
        return rows

    def batches(self, items: Sequence[object]) -> list[Sequence[AuditEvent]]:
        """``items`` as batches, in order (after a failed write: their events go to the fallback file)."""
        made: list[Sequence[AuditEvent]] = []
        for item in items:
            call: tuple[Any, ...] = item if type(item) is tuple and item else (None,)
            tag = call[0]
            if tag is _OPENING:
                made.append(self._opening(call))
            elif tag is _CLOSING:
                _, opening, *outcome = call
                made.append(Closing(self._opening(opening), *outcome))
            else:
                made.append(item)  # type: ignore[arg-type]
        return made

    def _opening(self, item: tuple[Any, ...]) -> Opening:
        """The `Opening` ``item`` was made from (new events: a queued call was stored by no sink yet)."""
        name, tool, operation, risk, effect, intent_kind = item[1:7]
        intent_text, timestamp, payload, rules = item[13:_FIRST_ARGUMENT]
        arguments = dict(zip(item[_FIRST_ARGUMENT::2], item[_FIRST_ARGUMENT + 1 :: 2], strict=True))
        subject = self._subject_of(name, tool, operation, risk, effect, intent_kind)
        opening = Opening(subject, _QueuedContext(item[7:13]), intent_text, arguments, timestamp)
        opening.payload, opening.rules = payload, rules
        return opening
