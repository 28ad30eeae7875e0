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

A store that can write a group without waiting for a lock another writer
holds (``write_on_loop``: SQLite's own writer) has the loop write its callers'
groups itself, once the callers ready in that step have submitted: on a local
disk the commit is shorter than the thread hand-offs it saves (a STRICT call
makes two durable writes, each a wake-up of a writer thread and of the loop:
about a third of the service's CPU a STRICT SQLite call). Where the store
cannot write without waiting (locked by another process, or a group the store
keeps off the loop), a writer thread writes the group and hands the next one
back to the loop. A write on the loop that took longer than `LOOP_WRITE_LIMIT`
(a slow disk) sends the loop's groups to writer threads for
`LOOP_WRITE_PAUSE` seconds: a slow store stalls the loop at most once in that
time.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
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
#: A write on the event loop that took longer than this (seconds) sends the loop's groups to a
#: writer thread for `LOOP_WRITE_PAUSE` seconds: the loop stalls for that long, every caller with it.
LOOP_WRITE_LIMIT = 0.005
LOOP_WRITE_PAUSE = 1.0


@final
class _Group(Generic[Item]):
    """The batches of one transaction, and its outcome once the leader has written them."""

    __slots__ = ("batches", "done", "error", "led", "offered", "waiting")

    def __init__(self) -> None:
        self.batches: list[Item] = []
        #: Whether a writer has it (it may still take batches until the writer starts: `_seal`).
        self.led = False
        #: Whether an event loop was asked to lead it (`_lead_on_loop`); until then, it forms.
        self.offered = False
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
        "_clock",
        "_closed",
        "_forming",
        "_handed",
        "_lock",
        "_loop_writes_from",
        "_max_group",
        "_max_writers",
        "_pid",
        "_unled",
        "_write",
        "_write_on_loop",
        "_writing",
    )

    def __init__(
        self,
        write: Callable[[Sequence[Item]], None],
        *,
        max_group: int = DEFAULT_MAX_GROUP,
        max_writers: int = 1,
        write_on_loop: Callable[[Sequence[Item]], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``write_on_loop``, when given, is ``write`` for the event loop's own thread: it never waits
        for a lock another writer holds, and returns False, having written nothing, where it would
        have to. ``clock`` (seconds) times the writes on the loop and their pause."""
        if max_group < 1 or max_writers < 1:
            raise ValueError("max_group and max_writers must be at least 1")
        self._write = write
        self._write_on_loop = write_on_loop
        self._clock = clock
        #: Before this time (``clock``), the loop's groups go to a writer thread (`_lead_on_loop`).
        self._loop_writes_from = 0.0
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

        Never waits on the loop for another writer: the group is written by a
        waiting thread that leads it, by a writer thread of this commit, or,
        with ``write_on_loop``, by the loop itself once its callers ready in
        this step have submitted (`_lead_on_loop`). The future's exception is
        whatever ``write`` raised for the group. Cancelling the future does not
        withdraw ``batch``: it is written with its group, or fails with it.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            group = self._join(batch)
            group.waiting.append(future)
            lead = offer = False
            if not group.led and not group.offered and self._writing < self._max_writers:
                if self._loop_writes():
                    group.offered = offer = True
                else:
                    self._take_writer(group, keep_forming=True)
                    lead = True
        if offer:  # after the callers ready in this step, whose batches join it
            loop.call_soon(self._lead_on_loop, group)
        elif lead:
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
        if self._unled[0] is group:
            self._unled.popleft()
        else:  # an older group waits for the loop it was offered to (`_lead_on_loop`)
            self._unled.remove(group)
        group.led = True
        if not keep_forming and self._forming is group:
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
            self._seal(group)
            try:
                self._write(group.batches)
            except BaseException as exc:  # noqa: BLE001 - every caller of the group gets it, the leader too
                group.error = exc
            following, deferred, ran = self._pass_on(group, defer)
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

    def _lead_on_loop(self, group: _Group[Item]) -> None:
        """(On the loop ``group`` was offered to, after the callers ready then.) Lead ``group`` if a
        writer's place is free and nobody leads it: write it here, or have a writer thread write
        it when the store would make the loop wait.

        Otherwise another writer leads it, or passes its place to it (`_pass_on`):
        a loop that never runs this (closed first) leaves the group to the next
        caller, who finds it forming and a place free.
        """
        assert self._write_on_loop is not None
        with self._lock:
            group.offered = False
            if group.led or self._writing >= self._max_writers:
                return
            self._take_writer(group)
        started = self._clock()
        try:
            written = self._write_on_loop(group.batches)
        except BaseException as exc:  # noqa: BLE001 - every caller of the group gets it
            group.error, written = exc, True
        if not written:  # the store would make the loop wait: a writer thread waits instead
            self._hand(group)
            return
        if self._clock() - started > LOOP_WRITE_LIMIT:  # a slow store: the loop's groups go to threads
            self._loop_writes_from = self._clock() + LOOP_WRITE_PAUSE
        following, _, _ = self._pass_on(group, defer=False)
        if following is not None:
            self._hand(following)

    def _loop_writes(self) -> bool:
        """Whether groups whose callers all await futures of one loop are offered to that loop."""
        return self._write_on_loop is not None and self._clock() >= self._loop_writes_from

    def _pass_on(
        self, group: _Group[Item], defer: bool
    ) -> tuple[_Group[Item] | None, bool, threading.Event | None]:
        """``group`` written (or failed): wake its callers and pass the writer's place on.

        The oldest group waiting is led next: by its first waiting thread (woken
        here), by its callers' loop when they all await futures of one loop and
        the loop writes (offered: the place is free until it leads), or by this
        writer. Returns the group this writer leads next (None: someone else
        does, or none waits), whether it was left open until the loop has run
        the callers woken (``defer``: a lone writer thread), and the event set
        once it has.
        """
        deferred = False
        offered_to = None
        with self._lock:
            group.done = True
            woken = group.waiting
            following = self._unled[0] if self._unled else None
            if following is None:
                self._writing -= 1
            else:
                leader = _first_thread(following.waiting)
                if leader is None and self._loop_writes():
                    offered_to = _loop_of(following.waiting)
                if offered_to is not None:  # the callers' loop leads it, once they ran
                    self._writing -= 1
                    following.offered = True
                else:
                    deferred = leader is None and defer  # it stays open until the loop ran
                    if not deferred:
                        self._close(following)
                        if leader is not None:
                            woken.append(leader)
                            following = None
        ran = _wake(woken, group.error, deferred)
        if offered_to is not None:
            assert following is not None
            self._offer(offered_to, following)
            following = None
        return following, deferred, ran

    def _offer(self, loop: asyncio.AbstractEventLoop, group: _Group[Item]) -> None:
        """Have ``loop`` lead ``group`` after the callers it runs first (those just woken)."""
        if asyncio._get_running_loop() is loop:
            loop.call_soon(self._lead_on_loop, group)
            return
        try:
            loop.call_soon_threadsafe(loop.call_soon, self._lead_on_loop, group)
        except RuntimeError:  # that loop is closed: nobody awaits there; a writer thread writes it
            with self._lock:
                group.offered = False
                lead = not group.led and self._writing < self._max_writers
                if lead:
                    self._take_writer(group)
            if lead:
                self._hand(group)

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


def _loop_of(waiting: list[Any]) -> asyncio.AbstractEventLoop | None:
    """The event loop of every future of ``waiting`` (None: a thread waits too, or several loops)."""
    loop = None
    for waiter in waiting:
        if type(waiter) is _LOCK or (loop is not None and waiter.get_loop() is not loop):
            return None
        loop = waiter.get_loop()
    return loop


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
    running = asyncio._get_running_loop()  # a write on a loop settles that loop's futures at once
    for loop, futures in loops.items():
        if loop is running:
            _settle(futures, error, ran)
            continue
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
