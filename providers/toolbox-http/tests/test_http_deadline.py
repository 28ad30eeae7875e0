"""total_timeout bounds the whole call on both doors: response head, body, trailers and retries.

A real loopback server drips its answer slowly, each byte well inside read_timeout.
No wall-clock assertion: the call must end with the deadline error, and the server must
see the connection closed before it finished its drip.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import toolbox_http.plugin
from toolbox import ExecutionContext, Gateway, Governance, Status, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import ToolTimeoutError, UncertainEffectError
from toolbox_http import HttpTool

TIMEOUTS = {"read_timeout": 0.5, "total_timeout": 1.0}
DRIP = 0.05  # seconds between bytes: ten times inside read_timeout
PAD = "a" * 120  # ~6 s of dripping, far past total_timeout


def head_drip() -> list[bytes]:
    """Status line and headers, one byte at a time."""
    head = f"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: {PAD}\r\n\r\n".encode()
    return [head[i : i + 1] for i in range(len(head))] + [b"ok"]


def trailer_drip() -> list[bytes]:
    """Headers and a chunked body at once, then the trailers one byte at a time."""
    start = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Pad\r\n\r\n2\r\nok\r\n0\r\n"
    trailers = f"X-Pad: {PAD}\r\n\r\n".encode()
    return [start] + [trailers[i : i + 1] for i in range(len(trailers))]


DRIPS = {"head": head_drip, "trailers": trailer_drip}


def assert_cut_short(loopback, path: str, pieces: list[bytes]) -> None:
    """The server saw the connection closed before it could write everything."""
    (observed,) = loopback.played(path)
    assert observed.error in ("BrokenPipeError", "ConnectionResetError")
    assert observed.written < sum(len(p) for p in pieces)


@pytest.mark.parametrize("part", sorted(DRIPS))
def test_sync_call_ends_at_total_timeout(loopback, http_tools, part):
    """Regression (finding 5): a dripped head or trailer no longer holds a sync call past total_timeout."""
    pieces = DRIPS[part]()
    url = loopback.script(f"/drip-{part}", pieces, delay=DRIP)
    tools = http_tools(**TIMEOUTS)
    ready = tools.get(HttpTool).get(url).purpose("Read")
    with pytest.raises(ToolTimeoutError, match=r"exceeded total_timeout \(1.0 s\)"):
        ready.execute()
    assert (ready.record.status, ready.record.error_code) == ("ERROR", "TIMEOUT")
    assert_cut_short(loopback, f"/drip-{part}", pieces)


@pytest.mark.parametrize("part", sorted(DRIPS))
def test_async_call_ends_at_total_timeout(loopback, http_tools, part):
    """The async door is bounded the same way."""
    pieces = DRIPS[part]()
    url = loopback.script(f"/drip-{part}", pieces, delay=DRIP)
    tool = http_tools(**TIMEOUTS).get(HttpTool)

    async def main():
        await tool.get(url).purpose("Read").aexecute()

    with pytest.raises(ToolTimeoutError, match="exceeded total_timeout"):
        asyncio.run(main())
    assert_cut_short(loopback, f"/drip-{part}", pieces)


def test_retries_spend_the_same_deadline(loopback, http_tools):
    """Regression (finding 5): a retried GET does not get a fresh total_timeout per attempt.

    Attempt 1 gets a 503 (retried), attempt 2 drips until the deadline, attempt 3 finds no
    time left and sends nothing, so the fast 200 queued for it is never served.
    """
    path = "/flaky"
    loopback.respond(path, b"busy", {}, status="503 Service Unavailable")
    loopback.script(path, head_drip(), delay=DRIP)
    url = loopback.respond(path, b"ok", {})
    ready = http_tools(**TIMEOUTS).get(HttpTool).get(url).purpose("Read")
    with pytest.raises(ToolTimeoutError, match="total_timeout"):
        ready.execute()
    assert ready.record.attempts == 3
    assert (ready.record.status, ready.record.error_code) == ("ERROR", "TIMEOUT")
    plays = loopback.played(path, count=2)
    assert len(plays) == 2
    assert plays[1].error in ("BrokenPipeError", "ConnectionResetError")
    assert loopback.next_script(path) is not None, "the third attempt must not have been sent"


def test_a_write_cut_by_the_deadline_is_an_uncertain_effect(loopback, http_tools):
    """A POST whose answer drips past the deadline may have taken effect: never retried, said so."""
    head = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nX-Pad: " + PAD.encode() + b"\r\n\r\n"
    pieces = [head[i : i + 1] for i in range(len(head))]
    loopback.script("/create", pieces, delay=DRIP)
    ready = http_tools(**TIMEOUTS).get(HttpTool).post(f"{loopback.url}/create", json={}).audit_as("Create")
    with pytest.raises(UncertainEffectError, match="may or may not have taken effect"):
        ready.execute()
    assert (ready.record.status, ready.record.attempts) == ("UNCERTAIN_EFFECT", 1)
    assert len(loopback.played("/create")) == 1


def test_by_name_door_reports_and_audits_the_timeout(loopback):
    """By name: ERROR/TIMEOUT after the retries, each attempt recorded in the audit trail."""
    for _ in range(3):
        loopback.script("/drip-head", head_drip(), delay=DRIP)
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        options={"http": {**TIMEOUTS, "egress": {"allow_networks": ["127.0.0.0/8"]}}},
        governance=Governance(audit=AuditTrail(sink)),
    )
    try:
        result = gateway.invoke(
            "http.get",
            {"url": f"{loopback.url}/drip-head", "purpose": "Read"},
            context=ExecutionContext(tenant="t", principal="p"),
        )
    finally:
        gateway.close()
    assert (result.status, result.error_code) == (Status.ERROR, "TIMEOUT")
    assert "exceeded total_timeout (1.0 s)" in (result.message or "")
    responses = [r for r in sink.records if r.type.value == "INVOCATION_RESPONSE"]
    assert [(r.status, r.reason_code) for r in responses][-1] == ("ERROR", "TIMEOUT")
    assert len(loopback.played("/drip-head")) == 1  # the retries found no time left and sent nothing


def test_one_calls_deadline_does_not_touch_another_on_the_shared_pool(loopback, http_tools):
    """Deadlines are per call: while one thread's call drips to its deadline, another's calls succeed."""
    loopback.script("/drip-head", head_drip(), delay=DRIP)
    tool = http_tools(**TIMEOUTS).get(HttpTool)
    outcome: list[BaseException] = []

    def slow() -> None:
        try:
            tool.get(f"{loopback.url}/drip-head").purpose("Read").execute()
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=slow)
    thread.start()
    statuses = [tool.get(f"{loopback.url}/json").purpose("Read").execute().status_code for _ in range(5)]
    thread.join(timeout=30)
    assert statuses == [200] * 5
    assert [type(e) for e in outcome] == [ToolTimeoutError]
    assert_cut_short(loopback, "/drip-head", head_drip())
