"""Tools for the MCP scenario table, each counting its executions.

Importable in the test process (``providers=PROVIDERS``) and discoverable by a
``toolbox mcp serve`` child through a fake distribution's entry point
(`write_scenario_distribution`). A child appends each execution to the file
named by ``MCP_SCENARIO_LOG``, so the test can count what ran there.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from toolbox import Acknowledgement, Effect, RiskClass, hookimpl, tool
from toolbox.governance import BusinessFailure
from toolbox_test_support.distributions import write_distribution

EXECUTIONS: list[str] = []
LOG_ENV = "MCP_SCENARIO_LOG"
PAYMENTS_ACK = "TOOLBOX_PAYMENTS_ACK"


def _ran(name: str) -> None:
    EXECUTIONS.append(name)
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(name + "\n")


class Note(BaseModel):
    """A note, as the lookup returns it."""

    note_id: int
    text: str


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def lookup(note_id: int) -> Note:
    """Read one note."""
    _ran("lookup")
    return Note(note_id=note_id, text=f"note {note_id}")


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def vault(item: str) -> str:
    """Read a vault secret (denied by the scenario policy)."""
    _ran("vault")
    return "secret"


@tool(
    risk=RiskClass.EXTERNAL_RESOURCE,
    effect=Effect.UNSAFE,
    acknowledgement=Acknowledgement(env=PAYMENTS_ACK, value="yes-payments"),
)
def payments(amount: int) -> dict[str, int]:
    """Pay an amount (needs its acknowledgement)."""
    _ran("payments")
    return {"paid": amount}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, requires_approval=True)
def refund(amount: int) -> dict[str, int]:
    """Refund an amount (needs a human approval)."""
    _ran("refund")
    return {"refunded": amount}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.IDEMPOTENT)
def settle(order: int) -> dict[str, object]:
    """Settle an order (the business outcome fails)."""
    _ran("settle")
    return {"ok": False, "order": order}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def halt(item: str) -> str:
    """A tool the kill switch stops."""
    _ran("halt")
    return item


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def explode(item: str) -> str:
    """A tool that fails, with a secret in its exception."""
    _ran("explode")
    raise RuntimeError("connection to db://admin:hunter2@10.0.0.1 failed")


PROVIDERS = [lookup, vault, payments, refund, settle, halt, explode]


def _not_settled(content: dict[str, object]) -> BusinessFailure | None:
    return None if content["ok"] else BusinessFailure("NOT_SETTLED", "the order was not settled")


MAPPERS = {"settle": _not_settled}

POLICY = """\
version = 1

[allow]
tools = ["payments"]

[deny]
tools = ["vault"]

[[guardrails.rules]]
id = "NO_SECRET_NOTE"
tool = "lookup"
action = "DENY"
argument = "note_id"
equals = 13

[mcp.context]
tenant = "acme"
principal = "desktop"
roles = ["analyst"]

[mcp.toolsets.readers]
tools = ["lookup", "halt"]
"""


def audit_table(path: Path) -> str:
    """An ``[audit]`` table writing JSON Lines to ``path``."""
    fallback = path.with_suffix(".fallback")
    return f'\n[audit]\nfallback = "{fallback}"\n[[audit.sinks]]\ntype = "jsonl"\npath = "{path}"\n'


def write_scenario_distribution(root: Path) -> None:
    """A fake installed distribution whose entry point is this module (for a child process)."""
    write_distribution(root, "mcp-scenario-tools", {}, {"mcp_scenarios": "mcp_scenario_tools"})


@hookimpl
def toolbox_providers() -> list[object]:
    """The entry point's hook: every scenario tool."""
    return [function.__toolbox_provider__ for function in PROVIDERS]
