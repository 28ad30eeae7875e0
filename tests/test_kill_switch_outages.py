"""The kill switch on a store that does I/O: listings on an event loop, and store outages (issue 27).

Finding 5: with ``[state] backend = "sql"`` (or Redis), MCP ``tools/list`` was
empty for every caller: the listing asked the kill switch on the event loop,
which answers "engaged" whenever its cache is stale there. The listing now
refreshes the switches off the loop and lists what the store says.

Finding 6: ``rate_limits_fail_open`` ended after ``kill_switch_refresh``: the
kill switch lives in the same store and failed closed at its next refresh.
The last switches read now stay in force for ``kill_switch_max_stale``
seconds (60 by default with ``rate_limits_fail_open``; 0 otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from state_support import CALL, Counter, context, governed_gateway, state_store
from toolbox import Status
from toolbox.mcp import server
from toolbox.pipeline._state_ports import KillEntry, StateUnavailableError
from toolbox.pipeline.checks import _builtin as checks
from toolbox.pipeline.checks._shared_limits import FAIL_OPEN_WARNING, LimitRule
from toolbox.state import GovernanceState, MemoryKillSwitchStore, MemoryLimitStore


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with state_store(request.param, tmp_path) as made:
        yield made


def _listed(gateway: Any) -> list[str]:
    async def main() -> list[str]:
        async with Client(server(gateway, context=context())) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    return anyio.run(main)


def test_mcp_lists_the_tools_on_a_store_that_does_io(store: Any) -> None:
    counter = Counter()
    state = GovernanceState(backend="shared", kill=store, limits=store, kill_switch_refresh=0.0)
    gateway = governed_gateway(state, counter)
    assert _listed(gateway) == ["add"]  # on main: [], the listing asked a stale cache on the loop
    store.engage("add", reason="incident", who="ops")
    assert _listed(gateway) == []  # the engaged switch hides it, read fresh
    store.release("add", reason="fixed", who="ops")
    assert _listed(gateway) == ["add"]
    assert counter.runs == 0


class Outage(MemoryKillSwitchStore):
    """A kill-switch and limit store that stops answering while ``down`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.limits = MemoryLimitStore()
        self.down = False

    def engaged(self) -> Mapping[str | None, KillEntry]:
        if self.down:
            raise StateUnavailableError("state store down")
        return super().engaged()

    def admit(self, budgets: Any, rates: Any) -> Any:
        if self.down:
            raise StateUnavailableError("state store down")
        return self.limits.admit(budgets, rates)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The kill switch's monotonic clock, moved by the test (no sleeping)."""
    now = [1000.0]
    monkeypatch.setattr(checks, "_monotonic", lambda: now[0])
    return now


def _outage_calls(outage: Outage, clock: list[float], **state: Any) -> list[tuple[Status, str | None]]:
    """Calls every 0.2 s of a 3 s outage, after one call with the store up."""
    counter = Counter()
    governed = GovernanceState(
        backend="shared",
        kill=outage,
        limits=outage,
        kill_switch_refresh=1.0,
        rate_limits=(LimitRule("tenant", 100, 1.0),),
        **state,
    )
    gateway = governed_gateway(governed, counter)
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
    outage.down = True
    seen = []
    for _ in range(15):
        clock[0] += 0.2
        result = gateway.invoke("add", CALL, context=context())
        seen.append((result.status, result.reason_code))
    return seen


def test_fail_open_rates_last_through_a_short_outage(clock: list[float]) -> None:
    outage = Outage()
    seen = _outage_calls(outage, clock, rate_limits_fail_open=True)
    assert seen == [(Status.SUCCESS, None)] * 15  # on main: 10 of 15 refused STATE_UNAVAILABLE


def test_the_last_switches_read_stay_in_force_for_a_bounded_time(clock: list[float]) -> None:
    outage = Outage()
    outage.engage("add", reason="incident", who="ops")
    counter = Counter()
    governed = GovernanceState(backend="shared", kill=outage, limits=outage, kill_switch_max_stale=5.0)
    gateway = governed_gateway(governed, counter)
    assert gateway.invoke("add", CALL, context=context()).reason_code == "KILL_SWITCH"
    outage.down = True
    clock[0] += 4.0
    assert gateway.invoke("add", CALL, context=context()).reason_code == "KILL_SWITCH"  # still engaged
    clock[0] += 2.0  # 6 s after the last answer: past the bound, calls stop
    assert gateway.invoke("add", CALL, context=context()).reason_code == "STATE_UNAVAILABLE"
    assert counter.runs == 0


def test_without_fail_open_an_outage_stops_calls_at_the_next_refresh(clock: list[float]) -> None:
    seen = _outage_calls(Outage(), clock)
    assert seen[:4] == [(Status.DENIED, "STATE_UNAVAILABLE")] * 4  # rates fail closed at once
    assert all(status is Status.DENIED for status, _ in seen)


def test_fail_open_is_bounded_by_the_max_stale(clock: list[float]) -> None:
    outage = Outage()
    seen = _outage_calls(outage, clock, rate_limits_fail_open=True, kill_switch_max_stale=1.5)
    statuses = [status for status, _ in seen]
    ran = statuses.count(Status.SUCCESS)
    assert statuses == [Status.SUCCESS] * ran + [Status.DENIED] * (15 - ran)
    # Kept for 1.5 s after the last answer, noticed at a refresh (1 s): calls stop within 2.5 s.
    assert 4 <= ran <= 12 and set(seen[ran:]) == {(Status.DENIED, "STATE_UNAVAILABLE")}


def test_a_fail_open_call_carries_its_warning(clock: list[float]) -> None:
    outage = Outage()
    counter = Counter()
    governed = GovernanceState(
        backend="shared",
        kill=outage,
        limits=outage,
        rate_limits=(LimitRule("tenant", 100, 1.0),),
        rate_limits_fail_open=True,
    )
    gateway = governed_gateway(governed, counter)
    gateway.invoke("add", CALL, context=context())
    outage.down = True
    result = gateway.invoke("add", CALL, context=context())
    assert result.status is Status.SUCCESS and FAIL_OPEN_WARNING in result.warnings
