"""Group commit for callers on an event loop: `GroupCommit.submit_async`.

A caller on a loop gets a future that a writer thread completes, once per
group and loop. These tests attack it: callers that queue during a write,
a write that fails mid-group, thread and loop callers mixed, a cancelled
caller, a loop closed with waiters pending, several writers. No clock is
asserted: gates and bounded polling only.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Sequence

import pytest

from polling import wait_until
from toolbox.audit import AuditSinkError
from toolbox.audit._group import GroupCommit


class Gated:
    """A group write that records each group and its thread; the first one waits for `release`."""

    def __init__(self, fail: Callable[[int], bool] = lambda n: False) -> None:
        self.groups: list[list[int]] = []
        self.threads: list[int] = []
        self.gate = threading.Event()
        self.entered = threading.Event()
        self._fail = fail

    def __call__(self, batches: Sequence[int]) -> None:
        number = len(self.groups)
        self.groups.append(list(batches))
        self.threads.append(threading.get_ident())
        if number == 0:
            self.entered.set()
            assert self.gate.wait(30)
        if self._fail(number):
            raise AuditSinkError("store down")

    def release(self) -> None:
        self.gate.set()


def forming(group: GroupCommit[int]) -> int:
    """Batches in the group the next write takes (test-only peek)."""
    forming = group._forming
    return 0 if forming is None else len(forming.batches)


def test_a_lone_loop_caller_is_written_by_a_writer_thread_not_the_loop() -> None:
    write = Gated()
    write.release()
    group: GroupCommit[int] = GroupCommit(write)

    async def main() -> int:
        await group.submit_async(1)
        await group.submit_async(2)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert write.groups == [[1], [2]]
    assert loop_thread not in write.threads
    group.close()


def test_loop_callers_arriving_during_a_write_share_the_next_one() -> None:
    """While the first group is written, 7 callers on the loop queue; one write takes all 7."""
    write = Gated()
    group: GroupCommit[int] = GroupCommit(write)

    async def main() -> None:
        first = group.submit_async(0)
        await asyncio.to_thread(write.entered.wait, 30)
        others = [group.submit_async(n) for n in range(1, 8)]
        assert forming(group) == 7
        write.release()
        await asyncio.gather(first, *others)

    asyncio.run(main())
    assert write.groups == [[0], list(range(1, 8))]
    group.close()


def test_loop_callers_of_one_loop_step_share_the_write_handed_over_for_the_first() -> None:
    """The writer is free: the first of 8 callers in one step of the loop hands its group to the
    writer thread, and the 7 others join it before that thread starts: one write, not [0] then 7."""
    written: list[list[int]] = []
    group: GroupCommit[int] = GroupCommit(lambda batches: written.append(list(batches)))

    async def main() -> None:
        await group.submit_async(-1)  # the writer thread exists and waits for work
        switch = sys.getswitchinterval()
        sys.setswitchinterval(60)  # the writer thread gets the interpreter when the loop waits
        try:
            futures = [group.submit_async(n) for n in range(8)]
            assert forming(group) == 8
        finally:
            sys.setswitchinterval(switch)
        await asyncio.gather(*futures)

    asyncio.run(main())
    assert written == [[-1], list(range(8))]
    assert group._writing == 0 and not group._unled and group._forming is None
    group.close()


def test_a_write_that_fails_mid_group_fails_every_waiter_of_that_group_and_none_hangs() -> None:
    """The second group fails: each of its 7 futures gets the error; the first and third succeed."""
    write = Gated(fail=lambda n: n == 1)
    group: GroupCommit[int] = GroupCommit(write)

    async def main() -> list[BaseException | None]:
        first = group.submit_async(0)
        await asyncio.to_thread(write.entered.wait, 30)
        doomed = [group.submit_async(n) for n in range(1, 8)]
        write.release()
        await first
        outcomes = await asyncio.gather(*doomed, return_exceptions=True)
        await group.submit_async(8)  # the next group writes normally
        return [o if isinstance(o, BaseException) else None for o in outcomes]

    outcomes = asyncio.run(main())
    assert all(isinstance(o, AuditSinkError) and "store down" in str(o) for o in outcomes)
    assert write.groups == [[0], list(range(1, 8)), [8]]
    group.close()


def test_thread_and_loop_callers_mixed_each_batch_written_once() -> None:
    """4 threads x 100 sync submits beside 2 loops x 100 tasks: every batch once, everyone returns."""
    written: list[int] = []
    lock = threading.Lock()

    def write(batches: Sequence[int]) -> None:
        time.sleep(0.0002)  # so writes overlap with arrivals and groups form (nothing timed)
        with lock:
            written.extend(batches)

    group: GroupCommit[int] = GroupCommit(write)

    def thread_caller(n: int) -> None:
        for i in range(100):
            group.submit(n * 1000 + i)

    def loop_caller(n: int) -> None:
        async def one(i: int) -> None:
            await group.submit_async(n * 1000 + i)

        async def main() -> None:
            await asyncio.gather(*(one(i) for i in range(100)))

        asyncio.run(main())

    threads = [threading.Thread(target=thread_caller, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=loop_caller, args=(n,)) for n in range(4, 6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(written) == sorted(n * 1000 + i for n in range(6) for i in range(100))
    assert group._writing == 0 and not group._unled and group._forming is None
    group.close()


def test_a_cancelled_caller_s_batch_is_still_written_with_its_group() -> None:
    """Cancelled while its group is being written: the batch is stored (or fails) with the group."""
    write = Gated()
    group: GroupCommit[int] = GroupCommit(write)

    async def main() -> bool:
        first = group.submit_async(0)
        await asyncio.to_thread(write.entered.wait, 30)
        waiting = asyncio.ensure_future(group.submit_async(1))
        other = group.submit_async(2)
        await asyncio.sleep(0)
        waiting.cancel()
        write.release()
        await asyncio.gather(first, other)
        return waiting.cancelled()

    assert asyncio.run(main())
    assert write.groups == [[0], [1, 2]]
    group.close()


def test_a_loop_closed_with_waiters_pending_hangs_no_one_else() -> None:
    """A loop stops and closes while its future waits on a write: the writer survives, a thread
    caller that queued behind it returns, and later callers are served."""
    write = Gated()
    group: GroupCommit[int] = GroupCommit(write)
    loop = asyncio.new_event_loop()
    orphan = loop.run_until_complete(_submit_soon(group, 0))  # the first write: gated
    assert write.entered.wait(30)
    loop.close()  # its caller is gone: nothing will ever await `orphan`
    behind = threading.Thread(target=group.submit, args=(1,))
    behind.start()
    wait_until(lambda: forming(group) == 1)
    write.release()
    behind.join(30)
    assert not behind.is_alive()
    assert not orphan.done()  # never settled on the closed loop: no callback ran there

    async def later() -> None:
        await group.submit_async(2)

    asyncio.run(later())
    assert write.groups == [[0], [1], [2]]
    group.close()


async def _submit_soon(group: GroupCommit[int], batch: int) -> asyncio.Future[None]:
    return group.submit_async(batch)


def test_several_writers_with_loop_callers_write_each_batch_once() -> None:
    """max_writers=2: at most two writes at once, every batch once, every future done."""
    running, most, written = [0], [0], []
    lock = threading.Lock()

    def write(batches: Sequence[int]) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.0005)
        with lock:
            written.extend(batches)
            running[0] -= 1

    group: GroupCommit[int] = GroupCommit(write, max_writers=2)

    async def main() -> None:
        await asyncio.gather(*(group.submit_async(n) for n in range(300)))

    asyncio.run(main())
    assert sorted(written) == list(range(300)) and most[0] <= 2
    group.close()


def test_close_stops_the_writer_threads_and_a_later_group_still_gets_written() -> None:
    written: list[list[int]] = []
    group: GroupCommit[int] = GroupCommit(lambda batches: written.append(list(batches)))

    async def submit(batch: int) -> None:
        await group.submit_async(batch)

    before = set(threading.enumerate())
    asyncio.run(submit(1))
    writers = [t for t in threading.enumerate() if t not in before and t.name == "toolbox-audit-group-commit"]
    assert len(writers) == 1  # one per writer's place
    group.close()
    for writer in writers:
        writer.join(30)
    assert not any(writer.is_alive() for writer in writers)
    asyncio.run(submit(2))  # after close: a thread of its own writes it, nobody hangs
    assert written == [[1], [2]]


def test_submit_async_needs_a_running_loop() -> None:
    group: GroupCommit[int] = GroupCommit(lambda batches: None)
    with pytest.raises(RuntimeError):
        group.submit_async(1)
