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
from _thread import allocate_lock
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, final

__all__ = ["DEFAULT_MAX_GROUP", "GroupCommit"]

Item = TypeVar("Item")

#: The most batches one transaction takes: bounds its size and a follower's wait.
DEFAULT_MAX_GROUP = 256


@final
class _Group(Generic[Item]):
    """The batches of one transaction, and its outcome once the leader has written them."""

    __slots__ = ("batches", "done", "error", "waiting")

    def __init__(self) -> None:
        self.batches: list[Item] = []
        self.done = False
        self.error: BaseException | None = None
        #: The locks its waiting callers sleep on, each held: releasing one wakes its caller.
        self.waiting: list[Any] = []


@final
class GroupCommit(Generic[Item]):
    """Runs ``write(batches)`` for the batches concurrent `submit` calls bring, one group at a time.

    Thread-safe. ``write`` must store all of its batches in one transaction or
    none of them (it raises then). It runs in the thread of the group's leader,
    in at most ``max_writers`` threads at once.

    A waiting caller sleeps on a lock of its own, and a leader that is done
    wakes only the callers with something to do: those of the group it wrote,
    and one caller of the next group, which leads that group (the writer's
    place passes to it). A condition variable's ``notify_all`` woke every
    waiting thread at every commit, and each took the interpreter lock only
    to find its own group not written yet: with 32 callers, much of the CPU
    a commit cost.
    """

    __slots__ = ("_forming", "_lock", "_max_group", "_max_writers", "_unled", "_write", "_writing")

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
        self._lock = threading.Lock()
        #: The group new batches join (the last of `_unled`, until it is full or led).
        self._forming: _Group[Item] | None = None
        #: Groups waiting for a writer, oldest first: only while every writer is busy.
        self._unled: deque[_Group[Item]] = deque()
        self._writing = 0

    def submit(self, batch: Item) -> None:
        """Store ``batch`` with whatever else is queued; return once it is committed.

        Raises:
            Exception: whatever ``write`` raised for the group ``batch`` was in.
        """
        with self._lock:
            group = self._forming
            if group is None or len(group.batches) >= self._max_group:
                group = self._forming = _Group()
                self._unled.append(group)
            group.batches.append(batch)
            if self._writing < self._max_writers:  # a writer is free, so no other group waits: lead
                self._writing += 1
                self._unled.popleft()  # ``group``, made just now
                self._forming = None  # later batches form the next group
                wake = None
            else:
                wake = allocate_lock()
                wake.acquire()
                group.waiting.append(wake)
        if wake is not None:
            wake.acquire()  # released once: the group was written, or this caller is to lead it
            if group.done:
                if group.error is not None:
                    raise group.error
                return
        self._lead(group)
        if group.error is not None:
            raise group.error

    def _lead(self, group: _Group[Item]) -> None:
        try:
            self._write(group.batches)
        except BaseException as exc:  # noqa: BLE001 - every caller of the group gets it, the leader too
            group.error = exc
        finally:
            with self._lock:
                group.done = True
                woken = group.waiting
                if self._unled:  # the oldest waiting group's first caller leads it, in this writer's place
                    following = self._unled.popleft()
                    if self._forming is following:
                        self._forming = None
                    woken.append(following.waiting.pop(0))
                else:
                    self._writing -= 1
            for wake in woken:
                wake.release()
