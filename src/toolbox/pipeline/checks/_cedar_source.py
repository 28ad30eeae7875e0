"""Cedar source text: statements, positions and nesting, found without Cedar's parser.

cedarpy reports no line or column for a parse error, and its parser recurses
without a limit: policies nested a few hundred levels deep crash the process
instead of raising. So toolbox scans the text itself first (skipping strings
and ``//`` comments): it splits it into statements, to parse and locate them
one by one, and refuses nesting deeper than `MAX_NESTING` before Cedar sees it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from toolbox.errors import PolicyFileError

__all__ = ["MAX_NESTING", "Statement", "check_nesting", "line_of", "statements"]

#: Deepest bracket nesting, and most ``if`` expressions in one statement, accepted.
MAX_NESTING = 64
_OPEN, _CLOSE = "([{", ")]}"
_POLICY_ID = re.compile(r"policy(\d+)")
_WORD = re.compile(r"[A-Za-z0-9_]")


class Statement(NamedTuple):
    """One statement (a policy, with its annotations) and where it starts (1-based)."""

    line: int
    column: int
    text: str


def _code(text: str) -> Iterator[int]:
    """Offsets of the characters outside string literals and ``//`` comments."""
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char == "/" and text.startswith("//", index):
            end = text.find("\n", index)
            index = length if end < 0 else end
            continue
        if char == '"':
            index += 1
            while index < length and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
            index += 1
            continue
        yield index
        index += 1


def position(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of ``offset``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def statements(text: str) -> list[Statement]:
    """The statements of policy text, each ending at a ``;`` outside strings and comments."""
    found: list[Statement] = []
    start: int | None = None
    for index in _code(text):
        char = text[index]
        if start is None and not char.isspace():
            start = index
        if char == ";" and start is not None:
            found.append(Statement(*position(text, start), text[start : index + 1]))
            start = None
    if start is not None:
        found.append(Statement(*position(text, start), text[start:]))
    return found


def check_nesting(text: str, source: str) -> None:
    """Refuse brackets nested deeper than `MAX_NESTING`, or more ``if`` in one statement.

    Raises:
        PolicyFileError: naming ``source`` and the line and column where the limit was passed.
    """
    depth = conditions = 0
    for index in _code(text):
        char = text[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(0, depth - 1)
        elif char == ";":
            conditions = 0
        elif char == "i" and _is_if(text, index):
            conditions += 1
        if depth > MAX_NESTING or conditions > MAX_NESTING:
            line, column = position(text, index)
            raise PolicyFileError(
                f"{source}:{line}:{column}: nested deeper than {MAX_NESTING} levels; "
                "Cedar's parser cannot take it safely"
            )


def _is_if(text: str, index: int) -> bool:
    if not text.startswith("if", index):
        return False
    before = text[index - 1] if index else " "
    after = text[index + 2] if index + 2 < len(text) else " "
    return not _WORD.match(before) and not _WORD.match(after)


def order(policy_id: str) -> int:
    """N of Cedar's positional id ``policy<N>``; -1 for any other id."""
    match = _POLICY_ID.fullmatch(policy_id)
    return int(match.group(1)) if match else -1


def line_of(policy_id: str, found: list[Statement]) -> str:
    """The line where positional policy ``policy_id`` starts, or ``?``."""
    index = order(policy_id)
    return str(found[index].line) if 0 <= index < len(found) else "?"
