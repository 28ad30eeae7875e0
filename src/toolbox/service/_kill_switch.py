"""The one adapter between the service and the kill switch.

The chain's `toolbox.pipeline.checks._builtin.KillSwitch` reads the switches from the
fleet's `KillSwitchStore` (``[state]``; this process's memory by default) and
the ``TOOLBOX_KILL_SWITCH`` variable. This adapter is how the service reads
and flips them; nothing else in the service touches the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from toolbox.pipeline._state_ports import KillEntry, KillSwitchStore
from toolbox.pipeline.checks._builtin import KillSwitch

__all__ = ["KillSwitchControl", "SwitchState"]


@final
@dataclass(frozen=True)
class SwitchState:
    """One switch: engaged or not, why, by whom and when."""

    engaged: bool
    reason: str = ""
    changed_by: str | None = None
    changed_at: float | None = None

    @staticmethod
    def of(entry: KillEntry | None) -> SwitchState:
        """The state an engaged entry (or None: released) stands for."""
        if entry is None:
            return SwitchState(False)
        return SwitchState(True, entry.reason, entry.who, entry.at)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "engaged": self.engaged,
            "reason": self.reason,
            "changed_by": self.changed_by,
            "changed_at": self.changed_at,
        }


@final
class KillSwitchControl:
    """Reads and flips the global switch and per-tool switches at run time.

    Calls to the store may raise `StateUnavailableError` (a remote store that
    does not answer); the routes turn that into a 503 problem.
    """

    __slots__ = ("_env", "_store")

    def __init__(self, store: KillSwitchStore, env: Mapping[str, str]) -> None:
        self._store = store
        self._env = env

    def from_environment(self) -> bool:
        """Whether the process environment engages the switch (the service cannot release that)."""
        return KillSwitch(env=self._env).engaged()

    def global_state(self) -> SwitchState:
        """The global switch."""
        return SwitchState.of(self._store.engaged().get(None))

    def tool_states(self) -> dict[str, SwitchState]:
        """The stopped tools."""
        return {
            tool: SwitchState.of(entry) for tool, entry in self._store.engaged().items() if tool is not None
        }

    def set(self, tool: str | None, *, engaged: bool, reason: str, changed_by: str) -> None:
        """Engage or release the global switch (``tool`` None) or one tool's."""
        if engaged:
            self._store.engage(tool, reason=reason, who=changed_by)
        else:
            self._store.release(tool, reason=reason, who=changed_by)
