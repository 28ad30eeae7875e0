"""A path checked at call time cannot be redirected outside by swapping in a link before execute."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from toolbox.errors import PathOutsideRootsError


@pytest.fixture
def sub(root):
    """A real directory ``sub`` in the root, holding ``file.txt``."""
    path = root / "sub"
    path.mkdir()
    (path / "file.txt").write_text("inside")
    return path


def swap_for_link(path, target):
    """Replace ``path`` by a symbolic link to ``target``."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.symlink_to(target, target_is_directory=target.is_dir())


def run_denied(ready, fs_tools):
    """Execute ``ready``, expect a PATH_OUTSIDE_ROOTS denial recorded in the trace."""
    with pytest.raises(PathOutsideRootsError) as info:
        ready.execute()
    assert info.value.reason_code == "PATH_OUTSIDE_ROOTS"
    assert ready.record.status == "DENIED"
    assert "PATH_OUTSIDE_ROOTS" in [d.reason_code for d in fs_tools.context.trace.denials()]
    return info.value


def test_read_through_a_swapped_directory_is_denied(fs, fs_tools, sub, outside, opened):
    """Reading sub/file.txt after sub became a link to an outside directory reads nothing."""
    ready = fs.read_text("sub/file.txt").purpose("Read the file")
    swap_for_link(sub, outside.path)
    opened.clear()
    error = run_denied(ready, fs_tools)
    assert "'sub/file.txt' changed after it was checked: 'sub' is now a symbolic link" in str(error)
    assert "file.txt" not in opened
    outside.assert_untouched()


def test_write_through_a_swapped_directory_creates_nothing_outside(fs, fs_tools, sub, outside, opened):
    """Writing sub/new.txt after sub became a link to an outside directory creates no file there."""
    ready = fs.write("sub/new.txt", "pwned").audit_as("Write a file")
    swap_for_link(sub, outside.path)
    opened.clear()
    run_denied(ready, fs_tools)
    assert opened == [fs.options.roots[0], "sub"]  # the walk stopped at the link; no temp file was made
    outside.assert_untouched()


def test_replace_through_a_swapped_directory_leaves_the_outside_file(fs, fs_tools, sub, outside):
    """Replacing sub/file.txt after the swap leaves the outside file.txt as it was."""
    ready = fs.write("sub/file.txt", "pwned").audit_as("Replace the file")
    swap_for_link(sub, outside.path)
    run_denied(ready, fs_tools)
    outside.assert_untouched()


def test_delete_through_a_swapped_directory_deletes_nothing_outside(fs, fs_tools, sub, outside):
    """Deleting sub/file.txt after the swap leaves the outside file.txt in place."""
    ready = fs.delete("sub/file.txt").audit_as("Delete the file")
    swap_for_link(sub, outside.path)
    run_denied(ready, fs_tools)
    outside.assert_untouched()


def test_list_of_a_swapped_directory_is_denied(fs, fs_tools, sub, outside):
    """Listing sub after it became a link to an outside directory is denied."""
    ready = fs.list("sub").purpose("List the directory")
    swap_for_link(sub, outside.path)
    run_denied(ready, fs_tools)


def test_read_of_a_file_swapped_for_a_link_is_denied(fs, fs_tools, sub, outside, opened):
    """The final component swapped for a link to an outside file is not followed."""
    ready = fs.read_bytes("sub/file.txt").purpose("Read the file")
    swap_for_link(sub / "file.txt", outside.path / "secret.txt")
    run_denied(ready, fs_tools)
    outside.assert_untouched()


def test_write_over_a_file_swapped_for_a_link_is_denied(fs, fs_tools, sub, outside):
    """The final component swapped for a link to an outside file is not written through."""
    ready = fs.write("sub/file.txt", "pwned").audit_as("Replace the file")
    swap_for_link(sub / "file.txt", outside.path / "secret.txt")
    run_denied(ready, fs_tools)
    outside.assert_untouched()
    assert (sub / "file.txt").is_symlink()


def test_async_execute_is_guarded_too(fs, fs_tools, sub, outside):
    """aexecute runs the same fd walk, so the swap is denied there as well."""
    ready = fs.read_text("sub/file.txt").purpose("Read the file")
    swap_for_link(sub, outside.path)
    with pytest.raises(PathOutsideRootsError):
        asyncio.run(ready.aexecute())
    outside.assert_untouched()
