"""docs/tutorial.md runs end to end: its Python (tests/test_docs.py runs it too) and every command.

The Python blocks run in order in an empty directory; then each ``bash`` block's commands run
there as a newcomer would type them: ``toolbox ...`` as a real process (the console script,
run by a child of the zygote that imported toolbox once, tests/zygote.py; ``toolbox serve`` on
a free loopback port until ``/readyz`` answers), ``pip install`` checked against what the
tutorial imports, since installing from an index is not possible offline.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import tomllib

import zygote
from test_docs import blocks

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"


def commands() -> list[str]:
    """Every command line of the tutorial's bash blocks, comments removed, in order."""
    lines = []
    for block in blocks(TUTORIAL, "bash"):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command:
                lines.append(command)
    return lines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve_until_ready(args: list[str], cwd: Path) -> None:
    """Start ``toolbox serve ARGS`` on a free port, wait for ``/readyz``, stop it (gracefully)."""
    port = free_port()
    server = subprocess.Popen(
        zygote.toolbox_command(*args, "--port", str(port)),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    client = httpx.Client(timeout=5)  # one (building one loads the CA bundle)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stdout.read().decode() if server.stdout else "exited"
            try:
                ready = client.get(f"http://127.0.0.1:{port}/readyz")
            except httpx.TransportError:
                assert time.monotonic() < deadline, "toolbox serve did not answer /readyz"
                time.sleep(0.2)
                continue
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["audit"] == "ok"
            return
    finally:
        client.close()
        server.terminate()  # passed on to the server by the launcher (tests/zygote.py)
        server.wait(timeout=30)
        if server.stdout:
            server.stdout.close()


def test_the_tutorial_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBOX_POLICY", raising=False)
    namespace: dict[str, object] = {"__name__": "docs_tutorial"}
    for index, code in enumerate(blocks(TUTORIAL, "python")):
        exec(compile(code, f"tutorial.md[block {index}]", "exec"), namespace)
    assert namespace["REFUNDED"] == [(7, 40)]

    ran = []
    for command in commands():
        argv = shlex.split(command)
        if argv[:2] == ["pip", "install"]:
            continue  # test_what_the_tutorial_imports_is_what_it_installs
        assert argv[0] == "toolbox", f"the test knows no command {command!r}"
        if argv[1] == "serve":
            serve_until_ready(argv[1:], tmp_path)
        else:
            done = subprocess.run(
                zygote.toolbox_command(*argv[1:]),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        ran.append(argv[1])
    assert ran == ["audit", "auth", "serve", "audit"]  # the verify is shown twice: the plan and the end
    verified = subprocess.run(
        zygote.toolbox_command("audit", "--sqlite", "audit.db", "--json", "verify"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(verified.stdout)
    assert report["ok"] is True and report["problems"] == []
    assert report["events"] >= 4 and report["traces"] >= 1  # the refund: asked, decided, redeemed, run


def test_what_the_tutorial_imports_is_what_it_installs() -> None:
    """Each module the tutorial imports comes with its one ``pip install`` line."""
    (install,) = [c for c in commands() if c.startswith("pip install")]
    requirements = shlex.split(install)[2:]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    brought = {"toolbox-registry"} | {name for name in requirements if "[" not in name}
    for requirement in requirements:
        found = re.fullmatch(r"toolbox-registry\[([a-z,\-]+)\]", requirement)
        if found:
            for extra in found.group(1).split(","):
                brought |= {re.split(r"[\[<>=;]", dep)[0] for dep in project["optional-dependencies"][extra]}
    brought |= {re.split(r"[\[<>=;]", dep)[0] for dep in project["dependencies"]}
    brought |= {"starlette"}  # fastapi's own dependency
    providers = {**importlib.metadata.packages_distributions(), "toolbox": ["toolbox-registry"]}  # editable
    imported = set()
    for code in blocks(TUTORIAL, "python"):
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
    if "fastapi" in imported:
        brought_lower = {b.lower() for b in brought}
        assert "httpx" in brought_lower, "fastapi.testclient needs httpx, which no extra brings"
    third_party = imported - set(sys.stdlib_module_names)
    assert third_party, "the tutorial imports nothing?"
    for module in sorted(third_party):
        distributions = {d.lower() for d in providers.get(module, [])}
        assert distributions & {b.lower() for b in brought}, (
            f"{module} ({distributions}) is not installed by {install!r}"
        )
