"""`toolbox.mcp._server` through the official ``mcp`` client over the SDK's in-memory transport.

Every scenario asserts the status and codes the model sees, how many times the
tool's code ran, and the audit events written under the session's run id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, types

import mcp_scenario_tools as scenario
from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import ConfigurationError
from toolbox.mcp import ERROR_META_KEY, TRACE_META_KEY, server
from toolbox.mcp._server import build_server

PURPOSE = "Answer the user's question about a note"
OPERATOR = ExecutionContext(tenant="acme", principal="desktop", roles={"analyst"})


@pytest.fixture(autouse=True)
def _fresh_executions():
    scenario.EXECUTIONS.clear()
    yield
    scenario.EXECUTIONS.clear()


def make_gateway(
    tmp_path: Path, *, policy: str = scenario.POLICY, **governance: Any
) -> tuple[Gateway, MemorySink]:
    path = tmp_path / "policy.toml"
    path.write_text(policy, encoding="utf-8")
    sink = MemorySink()
    governance.setdefault("mappers", scenario.MAPPERS)
    governance.setdefault("disabled_tools", ["halt"])
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(path),
        providers=scenario.PROVIDERS,
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), **governance),
    )
    return gateway, sink


def run(mcp_server, steps, *, mode="auto"):
    """Open one client session, run ``steps(client)``, return what it returns."""

    async def main():
        async with Client(mcp_server, mode=mode) as client:
            return await steps(client)

    return anyio.run(main)


def trace_of(result: types.CallToolResult) -> str:
    assert result.meta is not None
    return result.meta[TRACE_META_KEY]


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """The codes of an error result (``_meta``): structured content is only ever a success's."""
    assert result.is_error and result.structured_content is None
    assert result.meta is not None
    found: dict[str, Any] = result.meta[ERROR_META_KEY]
    return found


def events(sink: MemorySink, trace_id: str, name: str) -> list[tuple[str, str | None, str | None]]:
    return [
        (e.type.value, e.decision, e.reason_code or e.status)
        for e in sink.read_trace(trace_id)
        if e.name == name
    ]


# -- the scenario table ------------------------------------------------------------------------

SCENARIOS = [
    # id, name, arguments, status, reason code, error code, executions, decision event
    ("allowed", "lookup", {"note_id": 1, "purpose": PURPOSE}, "SUCCESS", None, None, 1, "ALLOW"),
    ("policy-denied", "vault", {"item": "a", "purpose": PURPOSE}, "DENIED", "POLICY_DENIED", None, 0, "DENY"),
    (
        "unacknowledged",
        "payments",
        {"amount": 5, "audit_as": "Pay the invoice"},
        "DENIED",
        "NOT_ACKNOWLEDGED",
        None,
        0,
        "DENY",
    ),
    (
        "invalid-arguments",
        "lookup",
        {"note_id": "seven", "purpose": PURPOSE},
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "int_parsing",
        0,
        "INVALID",
    ),
    (
        "missing-intent",
        "lookup",
        {"note_id": 1},
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "missing",
        0,
        "INVALID",
    ),
    (
        "guardrail-deny",
        "lookup",
        {"note_id": 13, "purpose": PURPOSE},
        "DENIED",
        "GUARDRAIL_NO_SECRET_NOTE",
        None,
        0,
        "DENY",
    ),
    (
        "approval-required",
        "refund",
        {"amount": 5, "audit_as": "Refund the order"},
        "APPROVAL_REQUIRED",
        "APPROVAL_REQUIRED",
        None,
        0,
        "APPROVAL_REQUIRED",
    ),
    (
        "business-failure",
        "settle",
        {"order": 4, "audit_as": "Settle the order"},
        "BUSINESS_FAILED",
        None,
        "NOT_SETTLED",
        1,
        "ALLOW",
    ),
    ("kill-switch", "halt", {"item": "x", "purpose": PURPOSE}, "DENIED", "KILL_SWITCH", None, 0, "DENY"),
]


@pytest.mark.parametrize(
    ("name", "arguments", "status", "reason", "error", "executions", "decision"),
    [s[1:] for s in SCENARIOS],
    ids=[s[0] for s in SCENARIOS],
)
def test_scenario(tmp_path, name, arguments, status, reason, error, executions, decision):
    """Each status of the table reaches the model as MCP says, with the tool run only when allowed."""
    gateway, sink = make_gateway(tmp_path)
    result = run(server(gateway, context=OPERATOR), lambda c: c.call_tool(name, arguments))
    assert result.is_error is (status != "SUCCESS")
    assert len(scenario.EXECUTIONS) == executions
    text = result.content[0].text
    assert "Traceback" not in text
    trace_id = trace_of(result)
    recorded = events(sink, trace_id, name)
    assert ("GOVERNANCE_DECISION", decision, None if decision == "ALLOW" else reason or error) in recorded
    if status == "SUCCESS":
        assert result.structured_content == {"note_id": 1, "text": "note 1"}
        assert json.loads(text) == {"note_id": 1, "text": "note 1"}
        assert recorded[-1] == ("INVOCATION_RESPONSE", None, "SUCCESS")
        return
    structured = outcome(result)
    assert structured["status"] == status
    assert structured["reason_code"] == reason
    assert structured["error_code"] == error
    assert text.startswith(status)
    if executions == 0:
        assert structured["attempts"] == 0 and "Nothing ran." in text
    assert recorded[-1][0] == "INVOCATION_RESPONSE"


def test_missing_intent_names_the_field(tmp_path):
    """The model learns which argument to add: field_path is the intent field."""
    gateway, _ = make_gateway(tmp_path)
    result = run(server(gateway, context=OPERATOR), lambda c: c.call_tool("refund", {"amount": 1}))
    assert outcome(result)["field_path"] == "audit_as"
    assert scenario.EXECUTIONS == []


def test_approval_says_how_it_is_obtained(tmp_path):
    """APPROVAL_REQUIRED names the request and the way an approval is obtained."""
    gateway, _ = make_gateway(tmp_path)
    result = run(
        server(gateway, context=OPERATOR),
        lambda c: c.call_tool("refund", {"amount": 2, "audit_as": "Refund"}),
    )
    approval = outcome(result)["approval"]
    assert approval["tool"] == "refund" and approval["rules"] == ["descriptor"]
    assert approval["request_id"] in result.content[0].text
    assert "operator approve" in result.content[0].text


def test_errors_carry_no_secret_or_stack_trace(tmp_path):
    """A failing tool's exception text (a database URL with a password) never reaches the model."""
    gateway, _ = make_gateway(tmp_path)
    result = run(
        server(gateway, context=OPERATOR), lambda c: c.call_tool("explode", {"item": "x", "purpose": PURPOSE})
    )
    dumped = result.model_dump_json()
    assert result.is_error and outcome(result)["status"] == "ERROR"
    assert "hunter2" not in dumped and "Traceback" not in dumped and "db://" not in dumped
    assert scenario.EXECUTIONS == ["explode"]


# -- tools/list ----------------------------------------------------------------------------------


def listed(mcp_server, mode="auto") -> dict[str, types.Tool]:
    async def steps(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    return run(mcp_server, steps, mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_list_shows_only_what_may_run(tmp_path, mode):
    """Denied, unacknowledged and kill-switched tools are not listed (both protocol eras)."""
    gateway, _ = make_gateway(tmp_path)
    assert sorted(listed(server(gateway, context=OPERATOR), mode)) == [
        "explode",
        "lookup",
        "refund",
        "settle",
    ]
    assert scenario.EXECUTIONS == []


def test_acknowledged_tool_is_listed(tmp_path):
    """Setting the acknowledgement makes the tool listed (decided per listing)."""
    path = tmp_path / "policy.toml"
    path.write_text(scenario.POLICY, encoding="utf-8")
    env = {scenario.PAYMENTS_ACK: "yes-payments"}
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(path), providers=scenario.PROVIDERS, discover=False, env=env
    )
    assert "payments" in listed(server(gateway, context=OPERATOR))


def test_kill_switch_hides_everything(tmp_path):
    """With the whole kill switch engaged nothing is listed, and a call by name is refused."""
    gateway, _ = make_gateway(tmp_path, enabled=False)
    mcp_server = server(gateway, context=OPERATOR)
    assert listed(mcp_server) == {}
    result = run(mcp_server, lambda c: c.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE}))
    assert outcome(result)["reason_code"] == "KILL_SWITCH"
    assert scenario.EXECUTIONS == []


def test_intent_is_a_required_argument_with_a_description(tmp_path):
    """purpose for reads and audit_as for side effects are required, and say what they are for."""
    gateway, _ = make_gateway(tmp_path)
    tools = listed(server(gateway, context=OPERATOR))
    read, write = tools["lookup"].input_schema, tools["refund"].input_schema
    assert "purpose" in read["required"] and "audit_as" not in read["properties"]
    assert "audit_as" in write["required"] and "purpose" not in write["properties"]
    assert "audit trail" in read["properties"]["purpose"]["description"]
    assert read["additionalProperties"] is False


def test_annotations_come_from_the_descriptor(tmp_path):
    """READ_ONLY -> readOnlyHint, UNSAFE -> destructiveHint, IDEMPOTENT -> idempotentHint."""
    gateway, _ = make_gateway(tmp_path)
    tools = listed(server(gateway, context=OPERATOR))
    read, unsafe, idempotent = (tools[n].annotations for n in ("lookup", "refund", "settle"))
    assert read is not None and unsafe is not None and idempotent is not None
    assert (read.read_only_hint, read.destructive_hint, read.open_world_hint) == (True, False, False)
    assert (unsafe.read_only_hint, unsafe.destructive_hint) == (False, True)
    assert (idempotent.idempotent_hint, idempotent.destructive_hint) == (True, False)


def test_open_world_for_external_tools(tmp_path):
    """An EXTERNAL_RESOURCE tool is openWorldHint."""
    path = tmp_path / "policy.toml"
    path.write_text(scenario.POLICY, encoding="utf-8")
    env = {scenario.PAYMENTS_ACK: "yes-payments"}
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(path), providers=scenario.PROVIDERS, discover=False, env=env
    )
    annotations = listed(server(gateway, context=OPERATOR))["payments"].annotations
    assert annotations is not None and annotations.open_world_hint is True


def test_output_schema_and_structured_content(tmp_path):
    """A model return type is the output schema; a dict[str, int] too; the client validates them."""
    gateway, _ = make_gateway(tmp_path)
    tools = listed(server(gateway, context=OPERATOR))
    schema = tools["lookup"].output_schema
    assert schema is not None and set(schema["required"]) == {"note_id", "text"}
    assert tools["refund"].output_schema == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


def test_primitive_results_are_wrapped(tmp_path):
    """The calculator returns a number: its schema and content are {"result": ...}."""
    gateway = Gateway.load(env={})
    mcp_server = server(gateway, context=OPERATOR)
    tool = listed(mcp_server)["calculator__evaluate"]
    assert tool.output_schema is not None and tool.output_schema["required"] == ["result"]
    result = run(
        mcp_server, lambda c: c.call_tool("calculator__evaluate", {"expression": "2*3", "purpose": "x"})
    )
    assert result.structured_content == {"result": 6} and result.content[0].text == "6"


# -- sessions and trusted context ----------------------------------------------------------------


def test_each_connection_is_its_own_run(tmp_path):
    """Two connections get two run ids, each audited under its own trace, with the operator's context."""
    gateway, sink = make_gateway(tmp_path)
    mcp_server = server(gateway, context=OPERATOR)

    async def twice(client):
        first = await client.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE})
        second = await client.call_tool("lookup", {"note_id": 2, "purpose": PURPOSE})
        return trace_of(first), trace_of(second)

    one = run(mcp_server, twice)
    other = run(mcp_server, twice, mode="legacy")
    assert one[0] == one[1] and other[0] == other[1] and one[0] != other[0]
    assert OPERATOR.run_id not in (one[0], other[0])
    for trace_id in (one[0], other[0]):
        stored = sink.read_trace(trace_id)
        assert len(stored) == 8
        assert {(e.tenant, e.principal) for e in stored} == {("acme", "desktop")}


def test_client_supplied_identity_is_ignored(tmp_path):
    """A tenant or principal in the arguments or in _meta never becomes the context."""
    gateway, sink = make_gateway(tmp_path)

    async def steps(client):
        smuggled = await client.call_tool(
            "lookup", {"note_id": 1, "purpose": PURPOSE, "tenant": "victim", "principal": "root"}
        )
        meta = await client.call_tool(
            "lookup", {"note_id": 1, "purpose": PURPOSE}, meta={"tenant": "victim", "principal": "root"}
        )
        return smuggled, meta

    smuggled, meta = run(server(gateway, context=OPERATOR), steps)
    assert outcome(smuggled)["error_code"] == "extra_forbidden"
    assert not meta.is_error
    assert scenario.EXECUTIONS == ["lookup"]
    tenants = {(e.tenant, e.principal) for e in sink.read_trace(trace_of(meta))}
    assert tenants == {("acme", "desktop")}


def test_no_trusted_caller_is_refused(tmp_path):
    """A server whose caller source knows nobody lists nothing and refuses every call."""
    gateway, _ = make_gateway(tmp_path)

    class Nobody:
        def caller(self, request):
            return None

    mcp_server = build_server(gateway, Nobody())
    assert listed(mcp_server) == {}
    result = run(mcp_server, lambda c: c.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE}))
    assert outcome(result)["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert scenario.EXECUTIONS == []


def test_context_factory_is_called_per_connection(tmp_path):
    """A factory makes each connection's context."""
    gateway, _ = make_gateway(tmp_path)
    made: list[ExecutionContext] = []

    def factory():
        made.append(ExecutionContext(tenant="acme", principal=f"user-{len(made)}"))
        return made[-1]

    mcp_server = server(gateway, context=factory)
    first = run(mcp_server, lambda c: c.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE}))
    run(mcp_server, lambda c: c.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE}))
    assert len(made) == 2 and trace_of(first) == made[0].run_id
    assert len(made[0].trace) == 1


# -- toolsets ------------------------------------------------------------------------------------


def test_toolset_limits_listing_and_calls(tmp_path):
    """An endpoint limited to a toolset lists only it; a call outside it is DENIED and audited."""
    gateway, sink = make_gateway(tmp_path)
    mcp_server = server(gateway, context=OPERATOR, toolset="readers")
    assert sorted(listed(mcp_server)) == ["lookup"]  # halt is in the set, but kill-switched
    result = run(mcp_server, lambda c: c.call_tool("settle", {"order": 1, "audit_as": "Settle"}))
    assert (outcome(result)["status"], outcome(result)["reason_code"]) == (
        "DENIED",
        "NOT_IN_TOOLSET",
    )
    assert scenario.EXECUTIONS == []
    # Audited with the operation tried, not only the tool.
    assert events(sink, trace_of(result), "settle.call") == [
        ("GOVERNANCE_DECISION", "DENY", "NOT_IN_TOOLSET")
    ]
    (event,) = [e for e in sink.read_trace(trace_of(result)) if e.reason_code == "NOT_IN_TOOLSET"]
    assert (event.tool, event.operation) == ("settle", "call")


def test_toolset_in_code_and_operation_names(tmp_path):
    """Toolsets given in code may name tool.operation; the dotted spelling is judged the same way."""
    gateway = Gateway.load(env={})
    mcp_server = server(gateway, context=OPERATOR, toolset="math", toolsets={"math": ["calculator.evaluate"]})
    assert list(listed(mcp_server)) == ["calculator__evaluate"]
    result = run(
        mcp_server, lambda c: c.call_tool("calculator.evaluate", {"expression": "1+1", "purpose": "x"})
    )
    assert result.structured_content == {"result": 2}


def test_unknown_toolset_is_an_error(tmp_path):
    """An endpoint toolset that is not defined, or that names an unknown tool, fails at build time."""
    gateway, _ = make_gateway(tmp_path)
    with pytest.raises(ConfigurationError, match="unknown toolset 'nope'; defined toolsets: readers"):
        server(gateway, context=OPERATOR, toolset="nope")
    with pytest.raises(ConfigurationError, match="'ghost' is not a registered tool"):
        server(gateway, context=OPERATOR, toolsets={"bad": ["ghost"]})


# -- attacks -------------------------------------------------------------------------------------

ATTACK_NAMES = [
    "../lookup",
    "lookup/../vault",
    "lookup\u202e",
    "\uff4c\uff4f\uff4f\uff4b\uff55\uff50",
    "vault%2e",
    "",
    "x" * 5000,
    "lookup\n",
]


@pytest.mark.parametrize("name", ATTACK_NAMES, ids=range(len(ATTACK_NAMES)))
def test_hostile_names_are_refused(tmp_path, name):
    """Path-like, unicode look-alike, empty, huge and control-character names run nothing."""
    gateway, _ = make_gateway(tmp_path)
    result = run(server(gateway, context=OPERATOR), lambda c: c.call_tool(name, {"purpose": PURPOSE}))
    assert result.is_error and outcome(result)["status"] in ("DENIED", "INVALID_ARGUMENTS")
    assert scenario.EXECUTIONS == []
    assert len(result.content[0].text) < 2000


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "arguments",
    [
        {"note_id": 1, "purpose": PURPOSE, "blob": "x" * 200_000},
        {"note_id": _nested(200), "purpose": PURPOSE},
        {"note_id": list(range(5000)), "purpose": PURPOSE},
        {"note_id": 10**5000, "purpose": PURPOSE},
        {"note_id": "1", "purpose": "\u0000\u202e" * 10},
        {"note_id": 1, "purpose": "%2e%2e%2f" * 400},
    ],
    ids=["huge", "nested", "wide", "big-int", "control-intent", "long-intent"],
)
def test_hostile_arguments_are_refused(tmp_path, arguments):
    """Huge, deep, wide, encoded arguments are INVALID_ARGUMENTS before the tool runs."""
    gateway, _ = make_gateway(tmp_path)
    result = run(server(gateway, context=OPERATOR), lambda c: c.call_tool("lookup", arguments))
    assert outcome(result)["status"] == "INVALID_ARGUMENTS"
    assert scenario.EXECUTIONS == []


def test_arguments_that_are_not_an_object(tmp_path):
    """No arguments at all is an empty object: the missing fields are named."""
    gateway, _ = make_gateway(tmp_path)
    result = run(server(gateway, context=OPERATOR), lambda c: c.call_tool("lookup", None))
    assert outcome(result)["error_code"] == "missing"
    assert scenario.EXECUTIONS == []


def test_concurrent_calls_in_one_session(tmp_path):
    """Fifty concurrent calls in one session all run once each, in one run."""
    gateway, sink = make_gateway(tmp_path)
    traces: list[str] = []

    async def steps(client):
        async def one(i):
            traces.append(
                trace_of(await client.call_tool("lookup", {"note_id": i + 100, "purpose": PURPOSE}))
            )

        async with anyio.create_task_group() as group:
            for i in range(50):
                group.start_soon(one, i)

    run(server(gateway, context=OPERATOR), steps)
    assert len(scenario.EXECUTIONS) == 50 and len(set(traces)) == 1
    assert len(sink.read_trace(traces[0])) == 200


def test_example_runs_offline():
    """examples/mcp_serve.py runs and shows listing, a call, a missing intent, an approval and a denial."""
    import subprocess
    import sys

    example = Path(__file__).resolve().parent.parent / "examples" / "mcp_serve.py"
    command = [sys.executable, str(example)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "listed order_status: read-only True, destructive False" in out
    assert "wire_transfer" not in out.split("order_status ->")[0]  # never listed
    assert "order_status -> {'order': '7', 'status': 'shipped'}" in out
    assert "without purpose -> INVALID_ARGUMENTS INVALID_ARGUMENTS purpose" in out
    assert "refund -> APPROVAL_REQUIRED" in out
    assert "wire_transfer -> DENIED POLICY_DENIED" in out
    assert "events" in out


def test_roles_hide_what_no_role_grants(tmp_path):
    """The policy file's [roles] hide tools no role of the caller grants; a call is AUTH_DENIED."""
    policy = scenario.POLICY + '\n[roles]\nanalyst = ["lookup"]\nadmin = ["*"]\n'
    gateway, sink = make_gateway(tmp_path, policy=policy)
    assert list(listed(server(gateway, context=OPERATOR))) == ["lookup"]
    admin = ExecutionContext(tenant="acme", principal="root", roles={"admin"})
    assert sorted(listed(server(gateway, context=admin))) == ["explode", "lookup", "refund", "settle"]
    result = run(
        server(gateway, context=OPERATOR), lambda c: c.call_tool("settle", {"order": 1, "audit_as": "x"})
    )
    assert outcome(result)["reason_code"] == "AUTH_DENIED"
    assert scenario.EXECUTIONS == []
    assert ("GOVERNANCE_DECISION", "DENY", "AUTH_DENIED") in events(sink, trace_of(result), "settle")


def test_result_objects_are_shown_as_their_repr(tmp_path):
    """A result object is shown as its safe repr: a field hidden from repr never reaches the model."""
    import dataclasses

    from toolbox import Effect, RiskClass, tool

    @dataclasses.dataclass(frozen=True)
    class Fetched:
        status: int
        cookie: str = dataclasses.field(repr=False)

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def fetch(url: str) -> Fetched:
        """Fetch something."""
        return Fetched(200, "session=SECRET-COOKIE")

    gateway = Gateway.load(providers=[fetch], discover=False, env={})
    mcp_server = server(gateway, context=OPERATOR)
    assert listed(mcp_server)["fetch"].output_schema is None
    result = run(mcp_server, lambda c: c.call_tool("fetch", {"url": "x", "purpose": PURPOSE}))
    assert not result.is_error and "SECRET-COOKIE" not in result.model_dump_json()
    assert "status=200" in result.content[0].text


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["lookup", "refund", "vault", "lookup.call", "calculator__evaluate"])
    | st.text(max_size=20),
    arguments=st.dictionaries(st.text(max_size=10), _JSON, max_size=5),
)
def test_any_call_gives_a_tool_result_and_runs_nothing_invalid(tmp_path, name, arguments):
    """Any name and any JSON arguments: a CallToolResult, never a protocol error; a refusal ran nothing."""
    scenario.EXECUTIONS.clear()
    gateway, _ = make_gateway(tmp_path)
    result = run(server(gateway, context=OPERATOR), lambda c: c.call_tool(name, arguments))
    assert isinstance(result, types.CallToolResult)
    assert "Traceback" not in result.model_dump_json()
    if result.is_error and outcome(result)["status"] in ("DENIED", "INVALID_ARGUMENTS"):
        assert scenario.EXECUTIONS == []


def test_template_limits_carry_over(tmp_path):
    """A delegated template's scope and budget hold in every connection's run (a copy never widens)."""
    gateway, _ = make_gateway(tmp_path)
    template = OPERATOR.delegate(tools=["lookup"], budget=1)
    mcp_server = server(gateway, context=template)
    assert list(listed(mcp_server)) == ["lookup"]

    async def steps(client):
        outside = await client.call_tool("refund", {"amount": 1, "audit_as": "Refund"})
        first = await client.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE})
        second = await client.call_tool("lookup", {"note_id": 2, "purpose": PURPOSE})
        return outside, first, second

    outside, first, second = run(mcp_server, steps)
    assert outcome(outside)["reason_code"] == "DELEGATION_SCOPE"
    assert not first.is_error and outcome(second)["reason_code"] == "BUDGET_EXHAUSTED"
    assert scenario.EXECUTIONS == ["lookup"]
    assert trace_of(first) != template.run_id
