"""Bound arguments: what an operation was called with, by its declared parameters.

An approval fingerprint, the arguments an approver is shown and an audit
payload must describe the call itself, not what a provider chose to pass as
``arguments=``: a grant for "100 cents to alice" must not run "999999 to
mallory". So the chain binds every call to its *call arguments*, derived from
the operation's declared parameters (its method's signature):

- a ``@tool`` function binds its own call (`toolbox.registry._function_tool`);
- a class-based tool's operation methods are wrapped once, when the provider
  loads (`bind_operations`): a call of ``tools.get(Payments).pay("alice", 100)``
  (the typed door) or of the same method by the by-name door records its
  bound arguments, and the `toolbox.ToolRuntime` hands them to the intent it
  builds (`called_with`);
- a tool described by JSON Schema (`toolbox.foundations._operations.DescribedOperations`,
  remote MCP tools) passes the arguments it validated against the schema.

A provider may map a parameter to what is bound instead of its value (a large
body by its digest) with ``ToolProvider(bind={operation: {parameter: how}})``.
Such a mapping names *every* declared parameter of the operation (``None``
keeps the value as passed): one that leaves a parameter out is refused when
the provider loads (`binding_problem`), so no parameter is ever unbound.

Secret parameters stay in the binding: the fingerprint is an HMAC under the
application's key, and what is shown or stored is redacted (secret names,
`pydantic.SecretStr`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, final

from toolbox.foundations._descriptor import ToolDescriptor

__all__ = [
    "Binder",
    "bind_operations",
    "binding_problem",
    "called_with",
    "is_operation_method",
    "transformed",
]

#: How a provider maps one parameter to its bound value (None: the value as passed).
Transform = Callable[[Any], object] | None

# (operation, bound arguments) of the operation method running in this thread or task, if any.
_CALLED: contextvars.ContextVar[tuple[str, Mapping[str, Any]] | None] = contextvars.ContextVar(
    "toolbox_called_with", default=None
)
_MARK = "__toolbox_binds__"


@final
class Binder:
    """Binds positional and keyword arguments to a callable's parameters, defaults applied."""

    __slots__ = ("defaults", "names", "nameset", "required", "signature")

    def __init__(self, function: Callable[..., Any], *, skip_self: bool = False) -> None:
        signature = inspect.signature(function)
        params = list(signature.parameters.values())
        if skip_self and params:
            params = params[1:]
            signature = signature.replace(parameters=params)
        self.signature = signature
        simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        #: The parameters in order; empty for an unusual signature (every call takes Signature.bind).
        self.names: tuple[str, ...] = tuple(p.name for p in params) if simple else ()
        self.nameset = frozenset(self.names)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.required = frozenset(p.name for p in params if p.default is p.empty)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name, defaults applied (``ValueError`` if they do not fit)."""
        # Fast paths for plain parameters; anything unusual goes through Signature.bind.
        names = self.names
        if not kwargs and names and len(args) == len(names):
            return dict(zip(names, args))  # noqa: B905 - lengths are equal: every parameter by position
        if not args and names and kwargs.keys() == self.nameset:
            return dict(kwargs)  # every parameter by keyword: what the by-name door passes
        if (
            names
            and len(args) <= len(names)
            and not (kwargs.keys() - self.nameset)
            and not (kwargs.keys() & set(names[: len(args)]))
        ):
            arguments = {**self.defaults, **dict(zip(names[: len(args)], args, strict=True)), **kwargs}
            if not (self.required - arguments.keys()):
                return arguments
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        bound.apply_defaults()
        return dict(bound.arguments)


def is_operation_method(function: object) -> bool:
    """Whether ``function`` is an operation method wrapped by `bind_operations` (it takes ``self``)."""
    return getattr(function, _MARK, None) is not None


def called_with(operation: str) -> Mapping[str, Any] | None:
    """The bound arguments of ``operation``'s method, when it is the one running here; else None."""
    called = _CALLED.get()
    return called[1] if called is not None and called[0] == operation else None


def _wrapped(operation: str, method: Callable[..., Any], binder: Binder) -> Callable[..., Any]:
    @functools.wraps(method)
    def operation_method(self: object, *args: Any, **kwargs: Any) -> Any:
        try:
            bound: Mapping[str, Any] = binder.bind(args, kwargs)
        except ValueError:
            return method(self, *args, **kwargs)  # the method's own TypeError says what is wrong
        token = _CALLED.set((operation, bound))
        try:
            return method(self, *args, **kwargs)
        finally:
            _CALLED.reset(token)

    setattr(operation_method, _MARK, operation)
    return operation_method


def _declared(tool_type: type, operation: str) -> Callable[..., Any] | None:
    """The plain function of ``tool_type``'s operation method, or None (not a method defined here)."""
    method = inspect.getattr_static(tool_type, operation, None)
    return method if inspect.isfunction(method) else None


def transformed(bound: Mapping[str, Any], transforms: Mapping[str, Transform]) -> Mapping[str, Any]:
    """``bound`` with a provider's ``bind`` transforms applied (a copy; ``bound`` itself is left as is)."""
    mapped = dict(bound)
    for name, how in transforms.items():
        if how is not None and name in mapped:
            mapped[name] = how(mapped[name])
    return mapped


def bind_operations(tool_type: type, descriptor: ToolDescriptor) -> None:
    """Wrap the operation methods of ``tool_type`` so their calls record their bound arguments.

    Once per class and operation (a wrapped method is left as it is); methods
    inherited from a base class are wrapped where they are defined. A tool
    whose operations are not methods (a ``@tool`` function, a tool described
    by JSON Schema) has nothing to wrap.
    """
    if getattr(tool_type, "is_function_tool", False):
        return
    for op in descriptor.operations:
        for owner in tool_type.__mro__:
            method = _declared(owner, op.name) if op.name in vars(owner) else None
            if method is None:
                continue
            if getattr(method, _MARK, None) != op.name:
                setattr(owner, op.name, _wrapped(op.name, method, Binder(method, skip_self=True)))
            break


def binding_problem(tool_type: type, descriptor: ToolDescriptor, bind: object) -> str | None:
    """Why a provider's ``bind`` mapping cannot be used, or None: it must name every declared parameter."""
    if not bind:
        return None
    if not isinstance(bind, Mapping):
        return "bind must map operation names to {parameter: transform or None}"
    operations = {op.name for op in descriptor.operations}
    for operation, mapping in bind.items():
        where = f"{descriptor.name}.{operation}"
        if operation not in operations:
            return f"bind names {where}, which the descriptor does not declare"
        method = getattr(tool_type, operation, None)
        if not callable(method) or not isinstance(mapping, Mapping):
            return f"bind for {where} must map its parameters to a transform or None"
        declared = list(inspect.signature(inspect.unwrap(method)).parameters)
        declared = declared[1:] if declared[:1] == ["self"] else declared
        missing = [name for name in declared if name not in mapping]
        if missing:
            return (
                f"bind for {where} leaves out the declared parameter {missing[0]!r}: name every "
                "parameter (None binds the value as passed), so none goes unbound"
            )
        unknown = sorted(set(mapping) - set(declared))
        if unknown:
            return f"bind for {where} names {unknown[0]!r}, which is not one of its parameters"
        if not all(how is None or callable(how) for how in mapping.values()):
            return f"bind for {where} maps a parameter to something that is not callable"
    return None
