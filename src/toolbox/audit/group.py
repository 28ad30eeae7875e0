"""Group commit: concurrent writers of one sink share one transaction.

A durable commit costs a disk flush (SQLite's WAL ``fsync``, PostgreSQL's WAL
flush), whatever it holds. So the first caller to find no write in progress
becomes the *leader*: it takes every batch queued so far, writes them in one
transaction and hands the outcome to each of their callers, the *followers*,
who wait for it. Batches that arrive while a leader writes form the next group;
one of their callers leads it once the write in progress has ended. A caller
alone pays one commit, as before; eight callers pay about one commit per group.

A group commits or fails as a whole: when the leader's write raises, nothing of
the group is stored and every caller of the group gets the error, so a STRICT
call whose events shared a failed transaction is refused, never half-recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, final

__all__ = ["DEFAULT_MAX_GROUP", "GroupCommit"]

Item = TypeVar("Item")

#: The most batches one transaction takes: bounds its size and a follower's wait.
DEFAULT_MAX_GROUP = 256


@final
class _Group(Generic[Item]):
    """The batches of one transaction, and its outcome once the leader has written them."""

    __slots__ = ("batches", "done", "error")

    def __init__(self) -> None:
        self.batches: list[Item] = []
        self.done = False
        self.error: BaseException | None = None


@final
class GroupCommit(Generic[Item]):
    """Runs ``write(batches)`` for the batches concurrent `submit` calls bring, one group at a time.

    Thread-safe. ``write`` must store all of its batches in one transaction or
    none of them (it raises then). It runs in the thread of the group's leader,
    never in two threads at once.
    """

    __slots__ = ("_changed", "_forming", "_max_group", "_write", "_writing")

    def __init__(
        self, write: Callable[[Sequence[Item]], None], *, max_group: int = DEFAULT_MAX_GROUP
    ) -> None:
        if max_group < 1:
            raise ValueError("max_group must be at least 1")
        self._write = write
        self._max_group = max_group
        self._changed = threading.Condition(threading.Lock())
        self._forming: _Group[Item] | None = None
        self._writing = False

    def submit(self, batch: Item) -> None:
        """Store ``batch`` with whatever else is queued; return once it is committed.

        Raises:
            Exception: whatever ``write`` raised for the group ``batch`` was in.
        """
        with self._changed:
            group = self._forming
            if group is None or len(group.batches) >= self._max_group:
                group = self._forming = _Group()
            group.batches.append(batch)
            while self._writing and not group.done:
                self._changed.wait()
            if not group.done:  # no write in progress: this caller leads its group
                self._writing = True
                if self._forming is group:
                    self._forming = None  # later batches form the next group
        if not group.done:
            self._lead(group)
        if group.error is not None:
            raise group.error

    def _lead(self, group: _Group[Item]) -> None:
        try:
            self._write(group.batches)
        except BaseException as exc:  # noqa: BLE001 - every caller of the group gets it, the leader too
            group.error = exc
        finally:
            with self._changed:
                group.done = True
                self._writing = False
                self._changed.notify_all()
