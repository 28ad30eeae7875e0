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

A caller on an event loop cannot sleep: `submit_async` returns an asyncio
future instead, which the group's writer completes with one
``loop.call_soon_threadsafe`` per group and loop. A group whose callers all
wait that way is written by a writer thread of the group commit's own (at
most ``max_writers``, started on first use), which goes on to lead the next
such group itself: one wake-up of the loop per group, not two thread hops per
call. A group handed to a writer thread stays open until that thread starts
writing it, which is once the loop lets go of the interpreter lock: the batches
the loop's other callers submit in the same step join it (closed at hand-over,
the first caller's batch went alone: a third of the commits under the
service's load). A lone writer thread first lets the loop run the callers it
woke (at most `RESUME_WAIT`), so what they store next (a call's response)
joins the group it writes next.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from _thread import allocate_lock
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, final

__all__ = ["DEFAULT_MAX_GROUP", "GroupCommit"]

Item = TypeVar("Item")

#: The most batches one transaction takes: bounds its size and a follower's wait.
DEFAULT_MAX_GROUP = 256
_LOCK = type(allocate_lock())
_STOP: Any = object()  # tells a writer thread to end
#: The longest a writer thread waits for an event loop to run the callers it woke, in seconds.
RESUME_WAIT = 0.002


@final
class _Group(Generic[Item]):
    """The batches of one transaction, and its outcome once the leader has written them."""

    __slots__ = ("batches", "done", "error", "led", "waiting")

    def __init__(self) -> None:
        self.batches: list[Item] = []
        #: Whether a writer has it (it may still take batches until the writer starts: `_seal`).
        self.led = False
        self.done = False
        self.error: BaseException | None = None
        #: Its waiting callers: the locks threads sleep on, each held (releasing one wakes its
        #: caller), and the asyncio futures callers on event loops await.
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

    __slots__ = (
        "_closed",
        "_forming",
        "_handed",
        "_lock",
        "_max_group",
        "_max_writers",
        "_pid",
        "_unled",
        "_write",
        "_writing",
    )

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
        #: Groups for the writer threads (`submit_async`), made with them on first use.
        self._handed: queue.SimpleQueue[_Group[Item]] | None = None
        self._pid = 0
        self._closed = False

    def submit(self, batch: Item) -> None:
        """Store ``batch`` with whatever else is queued; return once it is committed.

        Raises:
            Exception: whatever ``write`` raised for the group ``batch`` was in.
        """
        with self._lock:
            group = self._join(batch)
            if not group.led and self._writing < self._max_writers:  # a writer is free, none waits: lead
                self._take_writer(group)
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
        self._lead(group, own_thread=False)
        if group.error is not None:
            raise group.error

    def submit_async(self, batch: Item) -> asyncio.Future[None]:
        """`submit` for a caller on the running event loop: a future, done once ``batch`` is committed.

        Never blocks the loop: the group is written by a waiting thread that leads
        it, or by a writer thread of this commit. The future's exception is
        whatever ``write`` raised for the group. Cancelling the future does not
        withdraw ``batch``: it is written with its group, or fails with it.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            group = self._join(batch)
            group.waiting.append(future)
            lead = not group.led and self._writing < self._max_writers
            if lead:
                self._take_writer(group, keep_forming=True)
        if lead:
            self._hand(group)
        return future

    def close(self) -> None:
        """Stop the writer threads once they are idle (a group handed later gets a thread of its own)."""
        with self._lock:
            self._closed = True
            handed, self._handed = self._handed, None
        if handed is not None and self._pid == os.getpid():
            for _ in range(self._max_writers):
                handed.put(_STOP)

    def _join(self, batch: Item) -> _Group[Item]:
        """(Under the lock.) The group ``batch`` joins: the forming one, or a new one when it is full."""
        group = self._forming
        if group is None or len(group.batches) >= self._max_group:
            group = self._forming = _Group()
            self._unled.append(group)
        group.batches.append(batch)
        return group

    def _take_writer(self, group: _Group[Item], *, keep_forming: bool = False) -> None:
        """(Under the lock, a writer free.) ``group``, just joined, is led now; later batches form the next.

        With ``keep_forming`` (a group handed to a writer thread), later batches still join
        it until its writer starts on it (`_seal`).
        """
        self._writing += 1
        self._unled.popleft()  # ``group``, the forming one: no other waits while a writer is free
        group.led = True
        if not keep_forming:
            self._forming = None

    def _hand(self, group: _Group[Item]) -> None:
        """Have a writer thread lead ``group``, whose callers all await futures."""
        with self._lock:
            handed = self._handed
            if handed is None or self._pid != os.getpid():  # first use, or a forked child: no thread yet
                handed = None if self._closed else self._start_writers()
        if handed is None:
            threading.Thread(target=self._lead, args=(group, True), daemon=True).start()
        else:
            handed.put(group)

    def _start_writers(self) -> queue.SimpleQueue[_Group[Item]]:
        """(Under the lock.) The writer threads, one per writer place, and the queue they take groups from."""
        handed: queue.SimpleQueue[_Group[Item]] = queue.SimpleQueue()
        for _ in range(self._max_writers):
            name = "toolbox-audit-group-commit"
            threading.Thread(target=self._serve, args=(handed,), name=name, daemon=True).start()
        self._handed, self._pid = handed, os.getpid()
        return handed

    def _serve(self, handed: queue.SimpleQueue[_Group[Item]]) -> None:
        """A writer thread: leads each group handed to it, until told to stop."""
        while (group := handed.get()) is not _STOP:
            self._lead(group, own_thread=True)

    def _lead(self, group: _Group[Item], own_thread: bool) -> None:
        """Write ``group``, wake its callers, and pass the writer's place on.

        The oldest group waiting for a writer is led next: by its first waiting
        thread, or, when all of its callers await futures, by this thread if it
        is a writer thread (``own_thread``), else by a writer thread. A writer
        thread that woke callers on an event loop first lets that loop run them
        (at most `RESUME_WAIT`): what they store next (a call's response after
        its opening) joins the group it writes next, not the one after.
        """
        # Only a lone writer's place waits for the loop: with several, a free one would lead meanwhile.
        defer = own_thread and self._max_writers == 1
        while True:
            deferred = False
            self._seal(group)
            try:
                self._write(group.batches)
            except BaseException as exc:  # noqa: BLE001 - every caller of the group gets it, the leader too
                group.error = exc
            finally:
                with self._lock:
                    group.done = True
                    woken = group.waiting
                    following = self._unled[0] if self._unled else None
                    if following is None:
                        self._writing -= 1
                    else:  # the oldest waiting group is led next, in this writer's place
                        leader = _first_thread(following.waiting)
                        deferred = leader is None and defer  # it stays open until the loop ran
                        if not deferred:
                            self._close(following)
                            if leader is not None:
                                woken.append(leader)
                                following = None
                ran = _wake(woken, group.error, deferred)
            if following is None:
                return
            if not own_thread:
                self._hand(following)
                return
            if deferred:
                if ran is not None:
                    ran.wait(RESUME_WAIT)
                with self._lock:  # the lone writer's place: the oldest group is still there
                    following = self._unled[0]
                    self._close(following)
            group = following

    def _seal(self, group: _Group[Item]) -> None:
        """(Its writer, about to write ``group``.) Later batches form the next group; those that
        joined it since it was handed over open (`_take_writer`) are written with it."""
        if self._forming is group:  # else sealed already: a group never forms again
            with self._lock:
                if self._forming is group:
                    self._forming = None

    def _close(self, group: _Group[Item]) -> None:
        """(Under the lock.) ``group``, the oldest waiting, is led now: later batches form the next."""
        self._unled.popleft()
        group.led = True
        if self._forming is group:
            self._forming = None


def _first_thread(waiting: list[Any]) -> Any:
    """The lock of the first thread among ``waiting`` (taken out of it), or None when all await futures."""
    for index, waiter in enumerate(waiting):
        if type(waiter) is _LOCK:
            return waiting.pop(index)
    return None


def _wake(waiting: list[Any], error: BaseException | None, signal: bool) -> threading.Event | None:
    """Wake each thread of ``waiting``; settle its futures with one call into each of their loops.

    With ``signal``, an event set once a loop whose futures were settled has run
    what was waiting on them (None: no future to settle).
    """
    loops: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for waiter in waiting:
        if type(waiter) is _LOCK:
            waiter.release()
        else:
            loops.setdefault(waiter.get_loop(), []).append(waiter)
    ran = threading.Event() if signal and loops else None
    for loop, futures in loops.items():
        try:
            loop.call_soon_threadsafe(_settle, futures, error, ran)
        except RuntimeError:  # that loop is closed: nothing awaits its futures any more
            if ran is not None:
                ran.set()
    return ran


def _settle(
    futures: list[asyncio.Future[None]], error: BaseException | None, ran: threading.Event | None
) -> None:
    """On the futures' loop: each is done, with ``error`` or without (a cancelled one stays cancelled).

    ``ran`` is set once the loop has run the callbacks this schedules (they come first).
    """
    for future in futures:
        if not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
    if ran is not None:
        asyncio.get_running_loop().call_soon(ran.set)
