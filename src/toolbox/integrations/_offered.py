"""What a gateway offers an agent framework, shared by the OpenAI Agents and LangChain rooms.

One `Offered` per operation the policy allows: the wire name every model API
accepts, the description, the OpenAI strict-mode parameter schema (a safe
superset for other providers: an optional parameter is required-but-nullable,
and its ``null`` means absent) and whether a human approval can ever apply.
Imports no framework.
"""

from __future__ import annotations

import fnmatch
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, final

from toolbox import ExecutionContext, Gateway
from toolbox.governance import ApprovalCheck, GuardrailAction, Guardrails

__all__ = ["UNTRUSTED", "Offered", "Remembered", "context_key", "offered_operations", "trusted_context"]

# A context getter that raised or returned junk: not None (a non-strict gateway would use its
# fallback) and not a string (a resolver would be asked), so the gateway refuses it as
# DENIED/NO_TRUSTED_CONTEXT and records it in `Gateway.unattributed`.
UNTRUSTED = cast(ExecutionContext, object())

S = TypeVar("S")
K = TypeVar("K")
V = TypeVar("V")


@final
@dataclass(frozen=True)
class Offered:
    """One allowed operation as a framework tool."""

    name: str
    """The wire name (``tool__operation``), valid for every model API."""
    description: str
    parameters: dict[str, Any]
    """The OpenAI strict-mode JSON Schema of the arguments (intent field included)."""
    may_need_approval: bool
    """Whether the descriptor or a REQUIRE_APPROVAL guardrail can hold a call for a human."""


def offered_operations(gateway: Gateway) -> list[Offered]:
    """The operations ``gateway``'s policy allows, in `Gateway.definitions` order."""
    if not isinstance(gateway, Gateway):
        raise TypeError(f"gateway must be a toolbox.Gateway, got {type(gateway).__name__}")
    offered = []
    for definition in gateway.definitions(format="openai"):
        function = definition["function"]
        offered.append(
            Offered(
                name=function["name"],
                description=function["description"],
                parameters=function["parameters"],
                may_need_approval=_may_need_approval(gateway, function["name"]),
            )
        )
    return offered


def _may_need_approval(gateway: Gateway, name: str) -> bool:
    catalog = gateway.catalog
    checks = catalog.pipeline.interceptors
    if not any(isinstance(check, ApprovalCheck) for check in checks):
        return False
    _, tool, operation, _ = catalog.resolve_name(name)
    entry = catalog.entry(tool)
    if entry is not None and any(
        op.name == operation and op.requires_approval for op in entry.descriptor.operations
    ):
        return True
    # A guardrail's predicate sees the arguments only at call time; its patterns decide now.
    return any(
        rule.action is GuardrailAction.REQUIRE_APPROVAL
        and fnmatch.fnmatchcase(tool, rule.tool)
        and fnmatch.fnmatchcase(operation, rule.operation)
        for check in checks
        if isinstance(check, Guardrails)
        for rule in check.rules
    )


def trusted_context(getter: Callable[[S], object], source: S) -> ExecutionContext | str | None:
    """What ``getter`` takes from the framework's run context, or `UNTRUSTED`.

    An `ExecutionContext` object or a string reference (for the gateway's resolver)
    is passed on, and None ("no context": a strict gateway refuses it, one built with
    ``strict=False`` uses its fallback). A getter that raises, or returns anything
    else (a dict shaped like a context), gets the call refused by the gateway.
    """
    try:
        found = getter(source)
    except Exception:  # noqa: BLE001 - a failing getter is no trusted context
        return UNTRUSTED
    if found is None or isinstance(found, (ExecutionContext, str)):
        return found
    return UNTRUSTED


def context_key(context: ExecutionContext | str | None) -> str:
    """The run a framework call belongs to, for keying what is held between its steps.

    The tenant and principal are part of it: a run id is the application's choice and
    may repeat across callers, and one caller's held request must never answer another's.
    """
    if isinstance(context, str):
        return f"ref:{context}"
    if not isinstance(context, ExecutionContext):  # `UNTRUSTED` or None: refused by the gateway
        return "untrusted"
    # Control characters are refused in every field, so NUL separates them unambiguously.
    return f"run:{context.tenant}\x00{context.principal}\x00{context.run_id}"


@final
class Remembered(Generic[K, V]):
    """A bounded insertion-ordered mapping: the oldest entries go first once full.

    Holds what a run leaves between framework steps (pending approval requests,
    grants); a run that never resumes cannot grow it without bound.
    """

    __slots__ = ("_entries", "_limit", "_lock")

    def __init__(self, limit: int) -> None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"remember must be a positive integer, got {limit!r}")
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._limit = limit
        # LangChain runs sync tools on worker threads: put and pop may race.
        self._lock = threading.Lock()

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` (replacing an earlier one)."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)

    def get(self, key: K) -> V | None:
        """The value under ``key``, if still held."""
        return self._entries.get(key)

    def pop(self, key: K) -> V | None:
        """Remove and return the value under ``key``, if still held (once: a pop takes it)."""
        with self._lock:
            return self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
