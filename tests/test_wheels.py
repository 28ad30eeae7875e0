"""The wheels build, install into a fresh virtual environment and work there.

This is what README.md ("Install into your project") and docs/providers.md
("Building and publishing a provider") tell users to do, offline: the wheels
are built without build isolation (hatchling comes from the dev lock)
and installed without an index. The fresh environment borrows only the
third-party dependencies (pydantic, httpx, ...) from the dev environment's
site-packages, through a ``.pth`` line; the dev environment's own ``.pth``
files, which put the source tree on the path, are not read that way, so
toolbox itself can come only from the wheels.
"""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

# Builds (wheels, the docs site) run in the full tier, before a release (CONTRIBUTING.md).
pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = {
    ".": "toolbox",
    "providers/toolbox-http": "toolbox_http",
    "providers/toolbox-fs": "toolbox_fs",
    "providers/toolbox-mcp": "toolbox_mcp",
    "providers/toolbox-sandbox": "toolbox_sandbox",
    "providers/toolbox-sql": "toolbox_sql",
}


# The machine's TOOLBOX_* variables (a policy file, a kill switch) have no say here.
ENV = {name: value for name, value in os.environ.items() if not name.startswith("TOOLBOX_")}


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    parts = [str(part) for part in command]
    done = subprocess.run(parts, capture_output=True, text=True, env=ENV, timeout=300, check=False)
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("dist")
    pip = (sys.executable, "-m", "pip")
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", out, *PROJECTS)
    return sorted(out.glob("*.whl"))


@pytest.fixture(scope="module")
def venv(wheels, tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", home)
    python = home / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", *wheels)
    return home


def test_each_wheel_ships_its_package_types_licence_and_entry_point(wheels):
    assert [w.name.split("-")[0] for w in wheels] == [
        "toolbox_fs",
        "toolbox_http",
        "toolbox_mcp",
        "toolbox_registry",
        "toolbox_sandbox",
        "toolbox_sql",
    ]
    packages = ["toolbox_fs", "toolbox_http", "toolbox_mcp", "toolbox", "toolbox_sandbox", "toolbox_sql"]
    for wheel, package in zip(wheels, packages, strict=True):
        names = zipfile.ZipFile(wheel).namelist()
        assert f"{package}/__init__.py" in names
        assert f"{package}/py.typed" in names
        assert any(n.endswith("/licenses/LICENSE") for n in names), wheel.name
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "[toolbox.providers]" in zipfile.ZipFile(wheel).read(entry_points).decode()
        assert not any(n.startswith(("tests/", "docs/")) for n in names), wheel.name


PROBE = """
import json
from toolbox import ExecutionContext, Tools
tools = Tools.load(ExecutionContext(tenant="t", principal="p"), env={})
found = {d.name: tools.distribution_of(d.name) for d in tools.descriptors()}
print(json.dumps({"tools": found, "broken": [str(b.error) for b in tools.broken_providers]}))
"""


def test_installed_wheels_import_from_the_venv_and_run_the_cli(venv):
    python, toolbox = venv / "bin" / "python", venv / "bin" / "toolbox"
    for package in PROJECTS.values():
        where = run(python, "-c", f"import {package}; print({package}.__file__)").stdout.strip()
        assert where.startswith(str(venv)), f"{package} imported from {where}, not from its wheel"
    discovered = json.loads(run(python, "-c", PROBE).stdout)
    assert discovered == {
        "tools": {
            "calculator": "toolbox-registry",
            "fs": "toolbox-fs",
            "http": "toolbox-http",
            "sandbox": "toolbox-sandbox",
        },
        "broken": [],
    }
    assert "usage: toolbox" in run(toolbox, "--help").stdout
    assert "toolbox-http" in run(toolbox, "list").stdout


MCP_PROBE = """
import json, sys
from toolbox import ExecutionContext, ToolPolicy, Tools
policy = ToolPolicy.from_file(sys.argv[1])
tools = Tools.load(ExecutionContext(tenant="t", principal="p"), policy=policy, env={})
broken = [b.error for b in tools.broken_providers]
print(json.dumps({"mcp.notes": tools.distribution_of("mcp.notes"), "broken": broken}))
"""


def test_the_mcp_wheel_registers_a_pinned_server_as_a_third_party_would(venv, tmp_path):
    from toolbox_mcp._lockfile import Pin, write_server

    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[tools.mcp.servers.notes]\ncommand = "notes-server"\n', encoding="utf-8")
    pin = Pin("search", "search", "Search.", {"type": "object", "properties": {}}, {})
    write_server(tmp_path / "mcp.lock.json", "notes", {"search": pin})
    found = json.loads(run(venv / "bin" / "python", "-c", MCP_PROBE, policy).stdout)
    assert found == {"mcp.notes": "toolbox-mcp", "broken": []}
