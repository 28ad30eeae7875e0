"""The four ways to ask for the fs tool: unavailable, policy-denied, unacknowledged, allowed."""

from __future__ import annotations

import pytest

from toolbox import (
    AcknowledgementRequiredError,
    RiskClass,
    ToolPolicy,
    ToolPolicyDeniedError,
    ToolUnavailableError,
)
from toolbox.testing import assert_denied
from toolbox_fs import FS_ACKNOWLEDGEMENT, FS_DESCRIPTOR, FsTool, plugin

ACK = {"TOOLBOX_FS_ACK": "allow-fs-within-roots"}
ALLOW_FS = ToolPolicy.standard().allow(FsTool)


def test_descriptor_declares_risk_acknowledgement_and_effects():
    """The descriptor is PRIVILEGED, acknowledged, with reads READ_ONLY, write IDEMPOTENT, delete UNSAFE."""
    assert FS_DESCRIPTOR.name == "fs"
    assert FS_DESCRIPTOR.risk is RiskClass.PRIVILEGED
    assert FS_DESCRIPTOR.acknowledgement == FS_ACKNOWLEDGEMENT
    assert (FS_ACKNOWLEDGEMENT.env, FS_ACKNOWLEDGEMENT.value) == ("TOOLBOX_FS_ACK", "allow-fs-within-roots")
    effects = {op.name: op.effect.value for op in FS_DESCRIPTOR.operations}
    assert effects == {
        "read_text": "READ_ONLY",
        "read_bytes": "READ_ONLY",
        "list": "READ_ONLY",
        "write": "IDEMPOTENT",
        "delete": "UNSAFE",
    }


def test_unavailable_without_the_provider(make_tools, root):
    """Without the fs provider, get() is TOOL_UNAVAILABLE."""
    tools = make_tools(policy=ALLOW_FS, env=ACK)
    assert_denied(
        lambda: tools.get(FsTool), tools, FsTool, error=ToolUnavailableError, reason_code="TOOL_UNAVAILABLE"
    )


def test_standard_policy_denies_privileged_fs(make_tools, root):
    """ToolPolicy.standard() denies the PRIVILEGED fs tool even when acknowledged."""
    tools = make_tools(plugin, policy=ToolPolicy.standard(), env=ACK, options={"fs": {"roots": [str(root)]}})
    error = assert_denied(
        lambda: tools.get(FsTool), tools, FsTool, error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
    )
    assert "allow('fs')" in str(error)


def test_missing_acknowledgement_is_denied_and_named(make_tools, root):
    """An explicit allow without TOOLBOX_FS_ACK is NOT_ACKNOWLEDGED; the message names variable and value."""
    tools = make_tools(plugin, policy=ALLOW_FS, env={}, options={"fs": {"roots": [str(root)]}})
    error = assert_denied(
        lambda: tools.get(FsTool),
        tools,
        FsTool,
        error=AcknowledgementRequiredError,
        reason_code="NOT_ACKNOWLEDGED",
    )
    assert "TOOLBOX_FS_ACK" in str(error)
    assert "allow-fs-within-roots" in str(error)
    assert (error.env, error.value) == ("TOOLBOX_FS_ACK", "allow-fs-within-roots")


@pytest.mark.parametrize(
    "value",
    ["Allow-fs-within-roots", "ALLOW-FS-WITHIN-ROOTS", "allow-fs-within-roots ", " allow-fs-within-roots"],
)
def test_acknowledgement_is_compared_exactly(make_tools, root, value):
    """A value differing by case or by a leading or trailing space is denied."""
    tools = make_tools(
        plugin, policy=ALLOW_FS, env={"TOOLBOX_FS_ACK": value}, options={"fs": {"roots": [str(root)]}}
    )
    error = assert_denied(
        lambda: tools.get(FsTool),
        tools,
        FsTool,
        error=AcknowledgementRequiredError,
        reason_code="NOT_ACKNOWLEDGED",
    )
    assert "holds a different value" in str(error)


def test_allowed_and_acknowledged_fs_works_and_counts_executions(fs_tools, root):
    """With the allow and the acknowledgement, write, read, list and delete run and are counted."""
    fs = fs_tools.get(FsTool)
    assert fs.write("note.txt", "hello").audit_as("Save a note").execute() == 5
    assert fs.read_text("note.txt").purpose("Read the note back").execute() == "hello"
    assert fs.list().purpose("See what is stored").execute() == ["note.txt"]
    assert fs.delete("note.txt").audit_as("Remove the note").execute() is None
    assert not (root / "note.txt").exists()
    assert fs_tools.executions(FsTool) == 4
    assert fs_tools.explain(FsTool).allowed
