"""`Handoff`: the ASYNC audit queue, from many calling threads to the one writer thread.

`queue.Queue` makes every producer take one mutex that the consumer takes too,
once per item. Under the interpreter lock that mutex forms convoys: a producer
blocked on it sleeps until the holder gets the interpreter lock back, and eight
calling threads spent most of their time there. Here a producer only appends
to a `collections.deque` (atomic) and wakes the writer when it is idle; the
writer takes what has accumulated in one go.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar, final

__all__ = ["Handoff"]

Item = TypeVar("Item")


@final
class Handoff(Generic[Item]):
    """A bounded queue with one consumer thread.

    `offer` refuses an item once ``maxsize`` items wait (concurrent producers
    can overshoot by at most one item each). `take` is for the consumer only.
    """

    __slots__ = ("_abandoned", "_busy", "_changed", "_items", "_maxsize", "_ready")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self._maxsize = maxsize
        self._items: deque[Item] = deque()
        self._ready = threading.Event()  # set: the consumer has something to look at
        self._changed = threading.Condition(threading.Lock())  # the consumer went idle or stopped
        self._busy = False  # the consumer holds items it has not finished
        self._abandoned = False

    def offer(self, item: Item) -> None:
        """Queue ``item``.

        Raises:
            queue.Full: ``maxsize`` items are waiting already.
        """
        if len(self._items) >= self._maxsize:
            raise queue.Full
        self.put(item)

    def put(self, item: Item) -> None:
        """Queue ``item`` whatever the bound (the writer's stop signal)."""
        self._items.append(item)
        if not self._ready.is_set():  # Event.set takes a lock: only when the consumer may sleep
            self._ready.set()

    def take(self, most: int) -> list[Item]:
        """The consumer: wait for items, then take up to ``most`` of them (oldest first).

        Call `finished` once they are handled.
        """
        items = self._items
        while True:
            self._busy = True  # before looking: `join` sees an item or a busy consumer, never neither
            if items:
                count = min(len(items), most)
                return [items.popleft() for _ in range(count)]
            self._idle()
            self._ready.wait()
            self._ready.clear()  # before taking: an item queued from here on sets it again

    def consume(self, handle: Callable[[list[Item]], None], most: int, stop: object) -> None:
        """The consumer's loop: ``handle`` what has accumulated (up to ``most`` items, never none)
        until ``stop`` is taken; then `abandon` (a `join` waiting for the consumer returns)."""
        try:
            while True:
                taken = self.take(most)
                ended = any(item is stop for item in taken)
                kept = [item for item in taken if item is not stop] if ended else taken
                try:
                    if kept:
                        handle(kept)
                finally:
                    self.finished()
                if ended:
                    return
        finally:
            self.abandon()

    def finished(self) -> None:
        """The consumer handled what it took last."""
        if not self._items:
            self._idle()

    def abandon(self) -> None:
        """The consumer stopped for good: `join` no longer waits for what is left."""
        with self._changed:
            self._abandoned = True
            self._busy = False
            self._changed.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every queued item is handled (or the consumer stopped); False on timeout."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._abandoned or (not self._items and not self._busy), timeout
            )

    def qsize(self) -> int:
        """Items waiting (approximate: for monitoring)."""
        return len(self._items)

    def _idle(self) -> None:
        with self._changed:
            self._busy = False
            self._changed.notify_all()
