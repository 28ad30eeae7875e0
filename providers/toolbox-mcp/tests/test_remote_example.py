"""examples/mcp_remote.py runs offline and shows what it promises.

It runs in this process, as ``python examples/mcp_remote.py`` runs it (``__main__``): an
interpreter of its own would prove nothing more. What it starts are real processes: its MCP
server (``python notes_server.py``, from ``sys.executable``), six times, each a child of the
zygote that imported the MCP SDK once (``sys.executable`` points at
`zygote.python_executable`; tests/zygote.py says what stays real), on the pipes toolbox-mcp
made.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

import zygote

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp_remote.py"


def test_the_example_pins_calls_and_refuses_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    python = zygote.python_executable(tmp_path, *zygote.MCP_SERVER_PRELOAD)
    monkeypatch.setattr(sys, "executable", str(python))
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "mcp.notes.search: pinned (remote 'search', sha256:" in out
    assert "search: SUCCESS -> lease renewal" in out
    assert "search(42): INVALID_ARGUMENTS [type]" in out
    assert "add_note: DENIED [MCP_LOCK_DRIFT]" in out
    assert "wipe: INVALID_ARGUMENTS [unknown_operation]" in out
    assert "search: SUCCESS -> boiler service" in out
    assert "add_note: changed since it was pinned" in out
    assert "wipe: new on the server, not pinned" in out
    assert "add_note: SUCCESS -> added" in out
