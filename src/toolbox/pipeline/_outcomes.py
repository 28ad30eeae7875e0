"""Business-outcome mapping: a registered mapper may turn a payload into BUSINESS_FAILED.

Only registered mappers decide. Payloads without a mapper are never searched
for words like "error" or "declined".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from toolbox.errors import ConfigurationError

__all__ = ["BusinessFailure", "OutcomeMapper", "OutcomeMappers"]


@final
@dataclass(frozen=True)
class BusinessFailure:
    """A mapper's verdict that the call ran but its business outcome failed."""

    error_code: str
    message: str = ""


OutcomeMapper = Callable[[Any], "BusinessFailure | None"]


@final
class OutcomeMappers:
    """Mappers keyed by ``tool.operation`` or by ``tool`` (the more specific wins)."""

    __slots__ = ("_mappers",)

    def __init__(self, mappers: Mapping[str, OutcomeMapper] | None = None) -> None:
        checked: dict[str, OutcomeMapper] = {}
        for key, mapper in (mappers or {}).items():
            if not isinstance(key, str) or not key or not callable(mapper):
                raise ConfigurationError(
                    f"outcome mapper {key!r} must map a tool or tool.operation to a callable"
                )
            checked[key] = mapper
        self._mappers = checked

    def __bool__(self) -> bool:
        return bool(self._mappers)

    def find(self, tool: str, operation: str) -> OutcomeMapper | None:
        """The mapper for ``tool.operation``, else for ``tool``, else None."""
        return self._mappers.get(f"{tool}.{operation}") or self._mappers.get(tool)
