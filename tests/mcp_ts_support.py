"""The official TypeScript MCP SDK as a test client (tests/mcp_ts/client.cjs), run with node.

`scripts/setup` installs the SDK pinned by ``tests/mcp_ts/package-lock.json`` into
``.cache/mcp-ts`` (`scripts/mcp-ts-client`); when it is missing, the first test
using it installs it the same way. Without node or npm the tests fail, saying
so: they never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "mcp-ts"
CLIENT = ROOT / "tests" / "mcp_ts" / "client.cjs"
INSTALL = ROOT / "scripts" / "mcp-ts-client"
SDK_VERSION = json.loads((ROOT / "tests" / "mcp_ts" / "package.json").read_text())["dependencies"][
    "@modelcontextprotocol/sdk"
]


def _installed() -> Path:
    """The SDK's node_modules, installed now if it is not yet (fails the test when it cannot be)."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        pytest.fail(
            "node and npm are needed for the TypeScript MCP SDK tests (node >= 18); "
            "install them, then run bash scripts/setup"
        )
    installed = subprocess.run(
        ["bash", str(INSTALL)], capture_output=True, text=True, timeout=600, check=False
    )
    if installed.returncode != 0:
        pytest.fail(f"installing the TypeScript MCP SDK failed:\n{installed.stdout}\n{installed.stderr}")
    return CACHE / "node_modules"


def ts_client(request: dict[str, Any], *, timeout: float = 120) -> dict[str, Any]:
    """Run the TypeScript client on ``request`` (see client.cjs); its JSON answer."""
    modules = _installed()
    env = {**os.environ, "NODE_PATH": str(modules)}
    done = subprocess.run(
        ["node", str(CLIENT)],
        input=json.dumps({**request, "sdk": SDK_VERSION}),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"the TypeScript client failed ({done.returncode}):\n{done.stderr}"
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
