"""Old import paths keep working for one release: they warn and give the new module itself."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import toolbox
from toolbox._legacy import MOVED, PUBLIC, LegacyPaths


def _forget(name: str) -> None:
    sys.modules.pop(name, None)


def test_an_old_path_never_replaces_what_its_package_exports() -> None:
    """``toolbox.mcp.server`` is the package's function: the old module path does not shadow it."""
    import toolbox.mcp

    server = toolbox.mcp.server
    _forget("toolbox.mcp.server")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("toolbox.mcp.server")
    assert toolbox.mcp.server is server


_SHADOWED = {"toolbox.mcp.server"}


@pytest.mark.parametrize("old", sorted(set(MOVED) - _SHADOWED))
def test_an_old_path_warns_and_is_the_new_module(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    _forget(old)
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated .* import {MOVED[old]} instead"):
        legacy = importlib.import_module(old)
    assert legacy is new
    _forget(old)


def test_from_import_of_an_old_path_gives_the_same_objects() -> None:
    _forget("toolbox.gateway")
    with pytest.warns(DeprecationWarning, match="toolbox.gateway is deprecated"):
        from toolbox.gateway import Gateway  # type: ignore[import-not-found]
    assert Gateway is toolbox.Gateway
    _forget("toolbox.gateway")


def test_the_warning_names_the_public_home_when_there_is_one() -> None:
    _forget("toolbox.audit.trail")
    with pytest.warns(
        DeprecationWarning, match=r"instead \(its public names: from toolbox.audit import \.\.\.\)$"
    ):
        importlib.import_module("toolbox.audit.trail")
    _forget("toolbox.audit.trail")
    assert set(PUBLIC) <= set(MOVED)


def test_the_warning_names_the_importing_line() -> None:
    _forget("toolbox.cli_audit")
    with pytest.warns(DeprecationWarning) as caught:
        exec(compile("import toolbox.cli_audit", "<the importer>", "exec"), {})
    assert caught[0].filename == "<the importer>"
    _forget("toolbox.cli_audit")


def test_the_old_checks_module_names_warn_from_the_checks_package() -> None:
    from toolbox.pipeline.checks._builtin import KillSwitch

    with pytest.warns(DeprecationWarning, match="toolbox.pipeline.checks.KillSwitch is deprecated"):
        from toolbox.pipeline.checks import KillSwitch as old  # type: ignore[attr-defined]
    assert old is KillSwitch
    with pytest.raises(ImportError):
        from toolbox.pipeline.checks import NoSuchCheck  # type: ignore[attr-defined]  # noqa: F401


def test_the_old_table_has_no_live_module() -> None:
    """No old path is also a real module: no shim files are left at the old places."""
    for old in MOVED:
        finder_less = [f for f in sys.meta_path if not isinstance(f, LegacyPaths)]
        parent = old.rpartition(".")[0]
        path = importlib.import_module(parent).__path__
        assert all(f.find_spec(old, path) is None for f in finder_less if hasattr(f, "find_spec")), old


def test_a_new_path_never_warns() -> None:
    code = (
        "import warnings; warnings.simplefilter('error');"
        "import toolbox, toolbox.doors._gateway, toolbox.cli, toolbox.audit, toolbox.governance"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_finder_is_installed_once() -> None:
    from toolbox import _legacy

    _legacy.install()
    assert sum(isinstance(f, LegacyPaths) for f in sys.meta_path) == 1
