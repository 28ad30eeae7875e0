"""Small built-in checks: kill switch, delegation scope, tool access, deadline, budget."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, final

from toolbox.errors import ToolDeniedError, ToolUnavailableError
from toolbox.pipeline._invocation import BY_NAME, Invocation
from toolbox.pipeline._offload import blocks, submit
from toolbox.pipeline._result import ToolResult
from toolbox.pipeline._state_ports import Clock, KillEntry, KillSwitchStore

__all__ = ["AccessCheck", "BudgetCheck", "DeadlineCheck", "DelegationCheck", "KillSwitch"]

KILL_SWITCH_ENV = "TOOLBOX_KILL_SWITCH"
_OFF_VALUES = frozenset({"", "0", "off", "false", "no"})
LOGGER = logging.getLogger("toolbox.state")
_monotonic = time.monotonic
_running_loop = asyncio._get_running_loop  # the C call asyncio uses itself: None outside a running loop


@final
class KillSwitch:
    """Stops every call (or every call of some tools): DENIED/KILL_SWITCH.

    Engaged when ``enabled`` is False, or when the environment variable
    ``TOOLBOX_KILL_SWITCH`` holds anything but an empty string, ``0``, ``off``,
    ``false`` or ``no`` (so a typo engages it rather than silently not). The
    ``env`` mapping (default ``os.environ``) is read on every call: pass one
    your application keeps current to stop a running fleet without a restart.

    With a ``store`` (the fleet's `KillSwitchStore`, ``[state]`` in the policy
    file), the switches engaged there stop calls too. The store is read at most
    once per ``refresh`` seconds and its answer cached, so a call pays no round
    trip and a change reaches every process within ``refresh`` seconds. A store
    that does not answer keeps the switches it last read in force for up to
    ``max_stale`` seconds after that read (0: none; an engaged switch stays
    engaged), then stops every call (DENIED/STATE_UNAVAILABLE) until it
    answers again, retried once per ``refresh``. A store that announces its
    changes (``watch``: Redis pub/sub) has this switch re-read them the moment
    one is announced, on the store's thread: ``refresh`` stays the bound when
    an announcement is lost.

    On an event loop the refresh never blocks it: the async door (`acall`)
    reads the store on a worker thread (one read shared by every call waiting
    for it), and `engaged` answers True while the cache is stale there, so the
    fast paths hand such a call to the full chain, which awaits that read.
    """

    name = "kill_switch"
    per_attempt = True
    __slots__ = (
        "__weakref__",
        "_cache",
        "_disabled_tools",
        "_enabled",
        "_env",
        "_env_data",
        "_env_key",
        "_last_good",
        "_max_stale",
        "_reading",
        "_refresh",
        "_store",
        "blocks",
    )

    def __init__(
        self,
        *,
        enabled: bool = True,
        disabled_tools: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        store: KillSwitchStore | None = None,
        refresh: float = 1.0,
        max_stale: float = 0.0,
    ) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be a bool, got {type(enabled).__name__}")
        if not isinstance(refresh, (int, float)) or isinstance(refresh, bool) or not 0 <= refresh <= 3600:
            raise ValueError("refresh must be a number of seconds from 0 to 3600")
        if type(max_stale) not in (int, float) or not 0 <= max_stale <= 3600:
            raise ValueError("max_stale must be a number of seconds from 0 to 3600")
        self._max_stale = float(max_stale)
        # (read at, switches) of the store's last answer: kept in force for max_stale seconds.
        self._last_good: tuple[float, Mapping[str | None, KillEntry]] = (float("-inf"), {})
        self._enabled = enabled
        self._disabled_tools = frozenset(disabled_tools)
        self._env: Mapping[str, str] = os.environ if env is None else env
        # os.environ.get is a Python-level Mapping.get that raises and catches KeyError when the
        # variable is unset (about 1 us a call). os.environ keeps its values in the dict `_data`,
        # which its own reads use and every change through it (or monkeypatch) updates: looking the
        # encoded name up there is the same read, as fresh. A set variable is read through env.
        data, encodekey = getattr(self._env, "_data", None), getattr(self._env, "encodekey", None)
        fast = self._env is os.environ and type(data) is dict and callable(encodekey)
        self._env_data: dict[object, object] | None = data if fast else None
        self._env_key: object = encodekey(KILL_SWITCH_ENV) if fast else KILL_SWITCH_ENV  # type: ignore[misc]
        self._store = store
        self._refresh = float(refresh)
        # (read at, engaged switches or None when the store did not answer); read at -inf: never read.
        self._cache: tuple[float, Mapping[str | None, KillEntry] | None] = (float("-inf"), {})
        # The store read in flight for the async door, shared by every call awaiting it.
        self._reading: concurrent.futures.Future[None] | None = None
        #: Whether the async door reads the store off the event loop (a store that does I/O).
        self.blocks = blocks(store)
        watch = getattr(store, "watch", None)
        if callable(watch) and self._refresh > 0:
            # A store that announces changes (Redis pub/sub) has them re-read at once, on its thread.
            watch(self._read)

    def _stale(self) -> bool:
        return _monotonic() - self._cache[0] >= self._refresh

    def _read(self) -> None:
        """Read the store's switches into the cache (None there: the store did not answer)."""
        store = self._store
        assert store is not None
        now = _monotonic()
        switches: Mapping[str | None, KillEntry] | None
        try:
            answer = dict(store.engaged())
        except Exception as exc:  # noqa: BLE001 - any failure of the store stops calls (fail closed)
            read_at, last = self._last_good
            # The last answer stays in force for max_stale seconds after it was read, then calls stop.
            switches = last if now - read_at < self._max_stale else None
            if self._cache[1] is not None:
                held = "last switches kept" if switches is not None else "calls refused"
                LOGGER.warning("kill switch store unavailable (%s): %s", type(exc).__name__, held)
        else:
            switches = answer
            self._last_good = (now, answer)
        self._cache = (now, switches)

    def _switches(self) -> Mapping[str | None, KillEntry] | None:
        """The store's switches as of at most ``refresh`` seconds ago; None: the store is unavailable."""
        if self._stale():
            self._read()
        return self._cache[1]

    def _cached(self) -> Mapping[str | None, KillEntry] | None:
        return self._cache[1]

    def engaged(self, tool: str | None = None) -> bool:
        """Whether calls (of ``tool``) are stopped right now (or the store cannot say).

        On a running event loop, a stale cache of a store that does I/O answers
        True without reading it: the caller (a fast path) sends the call to the
        full chain, whose async door reads the store off the loop and decides.
        """
        if self._store is None:  # the common case: no store to refresh or read
            if not self._enabled or tool in self._disabled_tools:
                return True
            # _variable_engaged's first test, inlined: the variable is unset on almost every call.
            found: Mapping[Any, object] = self._env if self._env_data is None else self._env_data
            if found.get(self._env_key) is None:
                return False
            return self._variable_engaged()
        if self.blocks and self._stale() and _running_loop() is not None:
            return True
        return self._stops(tool, self._switches)

    async def aengaged(self, tool: str | None = None) -> bool:
        """`engaged` for a caller on an event loop that is not a call (an MCP listing).

        A stale cache is refreshed first, on a worker thread (the read every
        waiting call shares), so the answer is the store's, never "stopped"
        for want of a read.
        """
        if self._store is not None and self.blocks:
            await self._refreshed()
            return self._stops(tool, self._cached)
        return self.engaged(tool)

    async def _refreshed(self) -> None:
        """Refresh a stale cache off the loop (one read shared by every caller waiting for it)."""
        if self._stale():
            reading = self._reading
            if reading is None or reading.done():
                reading = self._reading = submit(self._read)
            await asyncio.wrap_future(reading)

    def _variable_engaged(self) -> bool:
        """Whether ``TOOLBOX_KILL_SWITCH`` engages the switch, read now (see ``__init__``)."""
        data = self._env_data
        if data is not None and data.get(self._env_key) is None:
            return False  # unset in os.environ: the read every call makes
        value = self._env.get(KILL_SWITCH_ENV)
        return bool(value) and value.strip().lower() not in _OFF_VALUES  # type: ignore[union-attr]

    def _stops(
        self, tool: str | None, switches_of: Callable[[], Mapping[str | None, KillEntry] | None]
    ) -> bool:
        if not self._enabled or self._variable_engaged():
            return True
        if tool is not None and tool in self._disabled_tools:
            return True
        if self._store is None:
            return False
        switches = switches_of()
        return switches is None or None in switches or (tool is not None and tool in switches)

    def entry(self, tool: str | None = None) -> KillEntry | None:
        """The store's switch stopping ``tool`` (the global one first), as last read."""
        switches = self._cache[1] if self._store is not None else None
        if not switches:
            return None
        return switches.get(None) or (switches.get(tool) if tool is not None else None)

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        return self._verdict(invocation, self._switches)

    async def acall(self, invocation: Invocation) -> ToolResult | None:
        """The async door: a stale cache is refreshed on a worker thread, the loop never waits on it."""
        await self._refreshed()
        return self._verdict(invocation, self._cached)

    def _verdict(
        self, invocation: Invocation, switches_of: Callable[[], Mapping[str | None, KillEntry] | None]
    ) -> ToolResult | None:
        if not self._stops(invocation.tool, switches_of):
            return None
        if self._store is not None and self._cache[1] is None and self._is_only_the_store(invocation.tool):
            return invocation.denied(
                "STATE_UNAVAILABLE", "state:kill_switch", "the governance state store is unavailable"
            )
        entry = self.entry(invocation.tool)
        if entry is not None and self._is_only_the_store(invocation.tool):
            scope = "global" if entry.tool is None else "tool"
            return invocation.denied(
                "KILL_SWITCH",
                f"kill_switch:{scope}",
                f"tool calls are stopped by the kill switch: {entry.reason}"[:500],
            )
        return invocation.denied("KILL_SWITCH", "kill_switch", "tool calls are stopped by the kill switch")

    def _is_only_the_store(self, tool: str) -> bool:
        """Whether the code and environment switches are off, so the store's answer is the reason."""
        return self._enabled and not self._variable_engaged() and tool not in self._disabled_tools


@final
class DelegationCheck:
    """Refuses what a delegated context's scope does not allow: DENIED/DELEGATION_SCOPE.

    Runs before access and validation, so an out-of-scope call learns nothing
    about the tool or its arguments.
    """

    name = "delegation"
    per_attempt = False
    __slots__ = ()

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        scope = invocation.context.scope
        if scope is None or scope.allows(invocation.tool, invocation.operation):
            return None
        return invocation.denied(
            "DELEGATION_SCOPE",
            "delegation:scope",
            f"{invocation.tool}.{invocation.operation} is outside this delegated run's scope",
        )


@final
class AccessCheck:
    """Registry, policy and acknowledgement, the same decisions as ``Tools.get``.

    The by-name door resolves the tool here; the typed door got its tool from
    ``get()`` already, and only the acknowledgement is re-checked.
    """

    name = "access"
    per_attempt = False
    __slots__ = ()

    @staticmethod
    def applies(invocation: Invocation) -> bool:
        """Typed calls of tools without an acknowledgement were fully checked by ``get()``."""
        descriptor = invocation.descriptor
        return invocation.door == BY_NAME or descriptor is None or descriptor.acknowledgement is not None

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        tools = invocation.tools
        if tools is None:  # pragma: no cover - both doors always attach the tools
            raise RuntimeError("invocation has no tools attached")
        version = invocation.version
        descriptor = invocation.descriptor
        if version is not None and descriptor and not _version_matches(descriptor.version, version):
            return invocation.denied(
                "TOOL_UNAVAILABLE",
                "registry:version",
                f"version {version!r} of {invocation.tool!r} is not registered "
                f"(registered: {descriptor.version})",
            )
        try:
            if invocation.door == BY_NAME:
                tool = tools.acquire(invocation.tool)
                invocation.granted(tools.runtime_of(invocation.tool), tool)
            else:
                tools.check_acknowledgement(invocation.tool, report=False)
        except ToolUnavailableError as exc:
            return invocation.denied(exc.reason_code, "registry", str(exc))
        except ToolDeniedError as exc:
            invocation.error = exc
            return invocation.denied(exc.reason_code, exc.rule, str(exc))
        return None


def _version_matches(registered: str, requested: str) -> bool:
    wanted = requested[1:] if requested[:1] in ("v", "V") else requested
    return registered == wanted or registered.split(".", maxsplit=1)[0] == wanted


@final
class DeadlineCheck:
    """Refuses calls (and retries) after the context's deadline: DENIED/DEADLINE_EXCEEDED."""

    name = "deadline"
    per_attempt = True
    __slots__ = ("_clock",)

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        deadline = invocation.context.deadline
        if deadline is not None and self._clock() >= deadline.timestamp():
            return invocation.denied(
                "DEADLINE_EXCEEDED", "context:deadline", "the context's deadline has passed"
            )
        return None


@final
class BudgetCheck:
    """Counts the call against the context's budget: DENIED/BUDGET_EXHAUSTED when spent."""

    name = "budget"
    per_attempt = False
    #: Counted after the audit request, so a call refused by any other check spends nothing.
    spends = True
    __slots__ = ()

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        budget = invocation.context.budget
        if budget is None:
            return None
        exhausted = budget.try_consume(invocation.tool)
        if exhausted is not None:
            return invocation.denied(
                "BUDGET_EXHAUSTED", exhausted, f"the run's tool-call budget is spent ({exhausted})"
            )
        return None
