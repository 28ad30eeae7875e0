"""pydantic-ai: a governed tool call against the same function as pydantic-ai's own native tool.

Run from the repository root::

    .venv/bin/python bench/bench_pydantic_ai.py                 # the table (about a minute)
    .venv/bin/python bench/bench_pydantic_ai.py --repeat 5 --calls 500 --runs 50   # quicker

This is a measurement script, not a test: nothing in it asserts anything about
time. It measures as real use runs: the garbage collector stays on, every row
reports the **median** of its repeats, the repeats of a group are interleaved
(so a baseline and what is compared with it see the same machine load; the
order alternates from round to round), a ratio is the median of the per-round
ratios, and
nothing is cleared between repeats: the context's trace and the audit trail's
`MemorySink` keep every call they are given, as they would in a process that
runs for a while. Ratios divide by a baseline measured in the same run; targets
are printed for information only.

The tools are the smallest ``def`` and ``async def`` functions::

    def add(a: int, b: int) -> int: return a + b

Native: a pydantic-ai `FunctionToolset([add])` (pydantic-ai validates the
arguments and runs a ``def`` on a worker thread). Governed: the same function as
a ``MEMORY_ONLY`` ``@tool`` in a `Gateway` with an audit trail (STRICT) to memory,
offered through `GovernedToolset` (the gateway validates; a ``def`` runs inline).

Sections:

1. ``await tool_manager.handle_call(ToolCallPart(...))``: pydantic-ai's own path for
   one tool call (validation, hooks, the toolset's ``call_tool``), with a tool
   manager prepared once for a run step, for ``def`` and ``async def``. Target:
   governed within 1.5x of native.
2. ``await agent.run("go", deps=ctx)`` of an `Agent` on a `FunctionModel` that
   asks for one tool call, then answers: the whole run, native tool against
   governed tool. Target: within 1.05x.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.integrations.pydantic_ai import GovernedToolset

CALL_TARGET = 1.5
RUN_TARGET = 1.05


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def aadd(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


governed_add = tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="add")(add)
governed_aadd = tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="aadd")(aadd)


def arguments(*, governed: bool) -> dict[str, Any]:
    return {"a": 1, "b": 2, "purpose": "Sum"} if governed else {"a": 1, "b": 2}


class Row:
    """One measured statement: per-op times of each repeat; the median is reported."""

    def __init__(self, label: str, key: str | None = None) -> None:
        self.label = label
        self.key = key
        self.samples: list[float] = []

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


async def time_async(statement: Callable[[], Awaitable[Any]], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        await statement()
    return (time.perf_counter() - start) / number


async def measure(group: list[tuple[Row, Callable[[], Awaitable[Any]]]], number: int, repeat: int) -> None:
    """Interleaved repeats: every row of the group once per round (the order alternating), GC on."""
    for _, statement in group:  # warm-up: routes compiled, tool managers and caches filled
        await time_async(statement, max(1, number // 10))
    for round_number in range(repeat):
        # Alternate the order: a row never always runs right after the same other row.
        ordered = group if round_number % 2 == 0 else group[::-1]
        for row, statement in ordered:
            row.samples.append(await time_async(statement, number))


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def show(title: str, rows: list[tuple[Row, Row | None, float | None]]) -> list[str]:
    print(f"\n{title}")
    missed = []
    for row, baseline, target in rows:
        line = f"  {row.label:<58} {fmt(row.median)}"
        if row.key:
            line += f"  [{row.key}]"
        if baseline is not None:
            # The median of the per-round ratios: both rows of a round ran under the same load.
            ratio = statistics.median(a / b for a, b in zip(row.samples, baseline.samples, strict=True))
            line += f"  {ratio:5.2f}x {baseline.key}"
            if target is not None:
                status = "met" if ratio <= target else "MISSED"
                line += f"  target <= {target}x  {status}"
                if status == "MISSED":
                    missed.append(f"{row.label.strip()}: {ratio:.2f}x {baseline.key} (target {target}x)")
        print(line)
    return missed


async def section_calls(args: argparse.Namespace, gateways: dict[str, Gateway], ctx: Any) -> list[str]:
    run_context = RunContext(deps=ctx, model=TestModel(), usage=RunUsage())
    shown: list[tuple[Row, Row | None, float | None]] = []
    for name, function, kind, key in (("add", add, "def", "N"), ("aadd", aadd, "async def", "NA")):
        native = await ToolManager(FunctionToolset([function])).for_run_step(run_context)
        governed = await ToolManager(GovernedToolset(gateways[name])).for_run_step(run_context)
        native_call = ToolCallPart(name, arguments(governed=False))
        governed_call = ToolCallPart(name, arguments(governed=True))
        assert await native.handle_call(native_call) == await governed.handle_call(governed_call) == 3
        thread = " (worker thread)" if kind == "def" else ""
        native_row = Row(f"native {kind} tool, handle_call{thread}", key)
        governed_row = Row(f"  governed {kind} tool, handle_call")
        await measure(
            [
                (native_row, lambda call=native_call, manager=native: manager.handle_call(call)),
                (governed_row, lambda call=governed_call, manager=governed: manager.handle_call(call)),
            ],
            args.calls,
            args.repeat,
        )
        shown += [(native_row, None, None), (governed_row, native_row, CALL_TARGET)]
    return show("1. One tool call through pydantic-ai's ToolManager.handle_call", shown)


def one_call_model(name: str, args: dict[str, Any]) -> FunctionModel:
    """Asks for one tool call, then answers with text once the tool's return is in."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart("3")])
        return ModelResponse(parts=[ToolCallPart(name, args)])

    return FunctionModel(respond)


async def section_runs(args: argparse.Namespace, gateways: dict[str, Gateway], ctx: Any) -> list[str]:
    rows: list[tuple[Row, Row | None, float | None]] = []
    missed: list[str] = []
    for name, function in (("add", add), ("aadd", aadd)):
        native_agent: Agent[Any, str] = Agent(
            one_call_model(name, arguments(governed=False)), toolsets=[FunctionToolset([function])]
        )
        governed_agent: Agent[Any, str] = Agent(
            one_call_model(name, arguments(governed=True)), toolsets=[GovernedToolset(gateways[name])]
        )
        for agent in (native_agent, governed_agent):
            result = await agent.run("go", deps=ctx)
            assert result.output == "3"
        kind = "def" if name == "add" else "async def"
        native_row = Row(f"Agent.run, one native {kind} tool call", "R" if name == "add" else "RA")
        governed_row = Row(f"  Agent.run, one governed {kind} tool call")
        await measure(
            [
                (native_row, lambda agent=native_agent: agent.run("go", deps=ctx)),
                (governed_row, lambda agent=governed_agent: agent.run("go", deps=ctx)),
            ],
            args.runs,
            args.repeat,
        )
        rows += [(native_row, None, None), (governed_row, native_row, RUN_TARGET)]
    missed += show("2. A whole Agent.run on a FunctionModel with one tool call", rows)
    return missed


async def main(args: argparse.Namespace) -> int:
    # One gateway per tool, as the native side has one FunctionToolset per tool: each agent is
    # offered exactly one tool.
    sinks = {"add": MemorySink(), "aadd": MemorySink()}
    gateways = {
        name: Gateway.load(
            providers=[function], discover=False, env={}, governance=Governance(audit=AuditTrail(sinks[name]))
        )
        for name, function in (("add", governed_add), ("aadd", governed_aadd))
    }
    ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    print(
        f"median of {args.repeat} interleaved rounds (ratios: of the per-round ratios), GC on, "
        "trace and audit sink retained"
    )
    missed = await section_calls(args, gateways, ctx)
    missed += await section_runs(args, gateways, ctx)
    events = sum(len(sink.records) for sink in sinks.values())
    print(f"\nretained: {len(ctx.trace)} trace records, {events} audit events")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if missed:
        print("\nMissed targets:")
        for line in missed:
            print(f"  {line}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=25, help="interleaved rounds (default 25)")
    p.add_argument("--calls", type=int, default=2000, help="handle_call statements per repeat")
    p.add_argument("--runs", type=int, default=40, help="Agent.run statements per round")
    return p


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parser().parse_args())))
