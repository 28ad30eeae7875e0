"""Group commit written on the event loop itself: `GroupCommit(write_on_loop=...)`.

A store that can write without waiting for another writer (SQLite's own
writer) has the loop write its callers' groups, after the callers ready in
that step; where the store would make the loop wait, or the loop's writes got
slow, a writer thread writes instead. These tests attack the edges: a store
that refuses, a thread that joins a group the loop was offered, a loop that
closes before it leads, a slow write, a failing one. Time is a fake clock:
nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from toolbox.audit import AuditSinkError
from toolbox.audit._group import LOOP_WRITE_LIMIT, LOOP_WRITE_PAUSE, GroupCommit


class Clock:
    """A clock the test (and the writes) move."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Store:
    """Both writes of a store, recording each group, where it was written, and by which write."""

    def __init__(self, clock: Clock, *, refuse: Callable[[int], bool] = lambda n: False) -> None:
        self.groups: list[tuple[str, list[int], int]] = []  # (which write, batches, thread)
        self.clock = clock
        self.refuse = refuse  # the loop write's number -> whether the store would make it wait
        self.loop_takes = 0.0  # seconds each write on the loop moves the clock
        self.fail: Callable[[list[int]], bool] = lambda batches: False
        self.thread_gate = threading.Event()
        self.thread_gate.set()
        self.thread_entered = threading.Event()
        self._loop_writes = 0

    def write(self, batches: Sequence[int]) -> None:
        self.thread_entered.set()
        assert self.thread_gate.wait(30)
        self._record("thread", batches)

    def write_on_loop(self, batches: Sequence[int]) -> bool:
        number, self._loop_writes = self._loop_writes, self._loop_writes + 1
        if self.refuse(number):
            return False
        self.clock.now += self.loop_takes
        self._record("loop", batches)
        return True

    def _record(self, where: str, batches: Sequence[int]) -> None:
        if self.fail(list(batches)):
            raise AuditSinkError("store down")
        self.groups.append((where, list(batches), threading.get_ident()))

    def where(self) -> list[tuple[str, list[int]]]:
        return [(where, batches) for where, batches, _ in self.groups]


def commit(store: Store, clock: Clock, **options: int) -> GroupCommit[int]:
    return GroupCommit(store.write, write_on_loop=store.write_on_loop, clock=clock, **options)


def test_the_callers_of_one_loop_step_share_one_write_on_the_loop_thread() -> None:
    clock = Clock()
    store = Store(clock)
    group = commit(store, clock)

    async def main() -> int:
        await asyncio.gather(*(group.submit_async(n) for n in range(8)))
        await group.submit_async(8)  # alone in its step: a write of its own, on the loop again
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert store.where() == [("loop", list(range(8))), ("loop", [8])]
    assert {thread for _, _, thread in store.groups} == {loop_thread}
    assert group._writing == 0 and not group._unled and group._forming is None
    group.close()


def test_a_group_the_store_would_make_wait_goes_to_a_writer_thread_and_the_next_comes_back() -> None:
    """The loop's first write is refused (another writer holds the store): a writer thread writes
    that group; callers who queue meanwhile form the next, which the loop writes again."""
    clock = Clock()
    store = Store(clock, refuse=lambda n: n == 0)
    store.thread_gate.clear()
    group = commit(store, clock)

    async def main() -> int:
        first = group.submit_async(0)
        await asyncio.to_thread(store.thread_entered.wait, 30)  # the writer thread has it
        queued = [group.submit_async(n) for n in range(1, 5)]
        store.thread_gate.set()
        await asyncio.gather(first, *queued)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert store.where() == [("thread", [0]), ("loop", [1, 2, 3, 4])]
    assert store.groups[0][2] != loop_thread and store.groups[1][2] == loop_thread
    group.close()


def test_a_slow_write_on_the_loop_sends_its_groups_to_a_thread_until_the_pause_ends() -> None:
    clock = Clock()
    store = Store(clock)
    store.loop_takes = LOOP_WRITE_LIMIT * 2  # a slow disk
    group = commit(store, clock)

    async def main() -> None:
        await group.submit_async(0)  # on the loop, and too slow
        store.loop_takes = 0.0
        await group.submit_async(1)  # paused: a writer thread
        clock.now += LOOP_WRITE_PAUSE / 2
        await group.submit_async(2)  # still paused
        clock.now += LOOP_WRITE_PAUSE
        await group.submit_async(3)  # the pause is over: the loop again

    asyncio.run(main())
    assert store.where() == [("loop", [0]), ("thread", [1]), ("thread", [2]), ("loop", [3])]
    group.close()


def test_a_write_at_the_limit_keeps_the_loop_writing() -> None:
    clock = Clock()
    store = Store(clock)
    store.loop_takes = LOOP_WRITE_LIMIT
    group = commit(store, clock)

    async def main() -> None:
        await group.submit_async(0)
        await group.submit_async(1)

    asyncio.run(main())
    assert store.where() == [("loop", [0]), ("loop", [1])]
    group.close()


def test_a_failed_write_on_the_loop_fails_each_of_its_callers_and_the_next_group_is_written() -> None:
    clock = Clock()
    store = Store(clock)
    store.fail = lambda batches: 1 in batches
    group = commit(store, clock)

    async def main() -> list[BaseException | None]:
        outcomes = await asyncio.gather(*(group.submit_async(n) for n in range(4)), return_exceptions=True)
        await group.submit_async(9)
        return [o if isinstance(o, BaseException) else None for o in outcomes]

    outcomes = asyncio.run(main())
    assert all(isinstance(o, AuditSinkError) and "store down" in str(o) for o in outcomes)
    assert store.where() == [("loop", [9])]
    assert group._writing == 0 and not group._unled
    group.close()


def test_a_cancelled_caller_s_batch_is_still_written_with_its_group() -> None:
    clock = Clock()
    store = Store(clock)
    group = commit(store, clock)

    async def main() -> None:
        doomed = group.submit_async(0)
        kept = group.submit_async(1)
        doomed.cancel()
        await kept

    asyncio.run(main())
    assert store.where() == [("loop", [0, 1])]
    group.close()


def test_a_thread_joining_a_group_offered_to_the_loop_leads_it_and_the_loop_lets_it() -> None:
    """A sync caller arrives between the offer and the loop's turn: it finds a writer's place free
    and leads the group, loop caller's batch included; the loop, its turn come, does nothing."""
    clock = Clock()
    store = Store(clock)
    group = commit(store, clock)

    async def main() -> None:
        offered = group.submit_async(0)  # the loop leads it once this step is over
        caller = threading.Thread(target=group.submit, args=(1,))
        caller.start()
        caller.join(30)  # the loop is held here: the thread leads, writes and returns
        assert not caller.is_alive()
        await offered

    asyncio.run(main())
    assert store.where() == [("thread", [0, 1])]
    assert group._writing == 0 and not group._unled and group._forming is None
    group.close()


def test_a_loop_closed_before_it_leads_its_offered_group_hangs_no_one() -> None:
    """The loop stops and closes with the offer not run: the group waits, forming; the next caller
    finds the writer's place free and writes it, the orphaned batch first."""
    clock = Clock()
    store = Store(clock)
    group = commit(store, clock)
    loop = asyncio.new_event_loop()

    async def submit_and_stop() -> None:
        group.submit_async(0)  # offered: the loop would lead it in its next step
        loop.stop()  # it never takes that step

    task = loop.create_task(submit_and_stop())
    loop.run_forever()
    loop.close()
    assert task.done()
    assert store.groups == []
    later = threading.Thread(target=group.submit, args=(1,))
    later.start()
    later.join(30)
    assert not later.is_alive()
    assert store.where() == [("thread", [0, 1])]
    group.close()


def test_a_full_offered_group_does_not_confuse_the_next_leader() -> None:
    """max_group=2: the offered group fills, a third caller's group forms behind it and is led by a
    thread before the loop's turn; each group is written once, in one transaction each."""
    clock = Clock()
    store = Store(clock)
    group = commit(store, clock, max_group=2)

    async def main() -> None:
        offered = [group.submit_async(0), group.submit_async(1)]  # full, offered to the loop
        caller = threading.Thread(target=group.submit, args=(2,))
        caller.start()
        caller.join(30)
        assert not caller.is_alive()
        await asyncio.gather(*offered)

    asyncio.run(main())
    written = sorted((batches for _, batches in store.where()), key=lambda b: b[0])
    assert written == [[0, 1], [2]]
    assert group._writing == 0 and not group._unled
    group.close()


def test_thread_and_loop_callers_mixed_each_batch_written_once() -> None:
    """4 threads x 100 sync submits beside 2 loops x 100 tasks, loop writes on: every batch once."""
    written: list[int] = []
    lock = threading.Lock()

    def write(batches: Sequence[int]) -> None:
        with lock:
            written.extend(batches)

    def write_on_loop(batches: Sequence[int]) -> bool:
        if not lock.acquire(blocking=False):
            return False
        try:
            written.extend(batches)
        finally:
            lock.release()
        return True

    group: GroupCommit[int] = GroupCommit(write, write_on_loop=write_on_loop)

    def thread_caller(base: int) -> None:
        for n in range(100):
            group.submit(base + n)

    def loop_caller(base: int) -> None:
        async def main() -> None:
            await asyncio.gather(*(group.submit_async(base + n) for n in range(100)))

        asyncio.run(main())

    threads = [threading.Thread(target=thread_caller, args=(1000 * i,)) for i in range(4)]
    threads += [threading.Thread(target=loop_caller, args=(10_000 + 1000 * i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    expected = [1000 * i + n for i in range(4) for n in range(100)]
    expected += [10_000 + 1000 * i + n for i in range(2) for n in range(100)]
    assert sorted(written) == sorted(expected)
    assert group._writing == 0 and not group._unled
    group.close()
