"""The sandbox governed on every door: typed, Gateway by name (sync and async), MCP and pydantic-ai.

The policy file declares one profile read-only to the world and asks for an
approval of every call. Each door: a call without a grant is held
(``APPROVAL_REQUIRED``) and ran nothing; a grant for the exact code runs it
once; a grant for other code, other inputs or another profile is refused
(``APPROVAL_INVALID``) and runs nothing; the audit trail records each.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from sandbox_support import ACK

from toolbox import ApprovalRequired, Effect, ExecutionContext, Gateway, Governance, Status, ToolPolicy, Tools
from toolbox.audit import AuditTrail, EventType, MemorySink
from toolbox.governance import Guardrail, GuardrailAction, HmacApprover
from toolbox.integrations.pydantic_ai import GovernedToolset, approval_requests, deferred_results
from toolbox.mcp import server
from toolbox_sandbox import SandboxResult, SandboxTool, plugin

SECRET = b"sandbox-approval-secret-0123456789"
CONTEXT = ExecutionContext(tenant="acme", principal="analyst")
POLICY = """
version = 1

[allow]
tools = ["sandbox"]

[tools.sandbox]
require_approval = true
default_profile = "analysis"

[tools.sandbox.profiles.analysis]
read_only_world = true
exports = ["*.txt"]

[tools.sandbox.profiles.analysis.limits]
wall_seconds = 10.0
"""
CODE = "import sys\ntext = sys.stdin.read()\nopen('out.txt', 'w').write(text.upper())\nprint(len(text))"
OTHER = "print('something else')"
ARGS = {"source": CODE, "stdin": "hello", "audit_as": "Upper-case the greeting"}
#: What the approver reads: the exact code, stdin by digest, no files, the profile as passed.
SHOWN = {
    "source": CODE,
    "stdin": {"sha256": hashlib.sha256(b"hello").hexdigest(), "size": 5},
    "files": {},
    "profile": None,
}


def load(tmp_path: Path, sink: MemorySink) -> Gateway:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    governance = Governance(audit=AuditTrail(sink), approver=HmacApprover(SECRET))
    return Gateway.load(
        policy=ToolPolicy.from_file(path), providers=[plugin], discover=False, env=ACK, governance=governance
    )


def runs(sink: MemorySink) -> list[str | None]:
    """The status of every INVOCATION_RESPONSE of the sandbox, in order."""
    return [e.status for e in sink.records if e.type is EventType.INVOCATION_RESPONSE and e.tool == "sandbox"]


def grant_for(result: Any) -> Any:
    return HmacApprover(SECRET).grant(result.approval, approved_by="ops@acme")


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def gateway(tmp_path: Path, sink: MemorySink, sandbox_support: None):
    built = load(tmp_path, sink)
    yield built
    built.close()


def test_the_policy_file_declares_idempotent_operations_that_need_approval(gateway: Gateway):
    """Every profile read_only_world: IDEMPOTENT; require_approval: both operations need a grant."""
    entry = gateway.catalog.entry("sandbox")
    assert entry is not None
    descriptor = entry.descriptor
    assert {op.name: (op.effect, op.requires_approval) for op in descriptor.operations} == {
        "run_python": (Effect.IDEMPOTENT, True),
        "run": (Effect.IDEMPOTENT, True),
    }


def test_by_name_sync_holds_then_runs_the_exact_code_once(gateway: Gateway, sink: MemorySink):
    held = gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT)
    assert (held.status, held.reason_code) == (Status.APPROVAL_REQUIRED, "APPROVAL_REQUIRED")
    assert held.approval is not None and held.approval.arguments == SHOWN
    assert "hello" not in repr(held.approval.as_dict())  # stdin is shown (and bound) by digest
    assert runs(sink) == ["APPROVAL_REQUIRED"]
    done = gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT, approval=grant_for(held))
    assert done.status is Status.SUCCESS, done
    result = done.content
    assert isinstance(result, SandboxResult)
    assert (result.exit_code, result.stdout, result.profile) == (0, "5\n", "analysis")
    assert [(f.path, f.content) for f in result.files] == [("out.txt", b"HELLO")]
    assert runs(sink) == ["APPROVAL_REQUIRED", "SUCCESS"]


@pytest.mark.parametrize(
    "changed",
    [
        {"source": OTHER},
        {"stdin": "HELLO"},
        {"files": {"extra.txt": "x"}},
        {"source": CODE + "\n"},
        {"profile": "analysis"},
    ],
    ids=["other-code", "other-stdin", "other-files", "one-more-newline", "profile-named"],
)
def test_a_grant_for_one_call_does_not_run_another(gateway: Gateway, sink: MemorySink, changed):
    """The approval binds the exact code, the digests of stdin and files, and the profile as passed
    (naming the default profile is another call than leaving it out)."""
    held = gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT)
    grant = grant_for(held)
    refused = gateway.invoke("sandbox.run_python", {**ARGS, **changed}, context=CONTEXT, approval=grant)
    assert (refused.status, refused.reason_code) == (Status.DENIED, "APPROVAL_INVALID")
    assert refused.attempts == 0
    assert runs(sink) == ["APPROVAL_REQUIRED", "DENIED"]


def test_a_grant_binds_each_file_by_digest_and_inputs_by_their_bytes(gateway: Gateway, sink: MemorySink):
    """A file of the same name with other content is another call; the same bytes passed as str or as
    bytes are the same call (the digest is of what the sandbox receives). The contents are never shown."""
    tools = Tools(gateway.catalog, CONTEXT)
    sandbox = tools.get(SandboxTool)
    code = "print(open('in.csv').read())"
    with pytest.raises(ApprovalRequired) as held:
        sandbox.run_python(code, files={"in.csv": "a,1"}).audit_as("Read the file").execute()
    request = held.value.request
    assert request.arguments["files"] == {"in.csv": {"sha256": hashlib.sha256(b"a,1").hexdigest(), "size": 3}}
    assert "a,1" not in repr(request.as_dict())
    grant = HmacApprover(SECRET).grant(request, approved_by="ops@acme")
    with pytest.raises(PermissionError):
        sandbox.run_python(code, files={"in.csv": "a,2"}).audit_as("Read the file").execute(approval=grant)
    assert tools.executions(SandboxTool) == 0
    done = (
        sandbox.run_python(code, files={"in.csv": b"a,1"}).audit_as("Read the file").execute(approval=grant)
    )
    assert done.stdout == "a,1\n" and tools.executions(SandboxTool) == 1
    assert runs(sink) == ["APPROVAL_REQUIRED", "DENIED", "SUCCESS"]


def test_a_grant_for_a_program_binds_its_exact_argv(gateway: Gateway, sink: MemorySink):
    argv = ["/usr/bin/python3", "-c", "import sys; print(sys.argv[1:])", "one"]
    held = gateway.invoke("sandbox.run", {"argv": argv, "audit_as": "Run a program"}, context=CONTEXT)
    assert held.approval is not None and held.approval.arguments["argv"] == argv
    grant = grant_for(held)
    other = gateway.invoke(
        "sandbox.run",
        {"argv": [*argv[:3], "two"], "audit_as": "Run a program"},
        context=CONTEXT,
        approval=grant,
    )
    assert (other.status, other.reason_code, other.attempts) == (Status.DENIED, "APPROVAL_INVALID", 0)
    done = gateway.invoke(
        "sandbox.run", {"argv": argv, "audit_as": "Run a program"}, context=CONTEXT, approval=grant
    )
    assert done.status is Status.SUCCESS and done.content.stdout == "['one']\n"
    assert runs(sink) == ["APPROVAL_REQUIRED", "DENIED", "SUCCESS"]


def test_guardrails_see_the_resolved_profile_and_inputs_by_digest(tmp_path: Path):
    """A rule on a profile matches a call that leaves the profile to the default; what the rule sees
    of stdin is its digest. Refused before anything runs, and audited."""
    seen: list[dict[str, Any]] = []

    def analysis_profile(arguments: Any) -> bool:
        seen.append(dict(arguments))
        return bool(arguments.get("profile") == "analysis")

    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    sink = MemorySink()
    rule = Guardrail(id="NO_ANALYSIS", action=GuardrailAction.DENY, tool="sandbox", when=analysis_profile)
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(path),
        providers=[plugin],
        discover=False,
        env=ACK,
        governance=Governance(audit=AuditTrail(sink), approver=HmacApprover(SECRET), guardrails=[rule]),
    )
    try:
        refused = gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT)  # no profile: the default
    finally:
        gateway.close()
    assert (refused.status, refused.reason_code, refused.attempts) == (
        Status.DENIED,
        "GUARDRAIL_NO_ANALYSIS",
        0,
    )
    assert seen == [{**SHOWN, "profile": "analysis", "network": "none"}]
    decisions = [(e.decision, e.reason_code) for e in sink.records if e.type is EventType.GOVERNANCE_DECISION]
    assert decisions == [("DENY", "GUARDRAIL_NO_ANALYSIS")]
    assert runs(sink) == ["DENIED"]


def test_a_used_grant_does_not_run_twice(gateway: Gateway, sink: MemorySink):
    held = gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT)
    grant = grant_for(held)
    assert (
        gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT, approval=grant).status is Status.SUCCESS
    )
    again = gateway.invoke("sandbox.run_python", ARGS, context=CONTEXT, approval=grant)
    assert (again.status, again.reason_code) == (Status.DENIED, "APPROVAL_INVALID")
    assert runs(sink) == ["APPROVAL_REQUIRED", "SUCCESS", "DENIED"]


def test_by_name_async_runs_the_same_way(gateway: Gateway, sink: MemorySink):
    async def main():
        held = await gateway.ainvoke("sandbox.run_python", ARGS, context=CONTEXT)
        done = await gateway.ainvoke("sandbox.run_python", ARGS, context=CONTEXT, approval=grant_for(held))
        return held, done

    held, done = asyncio.run(main())
    assert held.status is Status.APPROVAL_REQUIRED
    assert done.status is Status.SUCCESS and done.content.stdout == "5\n"
    assert runs(sink) == ["APPROVAL_REQUIRED", "SUCCESS"]


def test_typed_door_raises_approval_required_then_runs_with_the_grant(gateway: Gateway, sink: MemorySink):
    tools = Tools(gateway.catalog, CONTEXT)
    sandbox = tools.get(SandboxTool)
    intent = sandbox.run_python(CODE, stdin="hello").audit_as("Upper-case the greeting")
    with pytest.raises(ApprovalRequired) as held:
        intent.execute()
    assert tools.executions(SandboxTool) == 0
    grant = HmacApprover(SECRET).grant(held.value.request, approved_by="ops@acme")
    other = sandbox.run_python(OTHER, stdin="hello").audit_as("Something else")
    with pytest.raises(PermissionError):
        other.execute(approval=grant)
    result = (
        sandbox.run_python(CODE, stdin="hello").audit_as("Upper-case the greeting").execute(approval=grant)
    )
    assert result.stdout == "5\n" and tools.executions(SandboxTool) == 1
    assert runs(sink) == ["APPROVAL_REQUIRED", "DENIED", "SUCCESS"]


def test_by_name_denies_a_program_the_profile_does_not_list(gateway: Gateway, sink: MemorySink):
    refused = gateway.invoke(
        "sandbox.run", {"argv": ["/bin/sh", "-c", "id"], "audit_as": "Run a shell"}, context=CONTEXT
    )
    assert (refused.status, refused.reason_code, refused.rule) == (
        Status.DENIED,
        "SANDBOX_DENIED",
        "sandbox:programs",
    )
    assert refused.attempts == 0
    decisions = [(e.decision, e.reason_code) for e in sink.records if e.type is EventType.GOVERNANCE_DECISION]
    assert decisions == [("DENY", "SANDBOX_DENIED")]


def test_mcp_client_sees_the_hold_and_the_result(gateway: Gateway, sink: MemorySink):
    """Through the official MCP client: listed with its schema, held for approval, nothing ran."""
    mcp_server = server(gateway, context=CONTEXT)

    async def main():
        async with Client(mcp_server) as client:
            listed = await client.list_tools()
            called = await client.call_tool("sandbox__run_python", ARGS)
            return listed, called

    listed, called = anyio.run(main)
    tool = next(t for t in listed.tools if t.name == "sandbox__run_python")
    assert tool.input_schema["required"] == ["source", "audit_as"]
    assert tool.annotations is not None and tool.annotations.idempotent_hint is True
    assert called.is_error
    assert "APPROVAL_REQUIRED" in json.dumps(called.structured_content or {}) + str(called.content)
    assert runs(sink) == ["APPROVAL_REQUIRED"]


def test_mcp_client_runs_code_when_no_approval_is_required(tmp_path: Path, sandbox_support: None):
    """Without require_approval the MCP client gets the result as structured content."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY.replace("require_approval = true", ""), encoding="utf-8")
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(path),
        providers=[plugin],
        discover=False,
        env=ACK,
        governance=Governance(audit=AuditTrail(sink)),
    )

    async def main():
        async with Client(server(gateway, context=CONTEXT)) as client:
            return await client.call_tool("sandbox__run_python", ARGS)

    try:
        called = anyio.run(main)
    finally:
        gateway.close()
    assert not called.is_error, called
    content = called.structured_content or {}
    assert content["exit_code"] == 0 and content["stdout"] == "5\n"
    assert content["files"][0]["path"] == "out.txt"
    assert runs(sink) == ["SUCCESS"]


class Script:
    """A pydantic-ai FunctionModel script: one list of parts per model turn."""

    def __init__(self, *steps: list[Any]) -> None:
        self.steps = list(steps)
        self.seen: list[Any] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        self.seen.extend(last.parts if isinstance(last, ModelRequest) else [])
        if not self.steps:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=self.steps.pop(0))


def test_pydantic_ai_defers_for_approval_then_runs_the_approved_code(gateway: Gateway, sink: MemorySink):
    script = Script([ToolCallPart(tool_name="sandbox__run_python", args=ARGS, tool_call_id="s1")])
    agent: Agent[Any, Any] = Agent(
        FunctionModel(script),
        deps_type=object,
        toolsets=[GovernedToolset(gateway)],
        output_type=[str, DeferredToolRequests],
    )
    first = asyncio.run(agent.run("go", deps=CONTEXT))
    assert isinstance(first.output, DeferredToolRequests)
    request = approval_requests(first.output)["s1"]
    assert request.arguments == SHOWN
    assert runs(sink) == ["APPROVAL_REQUIRED"]
    grant = HmacApprover(SECRET).grant(request, approved_by="ops@acme")
    second = asyncio.run(
        agent.run(
            message_history=first.all_messages(),
            deferred_tool_results=deferred_results(approved={"s1": grant}),
            deps=CONTEXT,
        )
    )
    assert second.output == "done"
    returned = [p for p in script.seen if p.part_kind == "tool-return"]
    content = returned[-1].content
    assert isinstance(content, SandboxResult) and content.stdout == "5\n"
    assert runs(sink) == ["APPROVAL_REQUIRED", "SUCCESS"]
