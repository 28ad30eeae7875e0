"""Remotely described operations (toolbox.foundations._operations) in the core, without any MCP."""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from toolbox import (
    Effect,
    ExecutionContext,
    Gateway,
    OperationDescriptor,
    RiskClass,
    Status,
    ToolDeniedError,
    ToolDescriptor,
    ToolPolicy,
    ToolProvider,
    ToolRuntime,
    hookimpl,
)
from toolbox.errors import ConfigurationError, InvalidArgumentsError, PolicyFileError
from toolbox.foundations._operations import DescribedOperations, describes_operations
from toolbox.governance._policy_file import policy_from_mapping
from toolbox.pipeline.checks._schemas import described_schema
from toolbox.provider import OperationLock

CTX = ExecutionContext(tenant="tenant-a", principal="alice")
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


class Remote:
    """A tool whose two operations are described by JSON Schema, as a remote server's would be."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    @classmethod
    def operation_parameters(cls, operation: str) -> Mapping[str, Any]:
        return SCHEMA

    def operation_intent(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        values = dict(arguments)
        if values.get("q") == "deny":
            raise ToolDeniedError(
                "refused by the tool", tool="acme.remote", reason_code="NOPE", rule="acme:nope"
            )
        if not isinstance(values.get("q"), str):
            raise InvalidArgumentsError("q must be a string", error_code="type", field_path="q")

        def run() -> str:
            Remote.calls.append((operation, values))
            return f"{operation}:{values['q']}"

        if operation == "find":
            return self._runtime.read_intent(operation, run, arguments=values)
        return self._runtime.write_intent(operation, run, arguments=values)


REMOTE = ToolDescriptor(
    name="acme.remote",
    version="1",
    risk=RiskClass.MEMORY_ONLY,
    operations=(
        OperationDescriptor(name="find", effect=Effect.READ_ONLY, summary="Find."),
        OperationDescriptor(name="store", effect=Effect.UNSAFE, summary="Store."),
    ),
)


@pytest.fixture
def gateway():
    Remote.calls = []
    made = Gateway.load(providers=[ToolProvider(Remote, REMOTE)], discover=False, env={})
    yield made
    made.close()


def test_the_protocol_is_recognised_on_the_type():
    assert describes_operations(Remote)
    assert not describes_operations(int)
    assert isinstance(Remote(None), DescribedOperations)  # type: ignore[arg-type]


def test_a_described_operation_is_called_by_name_with_its_intent(gateway):
    read = gateway.invoke("acme.remote.find", {"q": "x", "purpose": "Look it up"}, context=CTX)
    write = gateway.invoke("acme__remote__store", {"q": "y", "audit_as": "Keep it"}, context=CTX)
    assert (read.status, read.content) == (Status.SUCCESS, "find:x")
    assert (write.status, write.content) == (Status.SUCCESS, "store:y")
    assert Remote.calls == [("find", {"q": "x"}), ("store", {"q": "y"})]


def test_the_intent_field_is_required_and_checked(gateway):
    missing = gateway.invoke("acme.remote.store", {"q": "y"}, context=CTX)
    assert (missing.status, missing.field_path) == (Status.INVALID_ARGUMENTS, "audit_as")
    blank = gateway.invoke("acme.remote.find", {"q": "y", "purpose": "   "}, context=CTX)
    assert blank.status is Status.INVALID_ARGUMENTS
    assert Remote.calls == []


def test_the_tools_own_refusals_keep_their_codes(gateway):
    denied = gateway.invoke("acme.remote.find", {"q": "deny", "purpose": "Try"}, context=CTX)
    assert (denied.status, denied.reason_code, denied.rule) == (Status.DENIED, "NOPE", "acme:nope")
    invalid = gateway.invoke("acme.remote.find", {"q": 3, "purpose": "Try"}, context=CTX)
    assert (invalid.status, invalid.error_code, invalid.field_path) == (Status.INVALID_ARGUMENTS, "type", "q")
    assert Remote.calls == []


def test_the_guards_run_before_the_tool_sees_anything(gateway):
    deep: object = "x"
    for _ in range(100):
        deep = [deep]
    result = gateway.invoke("acme.remote.find", {"q": deep, "purpose": "Try"}, context=CTX)
    assert (result.status, result.error_code) == (Status.INVALID_ARGUMENTS, "too_deep")
    assert Remote.calls == []


def test_definitions_show_the_described_schema_with_the_intent(gateway):
    definitions = {d["name"]: d for d in gateway.definitions()}
    find = definitions["acme__remote__find"]["parameters"]
    assert find["required"] == ["q", "purpose"]
    assert set(find["properties"]) == {"q", "purpose"}
    assert find["additionalProperties"] is False
    store = definitions["acme__remote__store"]["parameters"]
    assert store["required"] == ["q", "audit_as"]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"type": "array"}, "must be an object schema"),
        ({"type": "object", "properties": {"q": {"$ref": "https://x.example/s"}}}, r"only local \$ref"),
        ({"type": "object", "properties": {"audit_as": {"type": "string"}}}, "without 'audit_as'"),
        ({"type": "object", "properties": []}, "needs a properties object"),
    ],
)
def test_a_bad_described_schema_is_a_configuration_error(parameters, message):
    with pytest.raises(ConfigurationError, match=message):
        described_schema("acme.remote", "store", parameters, Effect.UNSAFE)


class _Lock:
    name = "main"
    tool = "acme.pinned"

    def lock(self, *, timeout: float) -> Sequence[str]:
        return ["pinned"]

    def drift(self, *, timeout: float) -> Sequence[str]:
        return []


def _plugin(**hooks: Any) -> types.ModuleType:
    module = types.ModuleType("acme_remote_plugin")
    for name, function in hooks.items():
        setattr(module, name, hookimpl(function))
    return module


def test_a_hook_may_read_the_policy_and_offer_locks():
    seen: list[Mapping[str, Any]] = []

    def toolbox_providers(policy: ToolPolicy) -> list[ToolProvider[Any]]:
        seen.append(policy.governance.get("tools", {}))
        return [ToolProvider(Remote, REMOTE)]

    def toolbox_operation_locks(policy: ToolPolicy) -> list[OperationLock]:
        return [_Lock()]

    policy = policy_from_mapping(
        {"version": 1, "tools": {"acme": {"servers": {"main": {}}}}}, source="p.toml"
    )
    gateway = Gateway.load(
        policy=policy,
        providers=[
            _plugin(toolbox_providers=toolbox_providers, toolbox_operation_locks=toolbox_operation_locks)
        ],
        discover=False,
        env={},
    )
    assert seen == [{"acme": {"servers": {"main": {}}}}]
    # [tools.acme] configures the acme.* family: accepted although no tool is named "acme".
    assert [lock.name for lock in gateway.catalog.operation_locks] == ["main"]
    assert "acme.remote" in gateway.catalog.names()


def test_a_broken_lock_hook_is_isolated():
    def toolbox_providers() -> list[ToolProvider[Any]]:
        return [ToolProvider(Remote, REMOTE)]

    def toolbox_operation_locks() -> list[OperationLock]:
        raise RuntimeError("cannot read the lock file")

    gateway = Gateway.load(
        providers=[
            _plugin(toolbox_providers=toolbox_providers, toolbox_operation_locks=toolbox_operation_locks)
        ],
        discover=False,
        env={},
    )
    assert "acme.remote" in gateway.catalog.names()
    assert gateway.catalog.operation_locks == ()
    assert "RuntimeError: cannot read the lock file" in gateway.catalog.broken_providers[0].error


def test_a_table_for_a_name_nobody_provides_is_still_refused():
    policy = policy_from_mapping({"version": 1, "tools": {"acmx": {"servers": {}}}}, source="p.toml")
    with pytest.raises(PolicyFileError, match="unknown tool 'acmx'"):
        Gateway.load(policy=policy, providers=[ToolProvider(Remote, REMOTE)], discover=False, env={})
