"""Tools, a gateway and audit readers shared by the OpenAI Agents and LangChain integration tests.

Every tool body counts its runs (and the thread it ran on), so a test can say
exactly how often the governed call reached the code.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import Decision, Guardrail, HmacApprover

SECRET = b"agent-framework-tests-secret-0123"
RUNS: Counter[str] = Counter()
THREADS: list[str] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    RUNS["add"] += 1
    THREADS.append(threading.current_thread().name)
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.aadd")
async def aadd(a: int, b: int = 0) -> int:
    """Add two integers (async)."""
    RUNS["aadd"] += 1
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.IDEMPOTENT, name="shop.refund", requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order (a human approves each refund)."""
    RUNS["refund"] += 1
    return f"refunded {amount} on {order}"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="shop.wipe")
def wipe(target: str) -> str:
    """Wipe a target (offered to the model; the authorizer refuses every call)."""
    RUNS["wipe"] += 1
    return "wiped"


TOOLS = (add, aadd, refund, wipe)


@dataclass
class Governed:
    gateway: Gateway
    sink: MemorySink
    approver: HmacApprover
    context: ExecutionContext = field(
        default_factory=lambda: ExecutionContext(tenant="acme", principal="alice")
    )

    def events(self, context: ExecutionContext | None = None) -> list[tuple[str, str | None, str | None]]:
        """(type, name, status or decision) of every audit event of the run, in order."""
        run = (context or self.context).run_id
        return [
            (record.type, record.name, record.status or record.decision)
            for record in self.sink.records
            if record.trace_id == run
        ]

    def records(self, context: ExecutionContext | None = None) -> list[Any]:
        run = (context or self.context).run_id
        return [record for record in self.sink.records if record.trace_id == run]


def no_wiping(tool: str, operation: str, context: ExecutionContext, arguments: Any, /) -> Decision:
    """The authorizer: ``shop.wipe`` is offered to the model, and refused on every call."""
    return Decision.deny("nobody may wipe") if tool == "shop.wipe" else Decision.allow()


def governed(guardrails: Sequence[Guardrail] = ()) -> Governed:
    """A gateway over `TOOLS` with an audit trail in memory and an HMAC approver."""
    RUNS.clear()
    THREADS.clear()
    sink = MemorySink()
    approver = HmacApprover(SECRET)
    gateway = Gateway.load(
        providers=list(TOOLS),
        discover=False,
        env={},
        governance=Governance(
            audit=AuditTrail(sink), approver=approver, authorizers=[no_wiping], guardrails=guardrails
        ),
    )
    return Governed(gateway, sink, approver)
