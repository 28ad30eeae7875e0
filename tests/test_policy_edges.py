"""ToolPolicy at its edges: name lengths, blocked distributions, unknown tools, messages, repr.

Written from `scripts/mutation src/toolbox/registry/_policy.py`: each test pins a behaviour whose change no
other test noticed (docs/testing.md, "Mutation testing").
"""

from __future__ import annotations

from typing import Any

import pytest

from toolbox import (
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    RiskClass,
    Status,
    ToolDescriptor,
    ToolPolicy,
    tool,
)
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import PolicyFileError

CALLS: list[str] = []


@tool(risk=RiskClass.EXTERNAL_RESOURCE, effect=Effect.READ_ONLY)
def fetch(url: str) -> str:
    """Fetch ``url`` (stands in for a tool that reaches outside the process)."""
    CALLS.append(url)
    return url


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


def descriptor(name: str, risk: RiskClass = RiskClass.EXTERNAL_RESOURCE) -> ToolDescriptor:
    return ToolDescriptor(name=name, version="1", risk=risk, operations=[{"name": "op"}])


# -- tool names: the longest allowed name is a name; one more character is refused -----------


def test_a_tool_name_of_exactly_the_maximum_length_can_be_allowed_and_denied() -> None:
    longest = "a" * 64
    # (a real descriptor also bounds the wire name "<tool>__<operation>"; the policy bounds the name)
    named = descriptor("a").model_copy(update={"name": longest})
    allowed = ToolPolicy.deny_all().allow(longest).decide(named)
    assert (allowed.allowed, allowed.rule) == (True, f"allow:tool:{longest}")
    denied = ToolPolicy.standard().allow(RiskClass.EXTERNAL_RESOURCE).deny(longest).decide(named)
    assert (denied.allowed, denied.rule) == (False, f"deny:tool:{longest}")


@pytest.mark.parametrize(("verb", "name"), [("allow", "a" * 65), ("deny", "b" * 65), ("allow", "Http")])
def test_a_bad_name_is_refused_naming_the_verb(verb: str, name: str) -> None:
    policy = ToolPolicy.standard()
    with pytest.raises(PolicyFileError) as caught:
        getattr(policy, verb)(name)
    assert str(caught.value).startswith(f"cannot {verb} {name!r}: pass a tool type")


def test_a_denied_tool_runs_zero_times_and_the_refusal_is_audited() -> None:
    """The decision reaches the call: DENIED, POLICY_DENIED, the deny rule, no run, one audited refusal."""
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(RiskClass.EXTERNAL_RESOURCE).deny("fetch"),
        providers=[fetch],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink, fallback_path=None)),
    )
    context = ExecutionContext(tenant="t", principal="p")
    result = gateway.invoke("fetch", {"url": "http://127.0.0.1/", "purpose": "Read"}, context=context)
    assert (result.status, result.reason_code) == (Status.DENIED, "POLICY_DENIED")
    assert CALLS == []
    records = sink.read_trace(context.run_id)
    assert [(r.type.value, r.decision, r.reason_code) for r in records if r.decision] == [
        ("GOVERNANCE_DECISION", "DENY", "POLICY_DENIED")
    ]


# -- blocked distributions ------------------------------------------------------------------


def test_blocked_distributions_are_kept_in_their_normal_form() -> None:
    policy = ToolPolicy.standard().block_distribution("Evil__Tools.Extra", "other-pkg")
    assert policy.blocked_distributions == frozenset({"evil-tools-extra", "other-pkg"})
    assert policy.is_blocked("EVIL_tools-extra")


@pytest.mark.parametrize("bad", ["", "   ", 42, None])
def test_a_blocked_distribution_must_be_a_non_empty_name(bad: Any) -> None:
    with pytest.raises(PolicyFileError) as caught:
        ToolPolicy(blocked_distributions=[bad])
    assert str(caught.value) == f"a blocked distribution must be a non-empty name, got {bad!r}"


# -- a policy file that names a tool nobody provides ----------------------------------------


def from_file(names: dict[str, str]) -> ToolPolicy:
    return ToolPolicy(source="policy.toml", file_names=names)


def test_an_unknown_tool_is_named_with_the_key_and_every_installed_tool() -> None:
    with pytest.raises(PolicyFileError) as caught:
        from_file({"htpp": "allow.tools[0]"}).check_known_tools(["http", "fs"])
    assert str(caught.value) == "policy.toml: allow.tools[0]: unknown tool 'htpp'; installed tools: fs, http"


def test_with_nothing_installed_the_message_says_none() -> None:
    with pytest.raises(PolicyFileError) as caught:
        from_file({"http": "allow.tools[0]"}).check_known_tools([])
    assert str(caught.value) == "policy.toml: allow.tools[0]: unknown tool 'http'; installed tools: none"


def test_the_explanation_is_appended_only_when_there_is_one() -> None:
    policy = from_file({"http": "allow.tools[0]"})
    with pytest.raises(PolicyFileError) as explained:
        policy.check_known_tools(["fs"], explain=lambda name: f"{name} failed to import")
    assert str(explained.value).endswith("installed tools: fs; http failed to import")
    with pytest.raises(PolicyFileError) as silent:
        policy.check_known_tools(["fs"], explain=lambda name: "")
    assert str(silent.value).endswith("installed tools: fs")


def test_a_tools_table_may_configure_a_namespace_but_an_allow_may_not_name_one() -> None:
    """``[tools.mcp]`` configures the ``mcp.*`` family; ``allow.tools = ["mcp"]`` names no tool."""
    known = ["mcp.github", "mcp.files", "calc"]
    from_file({"mcp": "tools.mcp"}).check_known_tools(known)
    with pytest.raises(PolicyFileError, match=r"allow.tools\[0\]: unknown tool 'mcp'"):
        from_file({"mcp": "allow.tools[0]"}).check_known_tools(known)
    with pytest.raises(PolicyFileError, match=r"tools.calc.x: unknown tool 'calc.x'"):
        from_file({"calc.x": "tools.calc.x"}).check_known_tools(known)
    with pytest.raises(PolicyFileError, match=r"tools.mcp.git: unknown tool 'mcp.git'"):
        from_file({"mcp.git": "tools.mcp.git"}).check_known_tools(known)


# -- repr -----------------------------------------------------------------------------------


class HttpLike:
    """Stands in for a tool type."""


def test_repr_names_every_rule_exactly() -> None:
    policy = (
        ToolPolicy.standard()
        .allow(HttpLike, RiskClass.EXTERNAL_RESOURCE)
        .deny("fs", RiskClass.PRIVILEGED)
        .block_distribution("Evil_Tools")
    )
    assert repr(policy) == (
        "ToolPolicy(default=['MEMORY_ONLY'], allow=['EXTERNAL_RESOURCE', 'HttpLike'], "
        "deny=['PRIVILEGED', 'fs'], blocked=['evil-tools'])"
    )
    assert repr(ToolPolicy.deny_all()) == "ToolPolicy(default=[])"
