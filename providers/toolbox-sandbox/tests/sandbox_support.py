"""Helpers the sandbox tests share: the acknowledgement, tight limits, and the host's state."""

from __future__ import annotations

import os
from pathlib import Path

from toolbox import ToolPolicy
from toolbox_sandbox import SANDBOX_ACKNOWLEDGEMENT, SandboxTool
from toolbox_sandbox._identity import FIRST_ID, ID_COUNT

ACK = {SANDBOX_ACKNOWLEDGEMENT.env: SANDBOX_ACKNOWLEDGEMENT.value}
ALLOW_SANDBOX = ToolPolicy.standard().allow(SandboxTool)
#: Small limits, so hostile code ends quickly.
TIGHT = {"wall_seconds": 5.0, "cpu_seconds": 2, "processes": 16, "output_bytes": 65536}


def sandbox_processes() -> list[int]:
    """Host pids of processes running as a sandbox's fresh user (any run, any test)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
        except OSError:
            continue
        if FIRST_ID <= uid < FIRST_ID + ID_COUNT:
            found.append(int(entry))
    return found


class Host:
    """What the host looks like before a test: sentinel files, temporary directories, processes."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "host"
        self.dir.mkdir()
        self.sentinel = self.dir / "sentinel.txt"
        self.sentinel.write_text("host data", encoding="utf-8")
        self._before = self._snapshot()

    def _snapshot(self) -> tuple[object, ...]:
        files = sorted((p.name, p.read_bytes()) for p in self.dir.iterdir())
        temporary = sorted(n for n in os.listdir("/tmp") if n.startswith("toolbox-sandbox-"))
        return files, temporary

    def assert_unchanged(self) -> None:
        """The sentinel directory and /tmp are as they were, and no sandbox process is left."""
        assert self._snapshot() == self._before
        assert sandbox_processes() == []
