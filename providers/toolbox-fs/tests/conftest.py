"""Fixtures for the fs tool tests: a root, an outside directory to keep intact, an os.open spy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbox import ToolPolicy, Tools
from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool, plugin

ACK = {FS_ACKNOWLEDGEMENT.env: FS_ACKNOWLEDGEMENT.value}
ALLOW_FS = ToolPolicy.standard().allow(FsTool)


class Outside:
    """A directory next to the root, with sentinel files that must never change."""

    def __init__(self, base: Path) -> None:
        self.path = base / "outside"
        self.path.mkdir()
        (self.path / "secret.txt").write_text("outside secret")
        (self.path / "file.txt").write_text("outside file")
        self.sentinel = base / "outside.txt"
        self.sentinel.write_text("sentinel")
        self._base = base
        self._before = self._snapshot()

    def _snapshot(self) -> dict[str, bytes | None]:
        state: dict[str, bytes | None] = {}
        for top in (self._base, self.path):
            for entry in top.iterdir():
                if entry.name == "root" and top == self._base:
                    continue
                state[str(entry)] = entry.read_bytes() if entry.is_file() and not entry.is_symlink() else None
        return state

    def assert_untouched(self) -> None:
        assert self._snapshot() == self._before


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The fs root."""
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path, root: Path) -> Outside:
    """Files beside the root that no fs operation may read, create or delete."""
    return Outside(tmp_path)


@pytest.fixture
def fs_tools(make_tools, toolbox_env: dict[str, str], root: Path) -> Tools:
    """Tools with the fs provider allowed, acknowledged and rooted at ``root``."""
    toolbox_env.update(ACK)
    return make_tools(plugin, policy=ALLOW_FS, options={"fs": {"roots": [str(root)]}})


@pytest.fixture
def fs(fs_tools: Tools) -> FsTool:
    """The allowed fs tool."""
    return fs_tools.get(FsTool)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names passed to os.open from now on."""
    names: list[str] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):
        names.append(os.fsdecode(path))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", spy)
    return names
