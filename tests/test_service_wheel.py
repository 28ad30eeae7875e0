"""The service's templates and stylesheet ship in the wheel as package data."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# A wheel build runs in the full tier, before a release (CONTRIBUTING.md).
pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ("base", "login", "tools", "approvals", "audit", "trace", "kill_switch", "error")


def test_wheel_ships_the_console_templates_and_static_files(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            tmp_path,
            ROOT,
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("toolbox_registry-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in TEMPLATES:
        assert f"toolbox/service/templates/{template}.html" in names
    assert "toolbox/service/static/console.css" in names
    assert "toolbox/cli/_serve.py" in names
