"""examples/mcp_remote.py runs offline and shows what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp_remote.py"


def test_the_example_pins_calls_and_refuses_drift():
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "mcp.notes.search: pinned (remote 'search', sha256:" in out
    assert "search: SUCCESS -> lease renewal" in out
    assert "search(42): INVALID_ARGUMENTS [type]" in out
    assert "add_note: DENIED [MCP_LOCK_DRIFT]" in out
    assert "wipe: INVALID_ARGUMENTS [unknown_operation]" in out
    assert "search: SUCCESS -> boiler service" in out
    assert "add_note: changed since it was pinned" in out
    assert "wipe: new on the server, not pinned" in out
    assert "add_note: SUCCESS -> added" in out
