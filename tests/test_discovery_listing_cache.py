"""Discovery keeps the entry point listing while nothing on sys.path changes (registry._entry_points).

Each test counts the calls of ``importlib_metadata.entry_points`` (the scan of
every installed distribution) and changes what users change: a distribution
installed into or removed from a folder already on ``sys.path``, a new
``sys.path`` entry, the working directory behind a relative entry.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import importlib_metadata
import pytest

from toolbox import ToolPolicy, Tools
from toolbox.registry import _entry_points
from toolbox.testing import test_context
from toolbox_test_support.distributions import on_sys_path, write_distribution

PROVIDER = """
    from toolbox import hookimpl
    from toolbox.testing import fake_provider
    @hookimpl
    def toolbox_providers():
        return [fake_provider("{name}")]
"""
#: A modification time long past (2020): the folder is settled, its listing may be kept.
LONG_AGO_NS = 1_600_000_000 * 10**9


def provider(name: str) -> str:
    return PROVIDER.replace("{name}", name)


def settle(folder: Path, seconds: int = 0) -> None:
    """Make ``folder`` look last modified long ago (``seconds`` later than the other folders)."""
    at = LONG_AGO_NS + seconds * 10**9
    os.utime(folder, ns=(at, at))


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The groups ``importlib_metadata.entry_points`` was asked for, from a cold listing on."""
    calls: list[str] = []
    real: Callable[..., Any] = importlib_metadata.entry_points

    def counted(**params: Any) -> Any:
        calls.append(params.get("group", ""))
        return real(**params)

    monkeypatch.setattr(importlib_metadata, "entry_points", counted)
    # The test's own folders are settled with os.utime; this only spares a sys.path folder
    # that something else modified seconds ago from making the counts flaky.
    monkeypatch.setattr(_entry_points, "_SETTLING_NS", 0)
    # Importing a provider would write its __pycache__ folder into the settled one: a change too.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _entry_points.clear()
    yield calls
    _entry_points.clear()


def names() -> set[str]:
    tools = Tools.load(test_context(), env={}, policy=ToolPolicy.standard())
    return {d.name for d in tools.descriptors()}


def test_a_second_discovery_with_nothing_changed_does_not_scan_again(
    scans: list[str], tmp_path: Path
) -> None:
    write_distribution(tmp_path, "keep-tools", {"keep_plugin": provider("keep")}, {"keep": "keep_plugin"})
    settle(tmp_path)
    with on_sys_path(tmp_path):
        first = names()
        assert names() == first
    assert "keep" in first and "calculator" in first
    assert scans == ["toolbox.providers"]


def test_loading_and_blocking_are_still_decided_per_discovery(scans: list[str], tmp_path: Path) -> None:
    """The kept listing is only the listing: a blocked distribution is not loaded, then is."""
    write_distribution(tmp_path, "block-tools", {"block_plugin": provider("block")}, {"b": "block_plugin"})
    settle(tmp_path)
    context = test_context()
    with on_sys_path(tmp_path):
        policy = ToolPolicy.standard().block_distribution("block-tools")
        blocked = Tools.load(context, env={}, policy=policy)
        assert not blocked.has("block") and blocked.blocked_distributions == ("block-tools",)
        assert "block_plugin" not in sys.modules
        assert Tools.load(context, env={}, policy=ToolPolicy.standard()).has("block")
    assert len(scans) == 1


def test_a_distribution_installed_into_a_folder_on_sys_path_is_seen(scans: list[str], tmp_path: Path) -> None:
    settle(tmp_path)
    with on_sys_path(tmp_path):
        assert "late" not in names()
        write_distribution(tmp_path, "late-tools", {"late_plugin": provider("late")}, {"late": "late_plugin"})
        assert "late" in names()
        # Settled again (at another time: importlib_metadata itself keys its folder listings on it):
        # one more scan, then kept.
        settle(tmp_path, seconds=1)
        assert "late" in names()
        assert "late" in names()
    assert len(scans) == 3


def test_a_removed_distribution_is_seen(scans: list[str], tmp_path: Path) -> None:
    dist_info = write_distribution(
        tmp_path, "gone-tools", {"gone_plugin": provider("gone")}, {"g": "gone_plugin"}
    )
    settle(tmp_path)
    with on_sys_path(tmp_path):
        assert "gone" in names()
        shutil.rmtree(dist_info)
        assert "gone" not in names()
    assert len(scans) == 2


def test_a_new_sys_path_entry_is_seen(
    scans: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(root, "path-tools", {"path_plugin": provider("path")}, {"p": "path_plugin"})
    settle(root)
    assert "path" not in names()
    with on_sys_path(root):
        assert "path" in names()
    assert "path" not in names()
    assert len(scans) == 3


def test_a_relative_entry_follows_the_working_directory(
    scans: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``""`` on sys.path is the working directory: changing it changes what is installed there."""
    here, there = tmp_path / "here", tmp_path / "there"
    for folder, name in ((here, "here"), (there, "there")):
        folder.mkdir()
        write_distribution(
            folder, f"{name}-tools", {f"{name}_plugin": provider(name)}, {name: f"{name}_plugin"}
        )
        settle(folder)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    before = set(sys.modules)
    try:
        monkeypatch.chdir(here)
        assert "here" in names() and "there" not in names()
        monkeypatch.chdir(there)
        assert "there" in names() and "here" not in names()
    finally:
        for module in set(sys.modules) - before:
            if module in ("here_plugin", "there_plugin"):
                del sys.modules[module]
    assert len(scans) == 2


def test_a_folder_modified_just_now_is_listed_again(
    scans: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timestamp can stay put across two quick changes: a folder that just changed is not trusted yet."""
    monkeypatch.setattr(_entry_points, "_SETTLING_NS", 3_000_000_000)
    write_distribution(tmp_path, "fresh-tools", {"fresh_plugin": provider("fresh")}, {"f": "fresh_plugin"})
    with on_sys_path(tmp_path):
        assert "fresh" in names()
        assert "fresh" in names()
    assert len(scans) == 2


def test_concurrent_discoveries_agree_and_scan_once(scans: list[str], tmp_path: Path) -> None:
    write_distribution(tmp_path, "many-tools", {"many_plugin": provider("many")}, {"m": "many_plugin"})
    settle(tmp_path)
    found: list[set[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def discover() -> None:
        try:
            start.wait()
            found.append(names())
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    with on_sys_path(tmp_path):
        threads = [threading.Thread(target=discover) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert len(found) == 8 and all(f == found[0] for f in found) and "many" in found[0]
    assert len(scans) == 1


def test_clear_forgets_the_listing(scans: list[str]) -> None:
    names()
    names()
    _entry_points.clear()
    names()
    assert len(scans) == 2
