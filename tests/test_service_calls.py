"""The service's call threads: context variables go along, and a cancelled request waits for its call."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from toolbox.service._calls import _on_thread

REQUEST = contextvars.ContextVar[str]("REQUEST")


def test_a_call_runs_on_a_call_thread_with_the_request_context() -> None:
    def where() -> tuple[str, str]:
        return threading.current_thread().name, REQUEST.get()

    async def main() -> tuple[str, str]:
        REQUEST.set("request-1")
        return await _on_thread(where)

    name, seen = asyncio.run(main())
    assert name.startswith("toolbox-call") and seen == "request-1"


def test_an_error_of_the_call_reaches_the_request() -> None:
    def fails() -> None:
        raise LookupError("no such row")

    with pytest.raises(LookupError, match="no such row"):
        asyncio.run(_on_thread(fails))


def test_a_cancelled_request_waits_for_its_running_call_then_is_cancelled() -> None:
    """As anyio's to_thread did: a call that started ends (and is audited) before the request goes."""
    started, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def call() -> str:
        started.set()
        assert release.wait(30)
        ended.append("ended")
        return "result"

    async def main() -> None:
        task = asyncio.create_task(_on_thread(call))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done() and ended == []  # still waiting for the call
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ended == ["ended"]

    asyncio.run(main())
