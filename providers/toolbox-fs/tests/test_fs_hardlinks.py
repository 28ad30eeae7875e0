"""Hard links: a read of a file with several links is denied unless ``allow_hardlinks`` is set.

A hard link inside a root can name a file outside it, and nothing in the root
tells which name is the original, so reads refuse any regular file whose link
count is above one. Writes replace the name (a new file, renamed in place) and
deletes remove the name, so neither ever changes a linked file outside.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbox import ExecutionContext, Gateway, Governance, Status, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import PathOutsideRootsError
from toolbox.testing import assert_denied
from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool, plugin

ACK = {FS_ACKNOWLEDGEMENT.env: FS_ACKNOWLEDGEMENT.value}
ALLOW_FS = ToolPolicy.standard().allow(FsTool)


@pytest.fixture
def linked(root: Path, outside) -> Path:
    """``root/linked.txt``: a hard link to a file outside the root."""
    link = root / "linked.txt"
    os.link(outside.path / "secret.txt", link)
    return link


def deny(action, tools):
    return assert_denied(action, tools, FsTool, error=PathOutsideRootsError, reason_code="PATH_OUTSIDE_ROOTS")


@pytest.mark.parametrize("operation", ["read_text", "read_bytes"])
def test_reading_a_hard_link_to_an_outside_file_is_denied(fs, fs_tools, linked, outside, opened, operation):
    error = deny(lambda: getattr(fs, operation)("linked.txt"), fs_tools)
    assert error.rule == "fs:hardlinks"
    assert "2 hard links" in str(error) and "allow_hardlinks" in str(error)
    assert "outside secret" not in str(error)
    assert opened == []
    outside.assert_untouched()


def test_a_file_linked_twice_inside_the_root_is_refused_too(fs, fs_tools, root, opened):
    """toolbox cannot tell where the other link is: the safe default refuses every multi-link file."""
    (root / "a.txt").write_text("inside")
    os.link(root / "a.txt", root / "b.txt")
    deny(lambda: fs.read_text("b.txt"), fs_tools)
    assert opened == []


def test_a_link_made_after_the_call_is_caught_at_execute(fs, fs_tools, root, outside):
    """Between operation call and execute, the file gains a link: nothing is returned."""
    target = root / "later.txt"
    target.write_text("inside")
    ready = fs.read_text("later.txt").purpose("Read it")
    os.link(target, outside.path / "extra-link.txt")
    with pytest.raises(PathOutsideRootsError) as info:
        ready.execute()
    assert (info.value.reason_code, info.value.rule) == ("PATH_OUTSIDE_ROOTS", "fs:hardlinks")
    assert ready.record.status == "DENIED"
    assert "PATH_OUTSIDE_ROOTS" in [d.reason_code for d in fs_tools.context.trace.denials()]


def test_allow_hardlinks_opts_in(make_tools, toolbox_env, root, linked):
    toolbox_env.update(ACK)
    tools = make_tools(
        plugin, policy=ALLOW_FS, options={"fs": {"roots": [str(root)], "allow_hardlinks": True}}
    )
    fs = tools.get(FsTool)
    assert fs.read_text("linked.txt").purpose("Read it").execute() == "outside secret"


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_allow_hardlinks_must_be_a_boolean(make_tools, toolbox_env, root, value):
    toolbox_env.update(ACK)
    tools = make_tools(
        plugin, policy=ALLOW_FS, options={"fs": {"roots": [str(root)], "allow_hardlinks": value}}
    )
    with pytest.raises(ValueError, match="allow_hardlinks"):
        tools.get(FsTool)


def test_writing_to_a_hard_link_replaces_the_name_only(fs, linked, outside):
    assert fs.write("linked.txt", "new").audit_as("Replace it").execute() == 3
    assert linked.read_text() == "new"
    assert os.stat(linked).st_nlink == 1
    outside.assert_untouched()


def test_deleting_a_hard_link_removes_the_name_only(fs, linked, outside):
    fs.delete("linked.txt").audit_as("Remove it").execute()
    assert not linked.exists()
    outside.assert_untouched()


def test_by_name_read_of_a_hard_link_is_denied_and_audited(root, linked, outside):
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ALLOW_FS,
        providers=[plugin],
        discover=False,
        env=ACK,
        options={"fs": {"roots": [str(root)]}},
        governance=Governance(audit=AuditTrail(sink, fallback_path=None)),
    )
    context = ExecutionContext(tenant="t", principal="p")
    result = gateway.invoke("fs.read_text", {"path": "linked.txt", "purpose": "Read"}, context=context)
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "PATH_OUTSIDE_ROOTS",
        "fs:hardlinks",
    )
    assert result.content is None
    assert gateway.tools_for(context).executions(FsTool) == 0
    decision = [r for r in sink.read_trace(context.run_id) if r.type.value == "GOVERNANCE_DECISION"]
    assert [(r.decision, r.reason_code) for r in decision] == [("DENY", "PATH_OUTSIDE_ROOTS")]
    outside.assert_untouched()
