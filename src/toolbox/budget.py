"""`Budget`: how many tool calls one run may make, in total and per tool."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import final

__all__ = ["Budget"]


@final
class Budget:
    """Call limits for one run. Thread-safe; shared by everything using one context.

    A call is counted when it is dispatched (after every check passed); its
    retries are part of the same call.
    """

    __slots__ = ("_by_tool", "_calls", "_lock", "max_calls", "per_tool")

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

    def try_consume(self, tool: str) -> str | None:
        """Count one call of ``tool``; return None, or the exhausted rule and count nothing."""
        with self._lock:
            if self.max_calls is not None and self._calls >= self.max_calls:
                return "budget:run"
            limit = self.per_tool.get(tool)
            used = self._by_tool.get(tool, 0)
            if limit is not None and used >= limit:
                return f"budget:tool:{tool}"
            self._calls += 1
            self._by_tool[tool] = used + 1
            return None

    @property
    def calls(self) -> int:
        """Calls counted so far."""
        return self._calls

    def calls_of(self, tool: str) -> int:
        """Calls of ``tool`` counted so far."""
        return self._by_tool.get(tool, 0)

    def __repr__(self) -> str:
        return f"Budget(calls={self._calls}/{self.max_calls}, per_tool={dict(self.per_tool)})"
