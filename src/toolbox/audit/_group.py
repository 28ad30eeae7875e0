"""Group commit: concurrent writers of one sink share one transaction.

A durable commit costs a disk flush (SQLite's WAL ``fsync``, PostgreSQL's WAL
flush), whatever it holds. So the first caller to find no write in progress
becomes the *leader*: it takes every batch queued so far, writes them in one
transaction and hands the outcome to each of their callers, the *followers*,
who wait for it. Batches that arrive while a leader writes form the next group;
one of their callers leads it once the write in progress has ended. A caller
alone pays one commit, as before; eight callers pay about one commit per group.

A store that runs transactions side by side (PostgreSQL: the row locks of the
trace heads order writers of the same trace, and the server flushes
concurrent commits together) may allow ``max_writers`` leaders at once: a
caller then waits only when that many groups are being written.

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

    __slots__ = ("batches", "done", "error", "led")

    def __init__(self) -> None:
        self.batches: list[Item] = []
        self.led = False  # a caller of the group is writing it: the others only wait
        self.done = False
        self.error: BaseException | None = None


@final
class GroupCommit(Generic[Item]):
    """Runs ``write(batches)`` for the batches concurrent `submit` calls bring, one group at a time.

    Thread-safe. ``write`` must store all of its batches in one transaction or
    none of them (it raises then). It runs in the thread of the group's leader,
    in at most ``max_writers`` threads at once.
    """

    __slots__ = ("_changed", "_forming", "_max_group", "_max_writers", "_write", "_writing")

    def __init__(
        self,
        write: Callable[[Sequence[Item]], None],
        *,
        max_group: int = DEFAULT_MAX_GROUP,
        max_writers: int = 1,
    ) -> None:
        if max_group < 1 or max_writers < 1:
            raise ValueError("max_group and max_writers must be at least 1")
        self._write = write
        self._max_group = max_group
        self._max_writers = max_writers
        self._changed = threading.Condition(threading.Lock())
        self._forming: _Group[Item] | None = None
        self._writing = 0

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
            while not group.done and (group.led or self._writing >= self._max_writers):
                self._changed.wait()
            leads = not group.done
            if leads:  # a writer is free and nobody writes this group yet: this caller leads it
                group.led = True
                self._writing += 1
                if self._forming is group:
                    self._forming = None  # later batches form the next group
        if leads:
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
                self._writing -= 1
                self._changed.notify_all()
