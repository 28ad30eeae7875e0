"""Every Python example in README.md and docs/ type-checks under ``mypy --strict``.

A file's blocks share one namespace when they run (tests/test_docs.py), so
they are checked as one module per file, all files in one mypy run. Examples
may leave functions unannotated (pytest-style tests), so
``--allow-untyped-defs`` and ``--allow-untyped-calls`` are on; their bodies are
still checked (``--strict`` includes ``--check-untyped-defs``).
"""

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from test_docs import DOCS, ROOT, blocks

FLAGS = ["--strict", "--allow-untyped-defs", "--allow-untyped-calls", "--python-version", "3.10"]


def _module_name(path: Path) -> str:
    return "docs_" + re.sub(r"\W", "_", str(path.relative_to(ROOT)))


def test_examples_type_check(tmp_path):
    """mypy --strict finds nothing wrong in the examples people copy."""
    written = []
    for path in DOCS:
        code = blocks(path, "python")
        if code:
            module = tmp_path / f"{_module_name(path)}.py"
            module.write_text("\n".join(code), encoding="utf-8")
            written.append(module)
    assert written, "no Python examples found"
    # A cache outside the checkout keeps repeated runs fast; one per checkout, so they never mix.
    digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"toolbox-docs-mypy-{digest}"
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *FLAGS, "--cache-dir", str(cache), *(m.name for m in written)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
