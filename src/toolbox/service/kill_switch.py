"""The one adapter between the service and the chain's `KillSwitch`.

The chain's `toolbox.pipeline.checks.KillSwitch` reads the global switch
from an environment mapping on every call and the stopped tools from its
configuration. This adapter feeds both: a mapping that overlays
``TOOLBOX_KILL_SWITCH`` on the real environment (flipped without a rebuild),
and, for a tool, a rebuilt gateway whose `Governance` lists it in
``disabled_tools``. When the kill switch moves onto shared fleet state, this
module is the one place that changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, final

from toolbox.pipeline.checks import KILL_SWITCH_ENV, KillSwitch

__all__ = ["KillSwitchControl", "SwitchState"]


@final
@dataclass(frozen=True)
class SwitchState:
    """One switch: engaged or not, why, by whom and when (None for the environment's)."""

    engaged: bool
    reason: str = ""
    changed_by: str | None = None
    changed_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "engaged": self.engaged,
            "reason": self.reason,
            "changed_by": self.changed_by,
            "changed_at": self.changed_at,
        }


@final
class _Overlay(Mapping[str, str]):
    """The environment, with ``TOOLBOX_KILL_SWITCH`` set while the service's global switch is on."""

    __slots__ = ("_base", "engaged")

    def __init__(self, base: Mapping[str, str]) -> None:
        self._base = base
        self.engaged = False

    def __getitem__(self, key: str) -> str:
        if key == KILL_SWITCH_ENV and self.engaged:
            return "on"
        return self._base[key]

    def get(self, key: str, default: Any = None) -> Any:
        if key == KILL_SWITCH_ENV and self.engaged:
            return "on"
        return self._base.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)


@final
class KillSwitchControl:
    """Turns the global switch and per-tool switches on and off at run time.

    Args:
        env: the environment the catalog reads (acknowledgements, the switch variable).
        rebuild: called with the set of stopped tools; swaps in a gateway whose chain stops them.
    """

    __slots__ = ("_env", "_global", "_lock", "_rebuild", "_tools")

    def __init__(self, env: Mapping[str, str], rebuild: Callable[[frozenset[str]], None]) -> None:
        self._env = _Overlay(env)
        self._rebuild = rebuild
        self._global = SwitchState(False)
        self._tools: dict[str, SwitchState] = {}
        self._lock = threading.Lock()

    @property
    def env(self) -> Mapping[str, str]:
        """The mapping to build the catalog with."""
        return self._env

    def from_environment(self) -> bool:
        """Whether the process environment engages the switch (the service cannot release that)."""
        return KillSwitch(env=self._env._base).engaged()

    def global_state(self) -> SwitchState:
        """The service's global switch."""
        return self._global

    def tool_states(self) -> dict[str, SwitchState]:
        """The tools stopped by the service."""
        return dict(self._tools)

    def set(self, tool: str | None, *, engaged: bool, reason: str, changed_by: str) -> SwitchState:
        """Engage or release the global switch (``tool`` None) or one tool's."""
        state = SwitchState(engaged, reason, changed_by, time.time())
        with self._lock:
            if tool is None:
                self._global = state
                self._env.engaged = engaged
                return state
            before = frozenset(self._tools)
            if engaged:
                self._tools[tool] = state
            else:
                self._tools.pop(tool, None)
            after = frozenset(self._tools)
            if after != before:
                self._rebuild(after)
        return state
