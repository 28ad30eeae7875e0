"""`Budget`: how many tool calls one run may make, in total and per tool.

A delegated run gets a budget carved out of its parent's (`Budget.carve`): its
limits fit in what the parent has left, and every call it makes is counted in
it and in each ancestor, atomically, under one lock shared by the whole tree.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import final

from toolbox.errors import DelegationError

__all__ = ["Budget"]


@final
class Budget:
    """Call limits for one run. Thread-safe; shared by everything using one context.

    A call is counted when it is dispatched (after every check passed); its
    retries are part of the same call.
    """

    __slots__ = ("_by_tool", "_calls", "_lock", "_parent", "max_calls", "per_tool")

    def __init__(self, *, max_calls: int | None = None, per_tool: Mapping[str, int] | None = None) -> None:
        """Args:
        max_calls: calls allowed in total, or None for no total limit.
        per_tool: calls allowed per tool name.

        Raises:
            ValueError: a limit is negative or not an integer.
        """
        for label, value in [("max_calls", max_calls), *(per_tool or {}).items()]:
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"budget limit {label!r} must be a non-negative integer, got {value!r}")
        self.max_calls = max_calls
        self.per_tool: Mapping[str, int] = dict(per_tool or {})
        self._calls = 0
        self._by_tool: dict[str, int] = {}
        self._lock = threading.Lock()
        self._parent: Budget | None = None

    def _exhausted(self, tool: str) -> str | None:
        if self.max_calls is not None and self._calls >= self.max_calls:
            return "budget:run"
        limit = self.per_tool.get(tool)
        if limit is not None and self._by_tool.get(tool, 0) >= limit:
            return f"budget:tool:{tool}"
        return None

    def _count(self, tool: str) -> None:
        self._calls += 1
        self._by_tool[tool] = self._by_tool.get(tool, 0) + 1

    def try_consume(self, tool: str) -> str | None:
        """Count one call of ``tool`` here and in every ancestor; or return the exhausted rule, count nothing.

        A rule exhausted in an ancestor is prefixed ``parent:`` once per level (``parent:budget:run``).
        """
        with self._lock:
            if self._parent is None:
                exhausted = self._exhausted(tool)
                if exhausted is None:
                    self._count(tool)
                return exhausted
            chain: list[Budget] = []
            budget: Budget | None = self
            while budget is not None:
                exhausted = budget._exhausted(tool)
                if exhausted is not None:
                    return "parent:" * len(chain) + exhausted
                chain.append(budget)
                budget = budget._parent
            for budget in chain:
                budget._count(tool)
            return None

    def remaining(self, tool: str | None = None) -> int | None:
        """Calls still allowed (of ``tool``, if given), counting every ancestor; None for no limit."""
        with self._lock:
            totals = self._left(None)
            return totals if tool is None else _least(totals, self._left(tool))

    def _left(self, tool: str | None) -> int | None:
        """The least left over every level: of the totals (``tool`` None), or of ``tool``'s limits."""
        left: int | None = None
        budget: Budget | None = self
        while budget is not None:
            if tool is None:
                limit, used = budget.max_calls, budget._calls
            else:
                limit, used = budget.per_tool.get(tool), budget._by_tool.get(tool, 0)
            if limit is not None:
                left = _least(left, limit - used)
            budget = budget._parent
        return left

    def carve(self, *, max_calls: int | None = None, per_tool: Mapping[str, int] | None = None) -> Budget:
        """A child budget for a delegated run: its calls also count here.

        Args:
            max_calls: the child's total, at most what this budget has left (None: what is left).
            per_tool: the child's per-tool limits, each at most what is left for that tool.

        Raises:
            DelegationError: a limit is larger than what is left here.
            ValueError: a limit is negative or not an integer.
        """
        child = Budget(max_calls=max_calls, per_tool=per_tool)
        with self._lock:
            left = self._left(None)
            tools_left = {tool: self._left(tool) for tool in child.per_tool}
        if max_calls is not None and left is not None and max_calls > left:
            raise DelegationError(
                f"a delegated budget of {max_calls} calls exceeds the {left} left in the parent"
            )
        for tool, limit in child.per_tool.items():
            tool_left = tools_left[tool]
            if tool_left is not None and limit > tool_left:
                raise DelegationError(
                    f"a delegated budget of {limit} calls of {tool!r} exceeds "
                    f"the {tool_left} left in the parent"
                )
        # One lock for the whole tree: a call is checked and counted at every level at once.
        child._lock = self._lock
        child._parent = self
        return child

    @property
    def calls(self) -> int:
        """Calls counted so far."""
        return self._calls

    def calls_of(self, tool: str) -> int:
        """Calls of ``tool`` counted so far."""
        return self._by_tool.get(tool, 0)

    def __repr__(self) -> str:
        return f"Budget(calls={self._calls}/{self.max_calls}, per_tool={dict(self.per_tool)})"


def _least(a: int | None, b: int | None) -> int | None:
    """The smaller limit; None means no limit."""
    return b if a is None else a if b is None else min(a, b)
