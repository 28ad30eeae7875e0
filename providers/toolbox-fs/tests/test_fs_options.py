"""Missing or invalid fs options fail at tools.get() with a message saying what to pass."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolbox import ToolPolicy
from toolbox_fs import FsOptions, FsTool, plugin

MiB = 1024 * 1024


@pytest.fixture
def get_fs(make_tools, toolbox_env):
    """Build tools with the given fs options (or none) and return a call to get the fs tool."""
    toolbox_env["TOOLBOX_FS_ACK"] = "allow-fs-within-roots"

    def build(options=None):
        tools = make_tools(
            plugin,
            policy=ToolPolicy.standard().allow(FsTool),
            options=None if options is None else {"fs": options},
        )
        return lambda: tools.get(FsTool)

    return build


def test_no_options_say_what_to_pass(get_fs):
    """Without options, get() raises ValueError showing the options to pass."""
    get = get_fs()
    with pytest.raises(ValueError, match=r'options=\{"fs": \{"roots"'):
        get()


def test_empty_roots_are_rejected(get_fs):
    """An empty roots list is invalid."""
    with pytest.raises(ValueError, match="roots") as info:
        get_fs({"roots": []})()
    assert "existing directories" in str(info.value)


def test_missing_root_directory_is_named(get_fs, tmp_path):
    """A root that does not exist is named in the error."""
    missing = tmp_path / "nope"
    with pytest.raises(ValueError, match="is not an existing directory") as info:
        get_fs({"roots": [str(missing)]})()
    assert str(missing) in str(info.value)


def test_file_as_root_is_rejected(get_fs, tmp_path):
    """A root that is a file, not a directory, is rejected."""
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is not an existing directory"):
        get_fs({"roots": [str(tmp_path / "f")]})()


def test_unknown_option_key_is_named(get_fs, tmp_path):
    """A misspelt option is rejected and named."""
    with pytest.raises(ValueError, match="rooots"):
        get_fs({"roots": [str(tmp_path)], "rooots": [str(tmp_path)]})()


def test_single_path_instead_of_a_list_is_rejected(get_fs, tmp_path):
    """roots='/dir' is rejected with an example of a list."""
    with pytest.raises(ValueError, match="must be a list of directories"):
        get_fs({"roots": str(tmp_path)})()


@pytest.mark.parametrize("value", [0, -1, True, "10", 1.5])
def test_limits_must_be_positive_integers(get_fs, tmp_path, value):
    """max_read_bytes must be a positive integer."""
    with pytest.raises(ValueError, match="max_read_bytes"):
        get_fs({"roots": [str(tmp_path)], "max_read_bytes": value})()


def test_options_are_validated_lazily(make_tools, toolbox_env):
    """Bad options do not break Tools.load; only get() fails."""
    tools = make_tools(plugin, policy=ToolPolicy.standard().allow(FsTool), options={"fs": {}})
    assert tools.has(FsTool)


def test_roots_are_resolved_and_defaults_applied(get_fs, tmp_path):
    """Roots are stored as real paths, without duplicates; limits default to 10 MiB."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    fs = get_fs({"roots": [tmp_path / "alias", str(real)]})()
    assert fs.options == FsOptions(roots=(str(real),), max_read_bytes=10 * MiB, max_write_bytes=10 * MiB)
    with pytest.raises(ValidationError):
        fs.options.max_read_bytes = 1
