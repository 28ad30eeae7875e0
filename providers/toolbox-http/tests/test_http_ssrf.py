"""Runs the SSRF refusal suite (netns_ssrf_suite.py) inside a loopback-only network namespace.

``unshare -rn`` gives the child pytest a fresh network namespace with only
``lo``: a broken guard then fails to connect instead of sending a packet.
This test FAILS (never skips) where unshare is unavailable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def test_ssrf_suite_in_loopback_only_namespace():
    """The whole refusal suite passes inside ``unshare -rn`` with lo up."""
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is required for the SSRF suite"
    command = [
        unshare,
        "-rn",
        "sh",
        "-c",
        'ip link set lo up && exec "$0" -m pytest -q -p no:randomly "$1"',
        sys.executable,
        str(HERE / "netns_ssrf_suite.py"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    completed = subprocess.run(
        command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-8000:]
    assert " passed" in output and "failed" not in output, output[-4000:]
