"""`@tool`: turn a plain function (sync or async) into a governed tool.

The descriptor comes from the decorator's arguments and the argument schema
from the function's signature, the way agent-framework users expect::

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    tools = Tools.load(ctx, providers=[add])
    gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum the order"}, context=ctx)
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Literal, Protocol, TypeVar, final, overload

from toolbox.errors import GovernanceBypassError, InvalidDescriptorError, ToolExecutionError
from toolbox.foundations._binding import Binder
from toolbox.foundations._descriptor import (
    FUNCTION_OPERATION,
    Acknowledgement,
    Effect,
    OperationDescriptor,
    RiskClass,
    ToolDescriptor,
    validate_descriptor,
)
from toolbox.pipeline.checks._schemas import operation_schema
from toolbox.registry._intent import ReadIntent, WriteIntent
from toolbox.registry._provider import ToolProvider
from toolbox.registry._runtime import ToolRuntime

__all__ = ["FunctionTool", "ReadCall", "ReadFunctionTool", "WriteCall", "WriteFunctionTool", "tool"]

R = TypeVar("R")
OPERATION = FUNCTION_OPERATION  # a @tool function is called by its own name (ToolDescriptor.offered_name)


class ReadCall(Protocol[R]):
    """What ``tools.get(read_function_tool)`` returns."""

    def call(self, *args: Any, **kwargs: Any) -> ReadIntent[R]:
        """Intent to call the function; declare ``purpose(...)``, then execute."""


class WriteCall(Protocol[R]):
    """What ``tools.get(write_function_tool)`` returns."""

    def call(self, *args: Any, **kwargs: Any) -> WriteIntent[R]:
        """Intent to call the function; declare ``audit_as(...)``, then execute."""


class ReadDecorator(Protocol):
    """``@tool(effect=READ_ONLY)``: an async function's tool returns what the coroutine returns."""

    @overload
    def __call__(self, function: Callable[..., Coroutine[Any, Any, R]], /) -> ReadFunctionTool[R]: ...
    @overload
    def __call__(self, function: Callable[..., R], /) -> ReadFunctionTool[R]: ...


class WriteDecorator(Protocol):
    """``@tool(...)`` for any other effect: an async function's tool returns the coroutine's result."""

    @overload
    def __call__(self, function: Callable[..., Coroutine[Any, Any, R]], /) -> WriteFunctionTool[R]: ...
    @overload
    def __call__(self, function: Callable[..., R], /) -> WriteFunctionTool[R]: ...


class FunctionTool(Generic[R]):
    """A decorated function, registrable as a tool: the governed wrapper.

    Pass it to ``Tools.load(providers=[...])``; ``tools.get(fn)`` returns an object
    whose ``call(...)`` builds the intent. Calling the wrapper itself raises
    `GovernanceBypassError`; the plain function, ``fn.function``, stays callable
    for unit tests (and for recursion inside the function).
    """

    def __init__(self, function: Callable[..., Any], provider: ToolProvider[Any]) -> None:
        self.function = function
        self.__toolbox_provider__ = provider
        self.__doc__ = function.__doc__
        self.__name__ = function.__name__

    @property
    def name(self) -> str:
        """The tool name (by-name calls use it alone: the tool has one operation)."""
        descriptor = self.__toolbox_provider__.descriptor
        assert isinstance(descriptor, ToolDescriptor)
        return descriptor.name

    @property
    def tool_type(self) -> type:
        """The class ``tools.get`` builds for this function."""
        return self.__toolbox_provider__.tool_type

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: a tool runs through the governed chain (``fn.function`` is the plain function).

        Raises:
            GovernanceBypassError: always; nothing runs.
        """
        name = self.name
        raise GovernanceBypassError(
            f"the tool {name!r} was called directly, outside the governed chain: call it through "
            f"the gateway or tools.get({self.__name__}).call(...); in unit tests call the plain "
            f"function, {self.__name__}.function(...)",
            tool=name,
        )

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


@final
class ReadFunctionTool(FunctionTool[R]):
    """A ``READ_ONLY`` function tool; its intents accept ``purpose``."""


@final
class WriteFunctionTool(FunctionTool[R]):
    """A function tool with side effects; its intents accept only ``audit_as``."""


class _Bound:
    """What ``tools.get(fn)`` returns: ``call(...)`` builds the intent."""

    #: Calls by name may go straight to ``function`` (see `toolbox.doors._route`).
    is_function_tool = True
    function: Callable[..., Any]
    effect: Effect
    is_async: bool
    #: Binds a call to the function's parameters (its bound arguments: `toolbox.foundations._binding`).
    binder: Binder

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime
        # The plain function is public (fn.function), so its calls carry no permit check.
        runtime.guarded = False

    def call(self, *args: Any, **kwargs: Any) -> ReadIntent[Any] | WriteIntent[Any]:
        """Intent to call the function with these arguments (checked against its signature)."""
        function = self.function
        try:
            arguments = self.binder.bind(args, kwargs)
        except ValueError as exc:
            raise ValueError(f"{function.__name__}(): {exc}") from None
        runtime = self._runtime
        kind = ReadIntent if self.effect is Effect.READ_ONLY else WriteIntent
        if self.is_async:

            def call() -> Any:
                raise ToolExecutionError(
                    f"{function.__name__} is async: call it with aexecute() or Gateway.ainvoke()",
                    request_sent=False,
                )

            async def acall() -> Any:
                return await function(**arguments)

            return kind(runtime, OPERATION, None, call, acall, arguments)
        # Built directly, not through runtime.read_intent: the call is the public function.
        return kind(runtime, OPERATION, None, lambda: function(**arguments), None, arguments)


def _tool_name(function: Callable[..., Any]) -> str:
    # A valid tool name: runs of anything else become one "_", none at either end.
    return re.sub(r"[^a-z0-9-]+", "_", function.__name__.lower()).strip("_").lstrip("0123456789-_") or "tool"


@overload
def tool(  # type: ignore[overload-overlap]  # READ_ONLY is the more specific overload
    *,
    risk: RiskClass,
    effect: Literal[Effect.READ_ONLY],
    name: str | None = None,
    version: str = "1",
    summary: str | None = None,
    acknowledgement: Acknowledgement | None = None,
    requires_approval: bool = False,
) -> ReadDecorator: ...
@overload
def tool(
    *,
    risk: RiskClass,
    effect: Effect = Effect.UNSAFE,
    name: str | None = None,
    version: str = "1",
    summary: str | None = None,
    acknowledgement: Acknowledgement | None = None,
    requires_approval: bool = False,
) -> WriteDecorator: ...


def tool(
    *,
    risk: RiskClass,
    effect: Effect = Effect.UNSAFE,
    name: str | None = None,
    version: str = "1",
    summary: str | None = None,
    acknowledgement: Acknowledgement | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[..., R]], Any]:
    """Decorate a function as a tool with one operation, ``call``.

    Args:
        risk: the risk class; required, as for every tool.
        effect: what the function does; undeclared means ``UNSAFE``.
        name: the tool name (default: the function's name).
        version: the tool version.
        summary: one line for people and models (default: the docstring's first line); a
            function with neither is refused.
        acknowledgement: a deployment acknowledgement the tool requires.
        requires_approval: every call needs a human approval bound to its arguments.

    Raises:
        InvalidDescriptorError: the resulting descriptor is invalid (e.g. a bad name), or the
            function has no docstring and no ``summary`` is given.
    """
    if not isinstance(risk, RiskClass):
        raise TypeError(f"risk must be a toolbox.RiskClass, got {risk!r}")
    chosen_effect = Effect(effect)

    def decorate(function: Callable[..., R]) -> FunctionTool[R]:
        if not callable(function):
            raise TypeError(f"@tool decorates functions, got {type(function).__name__}")
        doc = (summary if summary is not None else (inspect.getdoc(function) or "").split("\n")[0])[:500]
        descriptor = validate_descriptor(
            {
                "name": name or _tool_name(function),
                "version": version,
                "summary": doc,
                "risk": risk,
                "acknowledgement": acknowledgement,
                "operations": (
                    OperationDescriptor(
                        name=OPERATION, effect=chosen_effect, summary=doc, requires_approval=requires_approval
                    ),
                ),
            },
            provider=f"@tool {function.__qualname__}",
        )
        # Fail at decoration, not on the first call: the schema must be derivable. Derived as a
        # catalog asks for it (summary, offered name), so catalogs take this one (it is kept).
        summary_shown = descriptor.operations[0].summary or descriptor.summary
        offered = descriptor.offered_name(OPERATION)
        operation_schema(descriptor.name, OPERATION, function, chosen_effect, summary_shown, name=offered)
        if not doc.strip():
            # Every format offers the summary as the tool's description: a model shown none
            # cannot tell what the tool is for (refused here, as an over-long name is).
            raise InvalidDescriptorError(
                f"@tool {function.__qualname__}: give the function a docstring, or pass summary=: "
                "its first line is the description models are offered"
            )
        bound_type = type(
            f"{function.__name__}_tool",
            (_Bound,),
            {
                "function": staticmethod(function),
                "effect": chosen_effect,
                "is_async": inspect.iscoroutinefunction(function),
                "binder": Binder(function),
            },
        )
        # The by-name schema is derived from the function's own signature.
        bound_type.call = _with_signature_of(bound_type.call, function)  # type: ignore[attr-defined]
        provider: ToolProvider[Any] = ToolProvider(tool_type=bound_type, descriptor=descriptor)
        kind = ReadFunctionTool if chosen_effect is Effect.READ_ONLY else WriteFunctionTool
        return kind(function, provider)

    return decorate


def _with_signature_of(method: Callable[..., Any], function: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of ``method`` that reports ``function``'s signature (no extra call level)."""
    assert isinstance(method, types.FunctionType)
    copy = types.FunctionType(
        method.__code__, method.__globals__, method.__name__, method.__defaults__, method.__closure__
    )
    copy.__wrapped__ = function  # type: ignore[attr-defined]
    copy.__doc__ = method.__doc__
    copy.__qualname__ = method.__qualname__
    return copy
