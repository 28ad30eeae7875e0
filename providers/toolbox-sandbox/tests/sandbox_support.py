"""Helpers the sandbox tests share: the acknowledgement, tight limits, and the host's state."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from toolbox import ToolPolicy
from toolbox_sandbox import SANDBOX_ACKNOWLEDGEMENT, SandboxTool, _run
from toolbox_sandbox._identity import run_identity

ACK = {SANDBOX_ACKNOWLEDGEMENT.env: SANDBOX_ACKNOWLEDGEMENT.value}
ALLOW_SANDBOX = ToolPolicy.standard().allow(SandboxTool)
#: Small limits, so hostile code ends quickly.
TIGHT = {"wall_seconds": 5.0, "cpu_seconds": 2, "processes": 16, "output_bytes": 65536}


def processes_of(uids: set[int]) -> list[int]:
    """Host pids of processes running as one of ``uids``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
        except OSError:
            continue
        if uid in uids:
            found.append(int(entry))
    return found


class Host:
    """What the host looks like around a test: sentinel files, and what the test's runs left.

    The runs' fresh users and the temporary directories made during the test are recorded
    (other tests may run sandboxes at the same time, in other workers): after the test no
    process runs as one of those users and none of those directories is left.
    """

    def __init__(self, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dir = base / "host"
        self.dir.mkdir()
        self.sentinel = self.dir / "sentinel.txt"
        self.sentinel.write_text("host data", encoding="utf-8")
        self._before = self._files()
        self.uids: set[int] = set()
        self.directories: list[str] = []

        def identity() -> tuple[int, int] | None:
            chosen = run_identity()
            if chosen is not None:
                self.uids.add(chosen[0])
            return chosen

        real_mkdtemp = tempfile.mkdtemp

        def mkdtemp(*args: Any, **kwargs: Any) -> str:
            made = real_mkdtemp(*args, **kwargs)
            self.directories.append(made)
            return made

        monkeypatch.setattr(_run, "run_identity", identity)
        monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)

    def _files(self) -> list[tuple[str, bytes]]:
        return sorted((p.name, p.read_bytes()) for p in self.dir.iterdir())

    def assert_unchanged(self) -> None:
        """The sentinel directory is as it was; nothing of the test's runs is left."""
        assert self._files() == self._before
        assert processes_of(self.uids) == []
        assert [d for d in self.directories if "toolbox-sandbox-" in d and os.path.exists(d)] == []
