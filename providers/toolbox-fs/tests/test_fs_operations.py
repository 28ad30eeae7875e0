"""What each fs operation does inside the root: results, limits, atomic writes, errors, async."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest

from toolbox import ToolPolicy
from toolbox.errors import ResponseTooLargeError
from toolbox_fs import FsTool, plugin


@pytest.fixture
def small_fs(make_tools, toolbox_env, root):
    """An fs tool with 8-byte read and write limits."""
    toolbox_env["TOOLBOX_FS_ACK"] = "allow-fs-within-roots"
    tools = make_tools(
        plugin,
        policy=ToolPolicy.standard().allow(FsTool),
        options={"fs": {"roots": [str(root)], "max_read_bytes": 8, "max_write_bytes": 8}},
    )
    return tools.get(FsTool)


def test_read_text_decodes_with_the_given_encoding(fs, root):
    """read_text decodes UTF-8 by default and honours encoding=."""
    (root / "u.txt").write_bytes("café".encode())
    (root / "l.txt").write_bytes("café".encode("latin-1"))
    assert fs.read_text("u.txt").purpose("Read UTF-8").execute() == "café"
    assert fs.read_text("l.txt", encoding="latin-1").purpose("Read Latin-1").execute() == "café"


def test_unknown_encoding_fails_at_call_time(fs, root):
    """An unknown encoding is a ValueError before any intent exists."""
    with pytest.raises(ValueError, match="unknown encoding 'klingon'"):
        fs.read_text("u.txt", encoding="klingon")


def test_read_bytes_returns_raw_content(fs, root):
    """read_bytes returns the bytes unchanged."""
    (root / "b.bin").write_bytes(b"\x00\xff\x10")
    assert fs.read_bytes("b.bin").purpose("Read binary").execute() == b"\x00\xff\x10"


def test_read_over_the_limit_is_refused_without_reading(small_fs, root, monkeypatch):
    """A file above max_read_bytes fails with ResponseTooLargeError and is not read."""
    (root / "big.txt").write_bytes(b"x" * 1024 * 1024)
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(ResponseTooLargeError, match="max_read_bytes=8") as info:
        small_fs.read_bytes("big.txt").purpose("Read a big file").execute()
    assert isinstance(info.value, ValueError)
    assert reads == []


def test_read_at_the_limit_works(small_fs, root):
    """A file of exactly max_read_bytes is read."""
    (root / "eight.txt").write_text("12345678")
    assert small_fs.read_text("eight.txt").purpose("Read").execute() == "12345678"


def test_list_returns_sorted_names(fs, root):
    """list returns the entry names of a directory, sorted; the default is the root."""
    for name in ("b", "a", "C"):
        (root / name).write_text("")
    (root / "d").mkdir()
    (root / "d" / "z").write_text("")
    assert fs.list().purpose("List the root").execute() == ["C", "a", "b", "d"]
    assert fs.list("d").purpose("List d").execute() == ["z"]


def test_list_of_a_file_is_not_a_directory(fs, root):
    """Listing a file raises NotADirectoryError naming the path."""
    (root / "f").write_text("")
    with pytest.raises(NotADirectoryError, match="'f'"):
        fs.list("f").purpose("List a file").execute()


def test_write_creates_and_replaces_atomically(fs, root):
    """write creates a file, replaces it keeping its mode, returns bytes written, leaves no temp file."""
    assert fs.write("w.txt", "first").audit_as("Create").execute() == 5
    (root / "w.txt").chmod(0o640)
    assert fs.write("w.txt", b"second!").audit_as("Replace").execute() == 7
    assert (root / "w.txt").read_bytes() == b"second!"
    assert stat.S_IMODE((root / "w.txt").stat().st_mode) == 0o640
    assert sorted(p.name for p in root.iterdir()) == ["w.txt"]


def test_write_encodes_text_as_utf8(fs, root):
    """A str is written as UTF-8 and the UTF-8 length is returned."""
    assert fs.write("c.txt", "café").audit_as("Write").execute() == 5
    assert (root / "c.txt").read_bytes() == "café".encode()


def test_write_over_the_limit_fails_at_call_time(small_fs, root):
    """Data above max_write_bytes is a ValueError before any intent exists."""
    with pytest.raises(ValueError, match="max_write_bytes=8"):
        small_fs.write("big.txt", "123456789")
    assert not (root / "big.txt").exists()


@pytest.mark.parametrize("data", [1, None, ["x"]])
def test_write_data_must_be_str_or_bytes(fs, data):
    """Other data types are a ValueError at call time."""
    with pytest.raises(ValueError, match="must be str or bytes"):
        fs.write("x.txt", data)


def test_write_copies_mutable_data_at_call_time(fs, root):
    """A bytearray changed after the call does not change what is written."""
    data = bytearray(b"before")
    ready = fs.write("m.txt", data).audit_as("Write")
    data[:] = b"after!"
    ready.execute()
    assert (root / "m.txt").read_bytes() == b"before"


def test_write_into_a_missing_directory_names_the_path(fs, root):
    """The parent must exist; the error names the path relative to the root."""
    with pytest.raises(FileNotFoundError, match=r"fs\.list") as info:
        fs.write("no/such/dir.txt", "x").audit_as("Write").execute()
    assert info.value.filename == "no/such/dir.txt"
    assert sorted(root.iterdir()) == []


def test_write_over_a_directory_is_refused(fs, root):
    """Writing where a directory is raises IsADirectoryError and keeps the directory."""
    (root / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        fs.write("d", "x").audit_as("Write").execute()
    assert (root / "d").is_dir()
    assert sorted(p.name for p in root.iterdir()) == ["d"]


def test_delete_removes_a_file_only(fs, root):
    """delete removes a file; a directory, a missing file and the root are refused."""
    (root / "f").write_text("")
    (root / "d").mkdir()
    fs.delete("f").audit_as("Delete f").execute()
    assert not (root / "f").exists()
    with pytest.raises(IsADirectoryError):
        fs.delete("d").audit_as("Delete d").execute()
    with pytest.raises(FileNotFoundError):
        fs.delete("f").audit_as("Delete f again").execute()
    with pytest.raises(ValueError, match="is a root directory"):
        fs.delete(".")
    assert (root / "d").is_dir()


def test_reading_the_root_is_a_value_error(fs):
    """read_text('.') names the root and is refused at call time."""
    with pytest.raises(ValueError, match="is a root directory"):
        fs.read_text(".")


def test_intents_are_typed_by_effect(fs, root):
    """Reads accept purpose(); write and delete accept only audit_as()."""
    (root / "f").write_text("")
    assert fs.read_text("f").purpose("Read").record.intent_kind == "purpose"
    with pytest.raises(AttributeError, match="audit_as"):
        fs.write("f", "x").purpose("Write")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="audit_as"):
        fs.delete("f").purpose("Delete")  # type: ignore[attr-defined]


def test_trace_target_is_the_relative_path_never_the_content(fs, fs_tools, root):
    """The trace records the path relative to the root, not the data."""
    fs.write("t.txt", "top secret content").audit_as("Write").execute()
    (record,) = fs_tools.context.trace.operations("fs")
    assert record.target == "t.txt"
    assert "top secret" not in repr(record.as_dict())


def test_aexecute_works_from_async_code(fs, fs_tools, root):
    """asyncio.run(ready.aexecute()) works for reads and writes."""
    assert asyncio.run(fs.write("a.txt", "async").audit_as("Write").aexecute()) == 5
    assert asyncio.run(fs.read_text("a.txt").purpose("Read").aexecute()) == "async"
    assert asyncio.run(fs.list().purpose("List").aexecute()) == ["a.txt"]
    assert fs_tools.executions(FsTool) == 3


def test_reading_what_is_not_a_file_is_refused(fs, root):
    """A directory, a missing file and a FIFO are refused; the FIFO is never opened, so nothing hangs."""
    (root / "d").mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(IsADirectoryError):
        fs.read_text("d").purpose("Read a directory").execute()
    with pytest.raises(FileNotFoundError) as info:
        fs.read_text("d/missing.txt").purpose("Read a missing file").execute()
    assert info.value.filename == "d/missing.txt"
    with pytest.raises(ValueError, match="not a regular file"):
        fs.read_bytes("pipe").purpose("Read a FIFO").execute()
