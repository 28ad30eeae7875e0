"""The conformance matrix: every cell of `conformance.table` that can apply, run.

The default tier runs every promise on every door and tool style on the memory
store, and every promise on every store through the by-name door (``@tool``
and class-based tools), but the cells the table's `FULL_ONLY` names;
``pytest --full`` runs the whole product.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from conformance.table import DOORS, EXCLUDED, FULL_ONLY, PROMISES, STORES, STYLES, full_only, why_not
from conformance.world import World, world

#: The store x door product the default tier runs on every store (the rest run with --full).
_EVERY_STORE = {("by_name", "function"), ("by_name", "class_based")}
#: Doors whose cells run only with --full: a live server and a new HTTP session per call.
_FULL_ONLY = {"mcp_http"}


def _cells() -> Iterator[object]:
    for style in STYLES:
        for store in STORES:
            for door in DOORS:
                for promise in PROMISES:
                    if why_not(promise, door, style, store) is not None:
                        continue
                    default = door not in _FULL_ONLY and (store == "memory" or (door, style) in _EVERY_STORE)
                    default = default and not full_only(promise, door, style, store)
                    marks = () if default else (pytest.mark.full,)
                    yield pytest.param(
                        promise, door, style, store, marks=marks, id=f"{promise}-{door}-{style}-{store}"
                    )


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, str], World]]:
    """Worlds built on first use, one per style and store, kept for the module."""
    built: dict[tuple[str, str], World] = {}
    with ExitStack() as stack:

        def get(style: str, store: str) -> World:
            key = (style, store)
            if key not in built:
                directory: Path = tmp_path_factory.mktemp(f"{style}-{store}")
                built[key] = stack.enter_context(world(STYLES[style](directory), store, directory))
            return built[key]

        yield get


@pytest.mark.parametrize(("promise", "door", "style", "store"), list(_cells()))
def test_cell(promise: str, door: str, style: str, store: str, worlds: Callable[[str, str], World]) -> None:
    PROMISES[promise](worlds(style, store), DOORS[door]())


def test_every_cell_that_does_not_run_says_why() -> None:
    """Exclusions name real rows and columns, each with a reason; all other cells are generated."""
    for cells in (*EXCLUDED, *FULL_ONLY):
        assert cells.promise in ("*", *PROMISES) and cells.door in ("*", *DOORS)
        assert cells.style in ("*", *STYLES) and cells.store in ("*", *STORES)
        assert len(cells.why) > 40, cells
    cells = [(p, d, s, st) for p in PROMISES for d in DOORS for s in STYLES for st in STORES]
    excluded = [cell for cell in cells if why_not(*cell) is not None]
    assert len(list(_cells())) == len(cells) - len(excluded)
    assert len(excluded) < len(cells) // 4  # the matrix stays a matrix, not a list of exceptions
