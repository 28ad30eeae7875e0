"""Wire names: the spelling of a by-name name that every model API accepts.

toolbox names an operation ``tool.operation`` (``calculator.evaluate``);
OpenAI and Anthropic accept function names matching ``^[a-zA-Z0-9_-]{1,64}$``
only. The wire name writes each ``.`` as ``__``: ``calculator__evaluate``.

The mapping is reversible because of the descriptor's name rules: a tool or
operation name never holds ``__``, and no part between dots starts or ends
with ``_``. Every ``__`` in a wire name is therefore a dot, and two different
names never share a wire name. The descriptor also keeps every
``tool.operation`` within 64 wire characters.

`toolbox.Gateway` emits wire names in ``definitions()`` and accepts both
spellings; traces, results and audit events keep the dotted name.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_WIRE_NAME",
    "WIRE_NAME_PATTERN",
    "dotted_name",
    "from_wire_name",
    "is_wire_name",
    "to_wire_name",
]

WIRE_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
MAX_WIRE_NAME = 64
_DOT = "."
_WIRE_DOT = "__"
# fullmatch, not match: "$" also matches before a trailing newline.
_WIRE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def to_wire_name(name: str) -> str:
    """The wire spelling of the dotted by-name ``name``: each ``.`` becomes ``__``.

    ``name`` is a registered tool name or ``tool.operation`` (no ``:version``
    suffix: wire names carry none). The result may exceed 64 characters only
    for names no descriptor accepts.
    """
    return name.replace(_DOT, _WIRE_DOT)


def is_wire_name(name: object) -> bool:
    """Whether ``name`` is a str matching `WIRE_NAME_PATTERN`."""
    return type(name) is str and _WIRE_NAME.fullmatch(name) is not None


def from_wire_name(name: str) -> str:
    """The dotted name the wire name ``name`` stands for: each ``__`` becomes ``.``.

    Raises:
        ValueError: ``name`` does not match `WIRE_NAME_PATTERN`.
    """
    if not is_wire_name(name):
        raise ValueError("a wire name is 1-64 characters: ASCII letters, digits, '_' or '-'")
    return name.replace(_WIRE_DOT, _DOT)


def dotted_name(name: str) -> str:
    """``name`` in its dotted spelling, given either spelling.

    A wire name is decoded; anything else (a dotted name, a ``:version``
    suffix, a malformed name) is returned unchanged for the registry to judge.
    """
    if _WIRE_DOT in name and is_wire_name(name):
        return name.replace(_WIRE_DOT, _DOT)
    return name
