"""Govern a remote MCP server's tools with toolbox-mcp, offline.

Run it from the repository root (with toolbox-mcp installed)::

    .venv/bin/python examples/mcp_remote.py

It writes a small MCP server (the `mcp` SDK's `MCPServer`, over stdio) and a
policy file into a temporary folder, then:

1. pins the server's tools (``toolbox mcp lock notes``);
2. calls one through the governed chain, and shows a call the pinned schema refuses;
3. "updates" the server: ``add_note`` gains a parameter and ``wipe`` appears;
4. shows both refused (``MCP_LOCK_DRIFT``, ``unknown_operation``) and ``toolbox check``'s drift;
5. locks again, after review, and calls the new schema.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from toolbox import ExecutionContext, Gateway, Status, ToolPolicy, ToolResult
from toolbox.cli import main as toolbox

SERVER = """
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")
NOTES = ["lease renewal", "boiler service"]


@server.tool(description="Search the notes.")
def search(query: str) -> str:
    return ", ".join(n for n in NOTES if query in n) or "no match"


if os.environ.get("NOTES_VERSION") == "2":

    @server.tool(description="Add a note.")
    def add_note(text: str, pinned: bool = False) -> str:
        return "added"

    @server.tool(description="Delete every note.")
    def wipe() -> str:
        return "wiped"

else:

    @server.tool(description="Add a note.")
    def add_note(text: str) -> str:
        return "added"


server.run("stdio")
"""

POLICY = """
version = 1
[allow]
tools = ["mcp.notes"]

[tools.mcp.servers.notes]
command = "{python}"
args = ["{server}"]
env = {{ NOTES_VERSION = "{version}" }}

[tools.mcp.servers.notes.operations.search]
effect = "READ_ONLY"
"""


def write_policy(folder: Path, version: str) -> Path:
    policy = folder / "policy.toml"
    server = folder / "notes_server.py"
    policy.write_text(POLICY.format(python=sys.executable, server=server, version=version), encoding="utf-8")
    return policy


def show(label: str, result: ToolResult) -> None:
    code = result.reason_code if result.status is Status.DENIED else result.error_code
    shown = f" [{code}]" if code else ""
    print(f"{label}: {result.status.value}{shown}" + (f" -> {result.content}" if result.content else ""))


def main() -> None:
    ctx = ExecutionContext(tenant="acme", principal="alice")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "notes_server.py").write_text(SERVER, encoding="utf-8")
        policy = write_policy(folder, "1")

        print("1. toolbox mcp lock notes")
        toolbox(["mcp", "lock", "notes", "--policy", str(policy)])

        print("2. governed calls")
        gateway = Gateway.load(policy=ToolPolicy.from_file(policy))
        show(
            "search",
            gateway.invoke("mcp.notes.search", {"query": "lease", "purpose": "Find the lease"}, context=ctx),
        )
        show("search(42)", gateway.invoke("mcp.notes.search", {"query": 42, "purpose": "Find"}, context=ctx))
        gateway.close()

        print("3. the server changes: add_note gains a parameter, wipe appears")
        write_policy(folder, "2")
        gateway = Gateway.load(policy=ToolPolicy.from_file(policy))
        show(
            "add_note",
            gateway.invoke("mcp.notes.add_note", {"text": "x", "audit_as": "Add a note"}, context=ctx),
        )
        show("wipe", gateway.invoke("mcp.notes.wipe", {"audit_as": "Wipe"}, context=ctx))
        show(
            "search", gateway.invoke("mcp.notes.search", {"query": "boiler", "purpose": "Find"}, context=ctx)
        )
        gateway.close()

        print("4. toolbox check")
        toolbox(["check", "--policy", str(policy)])

        print("5. after review: toolbox mcp lock notes, and a new catalog")
        toolbox(["mcp", "lock", "notes", "--policy", str(policy)])
        gateway = Gateway.load(policy=ToolPolicy.from_file(policy))
        arguments = {"text": "x", "pinned": True, "audit_as": "Add a pinned note"}
        show("add_note", gateway.invoke("mcp.notes.add_note", arguments, context=ctx))
        gateway.close()


if __name__ == "__main__":
    main()
