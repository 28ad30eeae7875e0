"""Finding providers: entry points and explicit registration, each isolated.

A provider that fails to import, raises in its hook or returns an invalid
descriptor is reported as broken; every other provider still loads. Two
providers claiming one tool name, one tool type or overlapping by-name names
is an error (`toolbox.registry._namespace`): a package must never be able to shadow
another's tool.

A plugin module is registered once: several entry points of one distribution
may name it (one per tool, say), and its hook's tools are loaded once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, final

import pluggy

from toolbox.errors import InvalidDescriptorError, ProviderConflictError
from toolbox.foundations._binding import bind_operations, binding_problem
from toolbox.foundations._descriptor import ToolDescriptor, validate_descriptor
from toolbox.foundations._operations import OperationLock
from toolbox.foundations._redact import MASK, is_secret_name, redact_url
from toolbox.registry._entry_points import entry_points as installed_entry_points
from toolbox.registry._namespace import EXPLICIT, check_namespace, claimant
from toolbox.registry._policy import ToolPolicy, normalize_distribution
from toolbox.registry._provider import ENTRY_POINT_GROUP, PROJECT_NAME, ProviderSpec, ToolProvider

__all__ = ["BrokenProvider", "Discovery", "RegisteredTool", "discover", "explain_missing"]

HOOK_NAME = "toolbox_providers"
_MAX_ERROR_TEXT = 300
_NO_HOOK = (
    f"has no @hookimpl {HOOK_NAME}() function: name the module that defines it, "
    f"decorated with toolbox.hookimpl"
)
_MIN_SECRET = 6
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


@final
@dataclass(frozen=True)
class RegisteredTool:
    """A validated tool and where it came from."""

    descriptor: ToolDescriptor
    provider: ToolProvider[Any]
    distribution: str
    origin: str


@final
@dataclass(frozen=True)
class BrokenProvider:
    """A provider that could not be loaded, and why (no traceback, no secrets)."""

    distribution: str
    origin: str
    error: str
    #: The entry point's name, for an installed provider.
    entry_point: str | None = None


@final
@dataclass(frozen=True)
class Discovery:
    """Everything found: usable tools, broken providers and blocked ones."""

    tools: tuple[RegisteredTool, ...]
    broken: tuple[BrokenProvider, ...]
    blocked: tuple[str, ...]
    #: The providers' `OperationLock` objects (``toolbox_operation_locks``), for operator commands.
    locks: tuple[OperationLock, ...] = ()


def _error_text(exc: BaseException) -> str:
    """``Type: message``, shortened, with URL credentials and secret-named env values masked."""
    text = _URL.sub(lambda match: redact_url(match.group()), f"{type(exc).__name__}: {exc}".strip())
    for name, value in os.environ.items():
        # A provider's error may quote its own configuration; never repeat a secret from it.
        if len(value) >= _MIN_SECRET and is_secret_name(name) and value in text:
            text = text.replace(value, MASK)
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 3] + "..."


@final
class _Collector:
    __slots__ = ("blocked", "broken", "locks", "origins", "pm", "policy", "tools")

    def __init__(self, policy: ToolPolicy) -> None:
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(ProviderSpec)
        self.policy = policy
        self.tools: list[RegisteredTool] = []
        self.locks: list[OperationLock] = []
        self.broken: list[BrokenProvider] = []
        self.blocked: list[str] = []
        # pluggy plugin name -> (distribution, origin)
        self.origins: dict[str, tuple[str, str]] = {}

    def register_plugin(self, plugin: object, name: str, distribution: str, origin: str) -> None:
        known = self.pm.get_name(plugin)
        if known is not None:
            first_distribution, first_origin = self.origins[known]
            if first_distribution != distribution:
                self.broken.append(
                    BrokenProvider(
                        distribution,
                        origin,
                        f"names a plugin module already registered by {first_origin}; "
                        "an entry point must name a module of its own distribution",
                    )
                )
            # Otherwise another entry point of one distribution names the same module (one per
            # tool, say): pluggy registers a plugin once, and its hook returns every tool.
            return
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # noqa: BLE001 - isolate any provider failure
            self.broken.append(BrokenProvider(distribution, origin, _error_text(exc)))
            return
        if not self.pm.get_hookcallers(plugin):
            # pluggy registers an object without hook implementations silently: say why no tool came.
            self.pm.unregister(plugin)
            self.broken.append(BrokenProvider(distribution, origin, _NO_HOOK))
            return
        self.origins[name] = (distribution, origin)

    def add_tool(self, provider: object, distribution: str, origin: str) -> None:
        if not isinstance(provider, ToolProvider):
            self.broken.append(
                BrokenProvider(
                    distribution,
                    origin,
                    f"returned {type(provider).__name__}, not a toolbox.ToolProvider",
                )
            )
            return
        try:
            descriptor = validate_descriptor(provider.descriptor, provider=origin)
        except InvalidDescriptorError as exc:
            self.broken.append(BrokenProvider(distribution, origin, str(exc)))
            return
        problem = binding_problem(provider.tool_type, descriptor, provider.bind)
        if problem is not None:
            self.broken.append(BrokenProvider(distribution, origin, f"provider {origin!r}: {problem}"))
            return
        # Every call of an operation method binds its arguments (both doors): see foundations._binding.
        bind_operations(provider.tool_type, descriptor)
        self.tools.append(RegisteredTool(descriptor, provider, distribution, origin))

    def _call(self, impl: pluggy.HookImpl) -> Any:
        # An implementation takes the arguments it names (pluggy's rule); ``policy`` is the only one.
        return impl.function(**({"policy": self.policy} if "policy" in impl.argnames else {}))

    def call_hooks(self) -> None:
        # Each implementation is called on its own so one failure cannot hide the others.
        for impl in self.pm.hook.toolbox_operation_locks.get_hookimpls():
            distribution, origin = self.origins[impl.plugin_name]
            try:
                locks = list(self._call(impl))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - isolate any provider failure
                self.broken.append(BrokenProvider(distribution, origin, _error_text(exc)))
                continue
            self.locks.extend(lock for lock in locks if isinstance(lock, OperationLock))
        for impl in self.pm.hook.toolbox_providers.get_hookimpls():
            distribution, origin = self.origins[impl.plugin_name]
            try:
                result: Any = self._call(impl)
                items: list[object] = list(result)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - isolate any provider failure
                entry_point = impl.plugin_name.partition(":")[2] if distribution != EXPLICIT else None
                self.broken.append(BrokenProvider(distribution, origin, _error_text(exc), entry_point))
                continue
            for item in items:
                self.add_tool(item, distribution, origin)


def _load_entry_points(collector: _Collector, policy: ToolPolicy) -> None:
    # The listing is kept while sys.path is unchanged; loading and blocking are decided here, each time.
    for ep, distribution in installed_entry_points(ENTRY_POINT_GROUP):
        plugin_name = f"{distribution}:{ep.name}"
        origin = f"{distribution} (entry point {ep.name} = {ep.value})"
        if policy.is_blocked(distribution):
            collector.pm.set_blocked(plugin_name)
            collector.blocked.append(distribution)
            continue
        if collector.pm.has_plugin(plugin_name) or collector.pm.is_blocked(plugin_name):
            continue
        try:
            plugin = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - isolate any provider failure
            collector.broken.append(BrokenProvider(distribution, origin, _error_text(exc), ep.name))
            continue
        collector.register_plugin(plugin, plugin_name, distribution, origin)


def explain_missing(name: str, broken: Sequence[BrokenProvider]) -> str:
    """Why tool ``name`` may be missing: the broken providers it looks like it belongs to.

    A provider matches when its distribution or entry point name equals the
    tool name, or one ends or starts with the other at a ``-`` boundary
    (``acme.weather`` and ``acme-weather``, ``weather`` and ``toolbox-weather``).
    Returns "" when nothing is broken.
    """
    if not broken:
        return ""
    wanted = normalize_distribution(name)
    suspects = [b for b in broken if _belongs(wanted, b)]
    if suspects:
        return "; ".join(
            f"provider {b.distribution}"
            + (f" (entry point {b.entry_point})" if b.entry_point else "")
            + f" failed to load: {b.error}"
            for b in suspects
        )
    names = ", ".join(sorted({b.distribution for b in broken}))
    return f"{len(broken)} provider(s) failed to load ({names}); `toolbox list` shows why"


def _belongs(wanted: str, broken: BrokenProvider) -> bool:
    for label in (broken.distribution, broken.entry_point):
        if not label:
            continue
        key = normalize_distribution(label)
        if wanted == key or key.endswith(f"-{wanted}") or wanted.startswith(f"{key}-"):
            return True
    return False


def _check_conflicts(tools: Sequence[RegisteredTool]) -> None:
    check_namespace(tools)
    seen: dict[type, RegisteredTool] = {}
    for tool in tools:
        tool_type = tool.provider.tool_type
        other = seen.get(tool_type)
        if other is not None:
            raise ProviderConflictError(
                f"tool type {tool_type.__qualname__} is claimed by two providers: {claimant(other)} and "
                f"{claimant(tool)}; uninstall one of them or block its distribution in the policy "
                "([providers].block)"
            )
        seen[tool_type] = tool


def discover(policy: ToolPolicy, explicit: Iterable[object] = (), *, entry_points: bool = True) -> Discovery:
    """Find every provider: ``explicit`` ones, then installed entry points.

    ``explicit`` items are `ToolProvider` objects or plugin objects (modules)
    implementing ``toolbox_providers``.

    Raises:
        ProviderConflictError: two providers claim one tool name or type, or one tool's name
            lies inside another's namespace (see `toolbox.registry._namespace`).
    """
    collector = _Collector(policy)
    direct: list[ToolProvider[Any]] = []
    for index, given in enumerate(explicit):
        item = getattr(given, "__toolbox_provider__", given)  # a @tool function carries its provider
        if isinstance(item, ToolProvider):
            direct.append(item)
        elif not callable(getattr(item, HOOK_NAME, None)):
            raise TypeError(
                f"providers=[...] takes ToolProvider objects or imported plugin modules with a "
                f"{HOOK_NAME}() hook, got {item!r}; import the module and pass it, not its name"
            )
        elif getattr(getattr(item, HOOK_NAME), f"{PROJECT_NAME}_impl", None) is None:
            raise TypeError(
                f"{item!r}.{HOOK_NAME} is not marked as a hook: decorate it with @toolbox.hookimpl"
            )
        else:
            label = getattr(item, "__name__", type(item).__name__)
            collector.register_plugin(item, f"{EXPLICIT}:{index}:{label}", EXPLICIT, f"{EXPLICIT} {label}")
    if entry_points:
        _load_entry_points(collector, policy)
    for provider in direct:
        collector.add_tool(provider, EXPLICIT, f"{EXPLICIT} {provider.tool_type.__qualname__}")
    collector.call_hooks()
    _check_conflicts(collector.tools)
    return Discovery(
        tuple(collector.tools), tuple(collector.broken), tuple(collector.blocked), tuple(collector.locks)
    )
