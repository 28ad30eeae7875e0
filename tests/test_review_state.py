"""Security review of fleet state: attacks on the shared limits, kill switch and approvals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from state_support import CALL, Counter, audit_events, context, governed_gateway, state_store
from toolbox import Effect, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.cli import main
from toolbox.pipeline._state_ports import LimitStore
from toolbox.pipeline.checks._shared_limits import LimitRule, canonical_host
from toolbox.state import GovernanceState, MemoryLimitStore


def _fetch_gateway(rule: LimitRule) -> tuple[Gateway, list[str]]:
    fetched: list[str] = []

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def fetch(url: str) -> str:
        """Pretend to fetch a URL."""
        fetched.append(url)
        return "ok"

    state = GovernanceState(limits=MemoryLimitStore(), rate_limits=(rule,))
    governance = Governance(state=state, audit=AuditTrail(MemorySink()))
    return Gateway.load(providers=[fetch], discover=False, governance=governance), fetched


@pytest.mark.parametrize(
    "spelling",
    ["http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/", "http://[0:0:0:0:0:ffff:1.2.3.4]/"],
)
def test_an_ipv4_mapped_spelling_shares_the_ipv4_hosts_rate_limit(spelling: str) -> None:
    """toolbox-http connects ``[::ffff:1.2.3.4]`` to 1.2.3.4: one bucket, not a second allowance."""
    gateway, fetched = _fetch_gateway(LimitRule("host", 1, 60.0, "fetch"))
    ok = gateway.invoke("fetch", {"url": "http://1.2.3.4/", "purpose": "Read it"}, context=context())
    assert ok.status is Status.SUCCESS
    denied = gateway.invoke("fetch", {"url": spelling, "purpose": "Read it"}, context=context())
    assert (denied.status, denied.reason_code, denied.rule) == (
        Status.DENIED,
        "RATE_LIMITED",
        "state:rate:host:fetch",
    )
    assert fetched == ["http://1.2.3.4/"]  # the refused call ran zero times
    assert audit_events(gateway, "RATE_LIMITED")
    assert canonical_host(spelling) == "1.2.3.4"


def test_a_real_ipv6_host_keeps_its_own_bucket() -> None:
    assert canonical_host("http://[2001:db8::1]/") == "2001:db8::1"
    assert canonical_host("http://[::1.2.3.4]/") == "::102:304"  # IPv4-compatible is not mapped


@pytest.fixture(params=["memory", "redis", "sqlite", "postgres"])
def limits(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LimitStore]:
    with state_store(request.param, tmp_path) as store:
        yield MemoryLimitStore() if store is None else store


def test_a_budget_of_zero_calls_admits_none(limits: LimitStore) -> None:
    """``calls = 0`` stops the tool for the tenant: not even the first call of a window runs."""
    counter = Counter()
    state = GovernanceState(limits=limits, budgets=(LimitRule("tenant", 0, 60.0, "add"),))
    gateway = governed_gateway(state, counter)
    for _ in range(2):
        denied = gateway.invoke("add", CALL, context=context())
        assert (denied.status, denied.reason_code, denied.rule) == (
            Status.DENIED,
            "BUDGET_EXHAUSTED",
            "state:budget:tenant:add",
        )
    assert counter.runs == 0
    assert audit_events(gateway, "BUDGET_EXHAUSTED")  # each denial is audited


# -- toolbox kill: a careless operator ------------------------------------------------------------


def _sqlite_policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    url = f"sqlite:///{tmp_path / 'state.db'}"
    path.write_text(f'version = 1\n[state]\nbackend = "sql"\nurl = "{url}"\n', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("tool", "warning"),
    [
        ("http.get", "names an operation of tool 'http'; a kill switch stops whole tools: --tool http"),
        ("calcualtor", "no tool named 'calcualtor' is installed here"),
    ],
)
def test_kill_engage_warns_when_the_switch_can_stop_nothing_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tool: str, warning: str
) -> None:
    """``--tool http.get`` (an operation) or a typo engages a switch no call here ever hits: say so."""
    path = _sqlite_policy(tmp_path)
    status = main(["kill", "engage", "--tool", tool, "--reason", "incident", "--policy", str(path)])
    _, err = capsys.readouterr()
    assert status == 0 and warning in err
    main(["kill", "engage", "--tool", "http", "--reason", "incident", "--policy", str(path)])
    _, err = capsys.readouterr()
    assert "warning: no tool" not in err and "names an operation" not in err
