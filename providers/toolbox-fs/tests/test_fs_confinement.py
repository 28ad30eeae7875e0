"""Paths are confined to the roots, checked when the operation is called."""

from __future__ import annotations

import pytest

from toolbox import ToolPolicy
from toolbox.errors import PathOutsideRootsError
from toolbox.testing import assert_denied
from toolbox_fs import FsTool, plugin


def deny(action, tools):
    """Assert ``action`` (an operation call, nothing more) is a PATH_OUTSIDE_ROOTS denial."""
    return assert_denied(action, tools, FsTool, error=PathOutsideRootsError, reason_code="PATH_OUTSIDE_ROOTS")


@pytest.fixture
def links(root, outside):
    """Symbolic links in the root: one to a file outside, one to a directory outside."""
    (root / "a").mkdir()
    (root / "link_file").symlink_to(outside.sentinel)
    (root / "link_dir").symlink_to(outside.path, target_is_directory=True)
    return root


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "a/../../outside.txt", "link_file", "link_dir/secret.txt", "../outside/secret.txt"],
)
@pytest.mark.parametrize("operation", ["read_text", "read_bytes"])
def test_reads_that_escape_are_denied_at_call_time(fs, fs_tools, links, outside, opened, path, operation):
    """'..' escapes and links leading outside are denied before purpose(), with nothing opened."""
    error = deny(lambda: getattr(fs, operation)(path), fs_tools)
    assert error.rule == "fs:roots"
    assert repr(path) in str(error)
    assert opened == []
    outside.assert_untouched()


def test_absolute_path_outside_the_roots_is_denied(fs, fs_tools, outside, opened):
    """An absolute path outside every root is denied and names the roots."""
    error = deny(lambda: fs.read_text(str(outside.sentinel)), fs_tools)
    assert fs.options.roots[0] in str(error)
    assert opened == []
    outside.assert_untouched()


def test_listing_a_linked_outside_directory_is_denied(fs, fs_tools, links, outside, opened):
    """Listing through a link to a directory outside is denied."""
    deny(lambda: fs.list("link_dir"), fs_tools)
    deny(lambda: fs.list(".."), fs_tools)
    assert opened == []


@pytest.mark.parametrize("path", ["link_dir/new.txt", "link_file", "../new.txt", "a/../../outside/new.txt"])
def test_writes_that_escape_are_denied_and_create_nothing(fs, fs_tools, links, outside, opened, path):
    """A write through an escaping link or '..' is denied at call time; no file appears outside."""
    deny(lambda: fs.write(path, "pwned"), fs_tools)
    assert opened == []
    outside.assert_untouched()


@pytest.mark.parametrize("path", ["link_dir/secret.txt", "link_file", "../outside.txt"])
def test_deletes_that_escape_are_denied_and_delete_nothing(fs, fs_tools, links, outside, opened, path):
    """A delete through an escaping link or '..' is denied at call time; the outside files stay."""
    deny(lambda: fs.delete(path), fs_tools)
    assert opened == []
    outside.assert_untouched()
    assert (links / "link_file").is_symlink()


def test_links_that_stay_inside_the_root_work(fs, root):
    """Links to a file and to a directory inside the root are followed."""
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("inside")
    (root / "alias").symlink_to("real", target_is_directory=True)
    (root / "f_link").symlink_to(root / "real" / "f.txt")
    assert fs.read_text("alias/f.txt").purpose("Read through a directory link").execute() == "inside"
    assert fs.read_text("f_link").purpose("Read through a file link").execute() == "inside"
    ready = fs.write("alias/g.txt", "new").audit_as("Write through a directory link")
    assert ready.record.target == "real/g.txt"
    ready.execute()
    assert (root / "real" / "g.txt").read_text() == "new"


def test_dot_dot_that_stays_inside_works(fs, root):
    """'..' that stays inside the root is fine."""
    (root / "a").mkdir()
    (root / "b.txt").write_text("b")
    assert fs.read_text("a/../b.txt").purpose("Read b").execute() == "b"


def test_absolute_path_inside_the_root_works(fs, root):
    """An absolute path inside the root is allowed; the target is relative to the root."""
    (root / "x.txt").write_text("x")
    ready = fs.read_text(str(root / "x.txt")).purpose("Read x")
    assert ready.record.target == "x.txt"
    assert ready.execute() == "x"


def test_absolute_path_in_the_second_root_works(make_tools, toolbox_env, tmp_path):
    """With two roots, relative paths use the first and an absolute path may lie in the second."""
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    (first / "f.txt").write_text("first")
    (second / "s.txt").write_text("second")
    toolbox_env["TOOLBOX_FS_ACK"] = "allow-fs-within-roots"
    tools = make_tools(
        plugin,
        policy=ToolPolicy.standard().allow(FsTool),
        options={"fs": {"roots": [str(first), str(second)]}},
    )
    fs = tools.get(FsTool)
    assert fs.read_text("f.txt").purpose("Read from the first root").execute() == "first"
    assert fs.read_text(str(second / "s.txt")).purpose("Read from the second root").execute() == "second"
    fs.write(str(second / "new.txt"), "n").audit_as("Write into the second root").execute()
    assert (second / "new.txt").read_text() == "n"
    assert_denied(
        lambda: fs.read_text(str(tmp_path / "three" / "x")),
        tools,
        FsTool,
        error=PathOutsideRootsError,
        reason_code="PATH_OUTSIDE_ROOTS",
    )


@pytest.mark.parametrize("path", ["a\x00b", b"x.txt", 3, None, ""])
def test_paths_that_are_not_plain_strings_are_value_errors(fs, fs_tools, opened, path):
    """NUL bytes, empty and non-str paths raise ValueError at call time."""
    with pytest.raises(ValueError, match="fs path"):
        fs.read_text(path)
    assert opened == []
    assert fs_tools.executions(FsTool) == 0
