"""Write the Python examples of every docs page as one module per page, for mypy.

A page's blocks share one namespace when tests/test_docs.py runs them, so each page becomes one
module of a package ``docs_examples`` (a page that continues another starts with that page's
blocks, as the test runs them). scripts/test type-checks the package in its mypy step with the
same options and persistent cache as the code (pyproject.toml's override for
``docs_examples.*`` allows untyped ``def``s: examples may be pytest-style tests), so the
libraries and toolbox itself are read from the cache and an unchanged page costs nothing.
Usage: ``python scripts/docs_examples.py DIRECTORY`` prints the package directory it wrote.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_docs import DOCS, blocks, python_program  # noqa: E402  (the docs tests own the list of pages)


def module_name(page: Path) -> str:
    """``docs/audit.md`` -> ``docs_docs_audit_md``: one importable module name per page."""
    return "docs_" + re.sub(r"\W", "_", str(page.relative_to(ROOT)))


def write_modules(directory: Path) -> list[Path]:
    """Write one module per page with Python examples into ``directory/docs_examples``."""
    directory = directory / "docs_examples"
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("docs_*.py"):
        stale.unlink()
    (directory / "__init__.py").write_text("", encoding="utf-8")
    written = []
    for page in DOCS:
        if blocks(page, "python"):
            code = [block for _, block in python_program(page)]
            module = directory / f"{module_name(page)}.py"
            module.write_text("\n".join(code), encoding="utf-8")
            written.append(module)
    return written


if __name__ == "__main__":
    if write_modules(Path(sys.argv[1])):
        print(Path(sys.argv[1]) / "docs_examples")
