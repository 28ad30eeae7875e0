"""A world of the conformance matrix: one tool style on one state store, governed for every promise.

One governance covers every promise at once, so a world (and the servers a
door starts over it) is built once and every promise runs in it:

- the policy allows the style's tools but ``vault`` (default deny); ``guarded``
  needs an acknowledgement nobody gave;
- an authorizer refuses ``item == "forbidden"``, a guardrail ``item == "blocked"`` (the item where
  the style puts it: `Style.item`);
- ``pay`` needs a human approval (the descriptor's), granted by `APPROVER`;
- a shared budget of 2 calls per principal on the ``read`` tool, a rate limit
  of 2 calls per principal a minute on ``ping``, the kill switches and the
  approvals live in the store (memory, SQLite, PostgreSQL or Redis);
- a STRICT audit trail whose sink can be made to fail (`World.audit_down`); its sink
  offers an awaitable append, as the SQL sinks do, so the async doors await its writes
  (`AwaitedSink`) and the sync doors write on the calling thread.

Every promise check takes fresh principals (`World.context`): the shared limits
count per principal, so checks never spend each other's quotas.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from audit_faults import FlakySink
from conformance.styles import Style
from state_support import state_store
from toolbox import ExecutionContext, Gateway, Governance
from toolbox.audit import AuditMode, AuditTrail
from toolbox.governance import Decision, Guardrail, GuardrailAction, HmacApprover
from toolbox.pipeline.checks._shared_limits import LimitRule
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryKillSwitchStore, MemoryLimitStore

T = TypeVar("T")
APPROVER = HmacApprover(b"conformance-matrix-approval-key!")
TENANT = "acme"
PRINCIPALS = 400


class AwaitedSink(FlakySink):
    """`FlakySink` with an awaitable append that suspends before it writes (or fails), as the SQL
    sinks' does: a STRICT trail over it awaits its writes on the async doors."""

    async def aappend(self, events: Any) -> None:
        await asyncio.sleep(0)
        self.append(events)


@dataclass
class World:
    """A style's tools on a store, governed; what the doors call into."""

    style: Style
    store_kind: str
    directory: Path
    gateway: Gateway
    governance: Callable[[], Governance]
    sink: AwaitedSink
    state: GovernanceState
    authorized: list[str] = field(default_factory=list)
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    _next: Iterator[int] = field(default_factory=itertools.count)
    #: extra per-door resources (servers, apps), closed with the world
    closers: list[Callable[[], None]] = field(default_factory=list)

    _loop: asyncio.AbstractEventLoop | None = None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` on this world's event loop (one for every async door's calls).

        One loop, as an application has: a remote MCP tool keeps one session per caller loop, so a
        new loop per call would start a new server process per call.
        """
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="conformance-loop", daemon=True)
            thread.start()
            self._loop = loop

            def stop() -> None:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(30)
                loop.close()

            self.closers.insert(0, stop)  # closed last: the gateway's sessions close on it first
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=120)

    @property
    def principals(self) -> list[str]:
        """The principals checks may act as (the service's key file names them all)."""
        return [f"p{index}-{self.suffix}" for index in range(PRINCIPALS)]

    def context(self, **fields: Any) -> ExecutionContext:
        """A fresh principal's context: its own shared-limit quotas."""
        index = next(self._next)
        assert index < PRINCIPALS, "more checks than principals: raise PRINCIPALS"
        return ExecutionContext(tenant=TENANT, principal=self.principals[index], **fields)

    @contextmanager
    def audit_down(self) -> Iterator[None]:
        """The audit store fails every write meanwhile."""
        self.sink.failing = True
        try:
            yield
        finally:
            self.sink.failing = False

    @property
    def kill(self) -> Any:
        return self.state.kill

    @property
    def approvals(self) -> Any:
        return self.state.approvals

    def audit_text(self) -> str:
        """Every stored audit event, as text (for the never-shown checks)."""
        return " ".join(repr(record.model_dump()) for record in self.sink.records)

    def events(self, reason_code: str) -> list[Any]:
        """Stored events with ``reason_code``."""
        return [record for record in self.sink.records if record.reason_code == reason_code]

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.gateway.close()
        self.style.close()


def _deny_forbidden(
    world_calls: list[str], item: Callable[[Mapping[str, Any]], object]
) -> Callable[[str, str, ExecutionContext, Mapping[str, Any]], Decision]:
    def authorize(
        tool: str, operation: str, context: ExecutionContext, arguments: Mapping[str, Any], /
    ) -> Decision:
        world_calls.append(f"{tool}.{operation}")
        if item(arguments) == "forbidden":
            return Decision.deny("items marked forbidden are refused", policies=("no-forbidden",))
        return Decision.allow()

    return authorize


@contextmanager
def world(style: Style, store_kind: str, directory: Path) -> Iterator[World]:
    """The world of ``style`` on a fresh store of ``store_kind``."""
    with state_store(store_kind, directory) as store:
        limits = store if store is not None else MemoryLimitStore()
        approvals = store if store is not None else MemoryApprovalStore()
        kill = store if store is not None else MemoryKillSwitchStore()
        state = GovernanceState(
            backend=store_kind,
            kill=kill,
            limits=limits,
            approvals=approvals,
            kill_switch_refresh=0.0,
            budgets=(LimitRule("principal", 2, 600.0, style.tool("read")),),
            rate_limits=(LimitRule("principal", 2, 600.0, style.tool("ping")),),
        )
        sink = AwaitedSink()
        authorized: list[str] = []

        def governance() -> Governance:
            return Governance(
                audit=AuditTrail(sink, mode=AuditMode.STRICT, fallback_path=None),  # type: ignore[arg-type]
                approver=APPROVER,
                authorizers=[_deny_forbidden(authorized, style.item)],
                guardrails=[
                    Guardrail(
                        id="BLOCKED", action=GuardrailAction.DENY, when=lambda a: style.item(a) == "blocked"
                    )
                ],
                state=state,
            )

        gateway = Gateway.load(
            policy=style.policy,
            providers=style.providers,
            discover=False,
            env=style.env,
            governance=governance(),
        )
        assert gateway.audit is not None and gateway.audit.awaits_writes  # the async doors await it
        made = World(style, store_kind, directory, gateway, governance, sink, state, authorized)
        try:
            yield made
        finally:
            made.close()
