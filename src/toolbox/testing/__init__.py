"""Helpers for testing code that uses toolbox, denial paths first.

Use them directly or through the pytest plugin (fixtures ``toolbox_env``,
``toolbox_context`` and ``make_tools``), which is registered automatically
when toolbox is installed.

Example::

    from toolbox.testing import assert_denied, build_tools

    def test_http_is_denied_by_default():
        tools = build_tools(HTTP_PROVIDER)
        assert_denied(lambda: tools.get(HttpTool), tools, HttpTool,
                      error=ToolPolicyDeniedError, reason_code="POLICY_DENIED")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from toolbox.doors._tools import Tools
from toolbox.errors import ToolboxError
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import (
    Acknowledgement,
    Effect,
    OperationDescriptor,
    RiskClass,
    ToolDescriptor,
)
from toolbox.governance import Governance
from toolbox.registry._intent import ReadIntent, WriteIntent
from toolbox.registry._policy import ToolPolicy
from toolbox.registry._provider import ToolProvider
from toolbox.registry._runtime import ToolRuntime
from toolbox.testing._clock import ManualClock

__all__ = [
    "FakeTool",
    "ManualClock",
    "assert_denied",
    "build_tools",
    "fake_provider",
    "test_context",
]

E = TypeVar("E", bound=ToolboxError)


def test_context(**overrides: Any) -> ExecutionContext:
    """A trusted context for tests (tenant ``test-tenant``, principal ``test-principal``)."""
    fields: dict[str, Any] = {"tenant": "test-tenant", "principal": "test-principal"}
    fields.update(overrides)
    return ExecutionContext(**fields)


test_context.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def build_tools(
    *providers: object,
    policy: ToolPolicy | None = None,
    env: Mapping[str, str] | None = None,
    context: ExecutionContext | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    discover: bool = False,
    governance: Governance | None = None,
) -> Tools:
    """`Tools.load` for tests: explicit providers only, an injected environment.

    ``policy`` defaults to `ToolPolicy.standard`; ``env`` to an empty mapping, so
    neither the machine's environment nor ``TOOLBOX_POLICY`` leaks into a test.
    """
    return Tools.load(
        context or test_context(),
        policy=policy or ToolPolicy.standard(),
        providers=providers,
        discover=discover,
        env={} if env is None else env,
        options=options,
        governance=governance,
    )


def assert_denied(
    action: Callable[[], object],
    tools: Tools,
    tool: type | str,
    *,
    error: type[E],
    reason_code: str,
) -> E:
    """Assert that ``action`` is denied and that ``tool``'s code never ran.

    Checks the exception type, its ``reason_code``, that no operation of
    ``tool`` started executing, and that the denial is in the context trace.

    Returns:
        The exception, for further assertions on its message.
    """
    before = tools.executions(tool)
    try:
        action()
    except error as exc:
        caught = exc
    except BaseException as exc:
        raise AssertionError(
            f"expected {error.__name__} ({reason_code}), got {type(exc).__name__}: {exc}"
        ) from exc
    else:
        raise AssertionError(f"expected {error.__name__} ({reason_code}), but the action succeeded")
    actual = getattr(caught, "reason_code", None)
    assert actual == reason_code, f"expected reason code {reason_code}, got {actual}: {caught}"
    executed = tools.executions(tool) - before
    assert executed == 0, f"the tool ran {executed} time(s) although the call was denied"
    recorded = [d.reason_code for d in tools.context.trace.denials()]
    assert reason_code in recorded, f"denial {reason_code} missing from the trace: {recorded}"
    return caught


class FakeTool:
    """A tool for tests that counts every real execution of its code.

    ``read(value)`` is ``READ_ONLY``, ``write(value)`` is ``UNSAFE``. Each
    returns ``value``; ``calls`` lists what ran.
    """

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime
        self.calls: list[tuple[str, object]] = []

    def _run(self, operation: str, value: object) -> object:
        self.calls.append((operation, value))
        return value

    def read(self, value: object = None) -> ReadIntent[object]:
        """Intent to return ``value``."""
        return self._runtime.read_intent("read", lambda: self._run("read", value), arguments={"value": value})

    def write(self, value: object = None) -> WriteIntent[object]:
        """Intent to 'write' ``value`` (an ``UNSAFE`` operation)."""
        return self._runtime.write_intent(
            "write", lambda: self._run("write", value), arguments={"value": value}
        )


def fake_provider(
    name: str = "fake",
    *,
    risk: RiskClass = RiskClass.MEMORY_ONLY,
    acknowledgement: Acknowledgement | None = None,
    tool_type: type[FakeTool] | None = None,
) -> ToolProvider[FakeTool]:
    """A provider of a `FakeTool` subclass named after ``name``, with the given risk.

    Pass ``tool_type`` to choose the class (it must subclass `FakeTool`).
    """
    descriptor = ToolDescriptor(
        name=name,
        version="0",
        summary="A fake tool for tests.",
        risk=risk,
        acknowledgement=acknowledgement,
        operations=(
            OperationDescriptor(name="read", effect=Effect.READ_ONLY),
            OperationDescriptor(name="write", effect=Effect.UNSAFE),
        ),
    )
    cls = tool_type or type(f"FakeTool_{name.replace('.', '_').replace('-', '_')}", (FakeTool,), {})
    return ToolProvider(tool_type=cls, descriptor=descriptor)
