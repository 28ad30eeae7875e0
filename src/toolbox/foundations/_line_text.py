"""Text that must stay one line: every character that breaks or reorders a line, and its escape.

One decision for every place text reaches a terminal, a page or a one-line field:
control characters (C0, DEL, C1, so ``\\n``, ``\\r``, ``\\x1b`` and ``\\x85``), the Unicode
line and paragraph separators (U+2028, U+2029) and the bidirectional controls (U+061C,
U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which make a terminal or a browser show
text in another order than it is stored ("Trojan Source"). Fields that must be one line
(intent texts, tenants, principals, roles, names) refuse them (`breaks_line`); text
shown to an operator has them escaped (`one_line`: ``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import re

__all__ = ["LINE_BREAKING", "breaks_line", "one_line"]

#: Characters a one-line text never holds.
LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def breaks_line(text: str) -> bool:
    """Whether ``text`` holds a character that breaks or reorders a line."""
    return LINE_BREAKING.search(text) is not None


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: object) -> str:
    """``text`` as one line safe to print or render: each such character written as its escape."""
    shown = str(text)
    return LINE_BREAKING.sub(_escape, shown) if LINE_BREAKING.search(shown) else shown
