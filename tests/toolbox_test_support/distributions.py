"""Fake installed distributions: a dist-info folder with entry points, on sys.path.

Discovery reads real ``importlib.metadata`` entry points, so tests make real
(if tiny) distributions in a temporary folder instead of mocking metadata.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def write_distribution(
    root: Path,
    name: str,
    modules: Mapping[str, str],
    entry_points: Mapping[str, str],
    *,
    version: str = "1.0",
    group: str = "toolbox.providers",
) -> Path:
    """Write distribution ``name`` into ``root``: its modules and a dist-info folder.

    ``modules`` maps module names to source; ``entry_points`` maps entry point
    names to ``module`` or ``module:attr`` in ``group``.
    """
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    dist_info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = [f"[{group}]"] + [f"{ep} = {target}" for ep, target in entry_points.items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dist_info


@contextmanager
def on_sys_path(root: Path) -> Iterator[Path]:
    """Put ``root`` first on ``sys.path`` and forget modules imported from it afterwards."""
    before = set(sys.modules)
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if module is not None and str(getattr(module, "__file__", "") or "").startswith(str(root)):
                del sys.modules[name]
