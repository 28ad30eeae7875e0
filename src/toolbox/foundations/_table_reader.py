"""`TableReader`: typed reads from a parsed TOML table, for the policy file and its sections.

A TOML file can hold any value at any key. Every read here says what it
expects (a table, a string, a list of strings, a bool, an integer, ...) and
raises `PolicyFileError` naming the file and the dotted key path
(``guardrails.rules[0].action``) otherwise, never another exception type.
Values are described by their TOML type, never echoed (a file may hold a
secret in the wrong place).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from datetime import date, datetime, time
from typing import Any, final

from toolbox.errors import PolicyFileError

__all__ = ["TableReader", "toml_type"]

_MISSING: Any = object()


def toml_type(value: object) -> str:
    """The TOML name of ``value``'s type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, (datetime, date, time)):
        return "a date or time"
    return f"a {type(value).__name__}"


@final
class TableReader:
    """One table of a parsed policy file, at ``path``, with typed accessors."""

    __slots__ = ("_data", "path", "source")

    def __init__(self, data: object, *, source: str, path: str = "") -> None:
        """Raises `PolicyFileError` unless ``data`` is a table."""
        self.source = source
        self.path = path
        if not isinstance(data, Mapping):
            raise self.error("", f"must be a table, got {toml_type(data)}")
        self._data: Mapping[str, Any] = data

    # -- paths and errors -----------------------------------------------------------

    def where(self, key: str | int = "") -> str:
        """The dotted path of ``key`` in this table (``[n]`` for an array index)."""
        if key == "":
            return self.path or "(top level)"
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str | int, message: str) -> PolicyFileError:
        """A `PolicyFileError` about ``key``: ``SOURCE: PATH: message`` (no PATH for the file itself)."""
        if key == "" and not self.path:
            return PolicyFileError(f"{self.source}: {message}")
        return PolicyFileError(f"{self.source}: {self.where(key)}: {message}")

    # -- structure ------------------------------------------------------------------

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def raw(self) -> Mapping[str, Any]:
        """The table as parsed."""
        return self._data

    def only(self, allowed: Collection[str]) -> None:
        """Raise unless every key is one of ``allowed``."""
        unknown = sorted(str(k) for k in self._data if k not in allowed)
        if unknown:
            raise self.error(
                "", f"unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(allowed))}"
            )

    def table(self, key: str, *, required: bool = False) -> TableReader:
        """The table at ``key`` (an empty one when absent and not ``required``)."""
        value = self._get(key, _MISSING if required else {})
        if not isinstance(value, Mapping):
            raise self.error(key, f"must be a table, got {toml_type(value)}")
        return TableReader(value, source=self.source, path=self.where(key))

    def tables(self, key: str) -> list[TableReader]:
        """The array of tables at ``key`` (``[[key]]``); empty when absent."""
        value = self._get(key, [])
        if not isinstance(value, (list, tuple)):  # a tuple: the same table built in code
            raise self.error(key, f"must be an array of tables, got {toml_type(value)}")
        where = self.where(key)
        return [TableReader(item, source=self.source, path=f"{where}[{i}]") for i, item in enumerate(value)]

    # -- scalars --------------------------------------------------------------------

    def string(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        choices: Collection[str] | None = None,
        pattern: str | None = None,
        what: str = "value",
    ) -> str:
        """The string at ``key``, one of ``choices`` / matching ``pattern`` when given.

        ``what`` names the value in the message; a value refused by ``pattern`` is
        not repeated in it (it may be a secret or a hash).
        """
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {toml_type(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"unknown {what} {value!r}; use one of {', '.join(choices)}")
        if pattern is not None and not re.fullmatch(pattern, value):
            raise self.error(key, f"not a valid {what} ({pattern})")
        return value

    def optional_string(self, key: str) -> str | None:
        """The string at ``key``, or None when absent."""
        return self.string(key) if key in self._data else None

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        """The boolean at ``key``."""
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {toml_type(value)}")
        return value

    def integer(self, key: str, default: Any = _MISSING, *, minimum: int | None = None) -> int:
        """The integer at ``key`` (a boolean is not one), at least ``minimum`` when given."""
        value = self._get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"must be an integer, got {toml_type(value)}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def number(self, key: str) -> int | float:
        """The finite integer or float at ``key``."""
        value = self._get(key, _MISSING)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:  # noqa: PLR0124 - NaN
            raise self.error(key, f"must be a number, got {toml_type(value)}")
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            raise self.error(key, "must be a finite number")
        return value

    def strings(
        self,
        key: str,
        default: Any = (),
        *,
        pattern: str | None = None,
        choices: Collection[str] | None = None,
        max_length: int | None = None,
        what: str = "name",
    ) -> list[str]:
        """The array of non-empty strings at ``key``, each matching ``pattern`` / in ``choices``."""
        value = self._get(key, list(default))
        if not isinstance(value, (list, tuple)):
            raise self.error(key, f"must be an array of strings, got {toml_type(value)}")
        where = self.where(key)
        compiled = re.compile(pattern) if pattern is not None else None
        for index, item in enumerate(value):
            at = f"{self.source}: {where}[{index}]"
            if not isinstance(item, str):
                raise PolicyFileError(f"{at}: must be a non-empty string, got {toml_type(item)}")
            if not item:
                raise PolicyFileError(f"{at}: must not be empty")
            if choices is not None and item not in choices:
                raise PolicyFileError(
                    f"{at}: unknown {what} {item!r}; use one of {', '.join(sorted(choices))}"
                )
            if max_length is not None and len(item) > max_length:
                raise PolicyFileError(f"{at}: a {what} has at most {max_length} characters")
            if compiled is not None and not compiled.fullmatch(item):
                raise PolicyFileError(f"{at}: {item!r} is not a valid {what} ({pattern})")
        return list(value)

    def value(self, key: str, default: Any = _MISSING) -> Any:
        """The value at ``key`` of any type (the caller checks it)."""
        return self._get(key, default)

    def _get(self, key: str, default: Any) -> Any:
        value = self._data.get(key, default)
        if value is _MISSING:
            raise self.error(key, "missing")
        return value
