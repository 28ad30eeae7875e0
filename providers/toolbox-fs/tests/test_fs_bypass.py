"""FsTool cannot touch a file outside the governed chain: nothing is written, read or deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbox import Gateway, Status, Tools
from toolbox.errors import GovernanceBypassError
from toolbox.registry._intent import dispatch_calls
from toolbox_fs import FsTool, _io, plugin
from toolbox_fs._paths import resolve

from .conftest import ACK, ALLOW_FS


@pytest.fixture
def killed(make_tools, toolbox_env: dict[str, str], root: Path) -> Tools:
    """Fs tools built while the kill switch is engaged."""
    toolbox_env.update(ACK)
    toolbox_env["TOOLBOX_KILL_SWITCH"] = "1"
    return make_tools(plugin, policy=ALLOW_FS, options={"fs": {"roots": [str(root)]}})


def test_intent_calls_write_nothing(killed: Tools, root: Path) -> None:
    """The calls of a write intent, reached any way, refuse: the file does not exist afterwards."""
    fs = killed.get(FsTool)
    intent = fs.write("note.txt", "x")
    ready = intent.audit_as("Write")
    call, acall = dispatch_calls(intent)
    assert acall is None
    for attempt in (call, intent._call, ready._call):
        with pytest.raises(GovernanceBypassError) as caught:
            attempt()
        assert caught.value.tool == "fs"
    assert not (root / "note.txt").exists()
    result = Gateway(killed.catalog).invoke(
        "fs.write", {"path": "note.txt", "data": "x", "audit_as": "Write"}, context=killed.context
    )
    assert (result.status, result.reason_code) == (Status.DENIED, "KILL_SWITCH")
    assert not (root / "note.txt").exists()


def test_file_functions_refuse(killed: Tools, root: Path) -> None:
    """The provider's file functions, called with a resolved path, touch nothing."""
    (root / "keep.txt").write_text("kept")
    where = resolve("keep.txt", (str(root),), tool="fs")
    new = resolve("new.txt", (str(root),), tool="fs")
    for attempt in (
        lambda: _io.write_file(new, b"x"),
        lambda: _io.write_file(where, b"overwritten"),
        lambda: _io.delete_file(where),
        lambda: _io.read_file(where, 100),
        lambda: _io.list_dir(resolve(".", (str(root),), tool="fs")),
    ):
        with pytest.raises(GovernanceBypassError):
            attempt()
    assert (root / "keep.txt").read_text() == "kept"
    assert not (root / "new.txt").exists()


def test_governed_write_still_works(fs: FsTool, root: Path) -> None:
    """Through the chain the write happens once."""
    assert fs.write("note.txt", "hello").audit_as("Write").execute() == 5
    assert (root / "note.txt").read_text() == "hello"
