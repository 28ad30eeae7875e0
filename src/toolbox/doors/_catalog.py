"""`Catalog`: discovered tools, their policy decisions and the governed chain.

A catalog is context-free and shared: one per process (or per policy). Bind
it to a trusted `ExecutionContext` with ``Tools(catalog, context)`` for the
typed door, or hand it to a `Gateway` for the by-name door. (`toolbox.doors._tools`
imports this module, never the other way round.)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, final

from toolbox.errors import InvalidArgumentsError
from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.foundations._operations import OperationLock, describes_operations
from toolbox.foundations._wire_names import dotted_name, to_wire_name
from toolbox.governance import Governance
from toolbox.pipeline._chain import Pipeline
from toolbox.pipeline.checks._schemas import OperationSchema, described_schema, operation_schema
from toolbox.registry._discovery import BrokenProvider, RegisteredTool, explain_missing
from toolbox.registry._discovery import discover as discover_tools
from toolbox.registry._namespace import check_namespace
from toolbox.registry._policy import PolicyDecision, ToolPolicy

if TYPE_CHECKING:
    from toolbox.audit._trail import AuditTrail

__all__ = ["Catalog", "CatalogEntry"]

POLICY_ENV = "TOOLBOX_POLICY"
_MAX_CACHED_NAMES = 4096


def merge_options(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``override``; nested tables merge, any other value of ``override`` wins."""
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_options(current, value)
        else:
            merged[key] = value
    return merged


@final
class CatalogEntry:
    """One registered tool and the policy's decision about it (computed once)."""

    __slots__ = ("decision", "registered")

    def __init__(self, registered: RegisteredTool, decision: PolicyDecision) -> None:
        self.registered = registered
        self.decision = decision

    @property
    def descriptor(self) -> ToolDescriptor:
        """The tool's descriptor."""
        return self.registered.descriptor


@final
class Catalog:
    """Everything decided at load time, shared by every context."""

    __slots__ = (
        "_blocked",
        "_broken",
        "_by_name",
        "_entries",
        "_env",
        "_governance",
        "_lock",
        "_locks",
        "_names",
        "_options",
        "_pipeline",
        "_policy",
        "_schemas",
    )

    def __init__(
        self,
        policy: ToolPolicy,
        tools: Iterable[RegisteredTool],
        *,
        broken: Iterable[BrokenProvider] = (),
        blocked: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        governance: Governance | None = None,
        locks: Iterable[OperationLock] = (),
    ) -> None:
        self._policy = policy
        self._locks = tuple(locks)
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._broken = tuple(broken)
        self._blocked = tuple(sorted(set(blocked)))
        self._entries: dict[object, CatalogEntry] = {}
        self._by_name: dict[str, CatalogEntry] = {}
        tools = tuple(tools)
        check_namespace(tools)  # name resolution below relies on it; discovery checked it already
        for tool in tools:
            entry = CatalogEntry(tool, policy.decide(tool.descriptor, tool.provider.tool_type))
            self._entries[tool.descriptor.name] = entry
            self._entries[tool.provider.tool_type] = entry
            self._by_name[tool.descriptor.name] = entry
        # A policy file's [tools.<name>] tables are the base; options given in code win, key by key.
        self._options = merge_options(policy.governance.get("tools") or {}, options or {})
        # A table named by a namespace ([tools.mcp] for mcp.*) configures that family of tools.
        family = (*self._by_name, *(lock.tool for lock in self._locks))
        for name in self._options:
            if name not in self._by_name and not any(n.startswith(f"{name}.") for n in family):
                raise ValueError(
                    f"options given for unknown tool {name!r}; installed tools: "
                    f"{', '.join(sorted(self._by_name)) or 'none'}"
                )
        chosen = governance if governance is not None else Governance()
        if not isinstance(chosen, Governance):
            raise TypeError(f"governance must be a toolbox.Governance, got {type(chosen).__name__}")
        self._governance = chosen.with_policy(policy)
        self._pipeline = self._governance.build(env=self._env)
        self._schemas: dict[tuple[str, str], OperationSchema] = {}
        self._names: dict[str, tuple[str, str, str, str | None]] = {}
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        *,
        policy: ToolPolicy | None = None,
        providers: Iterable[object] = (),
        discover: bool = True,
        env: Mapping[str, str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        governance: Governance | None = None,
    ) -> Catalog:
        """Discover providers and decide, once, which tools may be used.

        See `toolbox.Tools.load` for the arguments.
        """
        environ: Mapping[str, str] = os.environ if env is None else env
        if policy is None:
            path = environ.get(POLICY_ENV)
            policy = ToolPolicy.from_file(path) if path else ToolPolicy.standard()
        elif not isinstance(policy, ToolPolicy):
            raise TypeError(f"policy must be a toolbox.ToolPolicy, got {type(policy).__name__}")
        found = discover_tools(policy, providers, entry_points=discover)
        # A tool whose operations are not pinned yet is known (its lock says so), just not usable.
        known = [*(t.descriptor.name for t in found.tools), *(lock.tool for lock in found.locks)]
        policy.check_known_tools(known, explain=lambda name: explain_missing(name, found.broken))
        return cls(
            policy,
            found.tools,
            broken=found.broken,
            blocked=found.blocked,
            env=env,
            options=options,
            governance=governance,
            locks=found.locks,
        )

    # -- queries --------------------------------------------------------------

    @property
    def policy(self) -> ToolPolicy:
        """The policy that decided."""
        return self._policy

    @property
    def env(self) -> Mapping[str, str]:
        """The environment acknowledgements are read from."""
        return self._env

    @property
    def audit(self) -> AuditTrail | None:
        """The audit trail (from code or the policy file's ``[audit]``), if any."""
        return self._governance.audit

    @property
    def pipeline(self) -> Pipeline:
        """The governed chain every call runs through."""
        return self._pipeline

    @property
    def operation_locks(self) -> tuple[OperationLock, ...]:
        """The providers' operation locks (`OperationLock`), for operator commands."""
        return self._locks

    @property
    def broken_providers(self) -> tuple[BrokenProvider, ...]:
        """Providers that failed to load, with their distribution and error."""
        return self._broken

    @property
    def blocked_distributions(self) -> tuple[str, ...]:
        """Installed provider distributions the policy refused to load."""
        return self._blocked

    def entry(self, ref: object) -> CatalogEntry | None:
        """The entry of ``ref`` (a tool type, a name or a ``@tool`` function), or None."""
        try:
            return self._entries[ref]
        except (KeyError, TypeError):
            provider = getattr(ref, "__toolbox_provider__", None)
            return self._entries.get(provider.tool_type) if provider is not None else None

    def names(self) -> list[str]:
        """Names of every registered tool, sorted."""
        return sorted(self._by_name)

    def options_for(self, name: str) -> Mapping[str, Any] | None:
        """The options given for tool ``name``."""
        return self._options.get(name)

    def resolve_name(self, name: str) -> tuple[str, str, str, str | None]:
        """Resolve a by-name call: ``(dotted name, tool, operation, version)``.

        ``name`` is ``tool.operation[:version]``, or its wire name
        (`toolbox.foundations._wire_names`: ``tool__operation``); a tool with one operation
        may be called by its tool name alone. The dotted name returned is the
        one traces and audit events keep (with the version suffix, if given).
        Load-time namespace checks (`toolbox.registry._namespace`) make this a lookup,
        never a choice: the operation is the last dotted part.

        Raises:
            InvalidArgumentsError: malformed or unknown name (``error_code`` says which).
        """
        cached = self._names.get(name) if type(name) is str else None
        if cached is not None:
            return cached
        resolved = self._resolve_name(name)
        if len(self._names) < _MAX_CACHED_NAMES:
            self._names[name] = resolved
        return resolved

    def _resolve_name(self, name: str) -> tuple[str, str, str, str | None]:
        if not isinstance(name, str) or not name or len(name) > 200:
            raise InvalidArgumentsError(
                "the tool name must be a non-empty string", error_code="bad_name", field_path=""
            )
        dotted = dotted_name(name)
        base, _, version = dotted.partition(":")
        if base in self._by_name:
            tool = base
        else:
            tool = base.rpartition(".")[0]
            if tool not in self._by_name:
                raise InvalidArgumentsError(
                    f"no tool is registered as {base!r}", error_code="unknown_tool", field_path=""
                )
        operations = self._by_name[tool].descriptor.operations
        if base == tool:
            if len(operations) != 1:
                raise InvalidArgumentsError(
                    f"{tool!r} has several operations; call one of "
                    f"{', '.join(f'{tool}.{op.name}' for op in operations)}",
                    error_code="unknown_operation",
                    field_path="",
                )
            operation = operations[0].name
        else:
            operation = base[len(tool) + 1 :]
            if operation not in {op.name for op in operations}:
                raise InvalidArgumentsError(
                    f"{tool!r} has no operation {operation!r}", error_code="unknown_operation", field_path=""
                )
        return dotted, tool, operation, version or None

    def schema(self, tool: str, operation: str) -> OperationSchema:
        """The argument schema of ``tool.operation``, derived once from its method."""
        key = (tool, operation)
        schema = self._schemas.get(key)
        if schema is not None:
            return schema
        entry = self._by_name[tool]
        descriptor = entry.descriptor
        tool_type = entry.registered.provider.tool_type
        op = next(o for o in descriptor.operations if o.name == operation)
        summary = op.summary or descriptor.summary
        name = descriptor.offered_name(operation)  # a @tool function: by its own name
        if describes_operations(tool_type):
            parameters = tool_type.operation_parameters(operation)
            built = described_schema(tool, operation, parameters, op.effect, summary, name=name)
        else:  # shared with every catalog of this method (operation_schema keeps it): never changed here
            built = operation_schema(
                tool, operation, getattr(tool_type, operation), op.effect, summary, name=name
            )
        with self._lock:
            return self._schemas.setdefault(key, built)

    def definitions(self) -> list[dict[str, Any]]:
        """LLM function definitions (name, description, JSON Schema) of every allowed operation.

        Names are wire names (``calculator__evaluate``, `toolbox.foundations._wire_names`),
        which every model API accepts; `toolbox.Gateway` takes both spellings.

        Tools whose acknowledgement is missing are included: whether a call may
        run is decided per call.
        """
        found: list[dict[str, Any]] = []
        for name in sorted(self._by_name):
            entry = self._by_name[name]
            if entry.decision.allowed:
                for op in entry.descriptor.operations:
                    definition = self.schema(name, op.name).definition()
                    definition["name"] = to_wire_name(definition["name"])
                    found.append(definition)
        return found
