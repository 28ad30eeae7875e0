"""toolbox-fs registers through the toolbox.providers entry point, as a third party would."""

from __future__ import annotations

import importlib_metadata

import toolbox_fs
from toolbox import ToolPolicy, Tools
from toolbox.testing import test_context
from toolbox_fs import FsTool


def test_entry_point_is_declared():
    """The distribution declares fs = toolbox_fs.plugin in the toolbox.providers group."""
    (ep,) = importlib_metadata.entry_points(group="toolbox.providers", name="fs")
    assert ep.value == "toolbox_fs.plugin"
    assert ep.dist is not None and ep.dist.name == "toolbox-fs"


def test_tools_load_discovers_fs(tmp_path):
    """Tools.load finds the installed fs provider, from distribution toolbox-fs, and it works."""
    (tmp_path / "hello.txt").write_text("hi")
    tools = Tools.load(
        test_context(),
        env={"TOOLBOX_FS_ACK": "allow-fs-within-roots"},
        policy=ToolPolicy.standard().allow(FsTool),
        options={"fs": {"roots": [str(tmp_path)]}},
    )
    assert tools.has("fs")
    assert tools.has(FsTool)
    assert tools.distribution_of("fs") == "toolbox-fs"
    assert not [b for b in tools.broken_providers if b.distribution == "toolbox-fs"]
    fs = tools.get(FsTool)
    assert fs.read_text("hello.txt").purpose("Greet").execute() == "hi"


def test_public_api_is_explicit():
    """The package exports exactly its documented names, sorted."""
    assert toolbox_fs.__all__ == ["FS_ACKNOWLEDGEMENT", "FS_DESCRIPTOR", "FsOptions", "FsTool"]
    for name in toolbox_fs.__all__:
        assert getattr(toolbox_fs, name) is not None
