"""Per-host rate limits and concurrency caps (fake clock for the limiter, respx for the tool)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from toolbox_http import HttpTool, RateLimit, RateLimitedError
from toolbox_http._limits import HostLimiter

URL = "https://api.example.com/rates"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_denies_past_the_burst():
    """burst=2 at 1/s: two requests pass, the third is RATE_LIMITED, one second later one more passes."""
    clock = Clock()
    limiter = HostLimiter(RateLimit(requests_per_second=1, burst=2), clock)
    for _ in range(2):
        with limiter.hold("api.example.com"):
            pass
    with pytest.raises(RateLimitedError) as info, limiter.hold("api.example.com"):
        pass
    assert info.value.reason_code == "RATE_LIMITED"
    with limiter.hold("other.example.com"):
        pass  # buckets are per host
    clock.now += 1.0
    with limiter.hold("API.example.com."):
        pass  # the same host, however spelled


def test_concurrency_cap():
    """max_concurrent=1: a second request while one is in flight is refused; after it ends, allowed."""
    limiter = HostLimiter(RateLimit(max_concurrent=1), Clock())
    with limiter.hold("h"), pytest.raises(RateLimitedError, match="1 concurrent"), limiter.hold("h"):
        pass
    with limiter.hold("h"):
        pass


def test_async_concurrency_cap():
    """The async hold counts the same slots."""
    limiter = HostLimiter(RateLimit(max_concurrent=1), Clock())

    async def main():
        async with limiter.ahold("h"):
            with pytest.raises(RateLimitedError):
                async with limiter.ahold("h"):
                    pass
        async with limiter.ahold("h"):
            pass

    asyncio.run(main())


def test_wait_mode_waits_within_the_bound(monkeypatch):
    """on_limit=wait sleeps for the next token instead of denying (sleep is faked: no timing)."""
    clock = Clock()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    monkeypatch.setattr("toolbox_http._limits.time.sleep", sleep)
    limiter = HostLimiter(RateLimit(requests_per_second=4, on_limit="wait", max_wait=1.0), clock)
    with limiter.hold("h"):
        pass
    with limiter.hold("h"):
        pass
    assert slept == [pytest.approx(0.25)]


def test_wait_mode_denies_beyond_max_wait():
    """A wait longer than max_wait is refused at once."""
    limiter = HostLimiter(RateLimit(requests_per_second=0.1, on_limit="wait", max_wait=1.0), Clock())
    with limiter.hold("h"):
        pass
    with pytest.raises(RateLimitedError), limiter.hold("h"):
        pass


def test_tool_denies_rate_limited_without_sending(respx_mock, http_tools):
    """Through the tool: the second GET is DENIED/RATE_LIMITED, never sent and never retried."""
    route = respx_mock.get(URL).mock(return_value=httpx.Response(200))
    tools = http_tools(rate_limit={"requests_per_second": 0.001, "burst": 1})
    tool = tools.get(HttpTool)
    tool.get(URL).purpose("Read").execute()
    ready = tool.get(URL).purpose("Read")
    with pytest.raises(RateLimitedError):
        ready.execute()
    assert (ready.record.status, ready.record.reason_code) == ("DENIED", "RATE_LIMITED")
    assert ready.record.attempts == 1
    assert route.call_count == 1


def test_tool_async_rate_limited(respx_mock, http_tools):
    """The async path applies the same bucket."""
    route = respx_mock.get(URL).mock(return_value=httpx.Response(200))
    tool = http_tools(rate_limit={"requests_per_second": 0.001}).get(HttpTool)

    async def main():
        await tool.get(URL).purpose("Read").aexecute()
        await tool.get(URL).purpose("Read").aexecute()

    with pytest.raises(RateLimitedError):
        asyncio.run(main())
    assert route.call_count == 1


SPELLINGS = [
    "127.1",
    "2130706433",
    "0x7f.0.0.1",
    "017700000001",
    "127.0.0.1.",
    "[::ffff:7f00:1]",
    "[::FFFF:127.0.0.1]",
    "[0:0:0:0:0:ffff:7f00:0001]",
]


def test_respelling_an_address_shares_its_bucket(respx_mock, http_tools):
    """Regression (finding 8): 127.1, 2130706433, [::ffff:7f00:1], ... draw on 127.0.0.1's bucket.

    Each respelt request is DENIED/RATE_LIMITED and never sent.
    """
    route = respx_mock.route().mock(return_value=httpx.Response(200))
    tools = http_tools(rate_limit={"requests_per_second": 0.001, "burst": 1})
    tool = tools.get(HttpTool)
    tool.get("http://127.0.0.1:8080/").purpose("Read").execute()
    for host in SPELLINGS:
        ready = tool.get(f"http://{host}:8080/").purpose("Read")
        with pytest.raises(RateLimitedError) as info:
            ready.execute()
        assert info.value.reason_code == "RATE_LIMITED"
        assert (ready.record.status, ready.record.reason_code) == ("DENIED", "RATE_LIMITED")
    assert route.call_count == 1
    assert tools.executions(HttpTool) == 1 + len(SPELLINGS)  # each was executed, and refused before sending


def test_limiter_keys_every_spelling_together():
    """The limiter itself: one bucket for all spellings of ::1 and of 127.0.0.1, another per name."""
    limiter = HostLimiter(RateLimit(requests_per_second=1, burst=1), Clock())
    with limiter.hold("::1"):
        pass
    for spelling in ("[::1]", "0:0:0:0:0:0:0:1", "[0000::0001]"):
        with pytest.raises(RateLimitedError, match="'::1'"), limiter.hold(spelling):
            pass
    with limiter.hold("localhost"):
        pass  # a name is its own host: it is keyed by name, not by what it resolves to
