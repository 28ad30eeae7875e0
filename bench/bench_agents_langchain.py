"""Governed calls through the OpenAI Agents SDK and LangChain adapters against each framework's native tool.

Run from the repository root::

    .venv/bin/python bench/bench_agents_langchain.py             # the table (about 60 s)
    .venv/bin/python bench/bench_agents_langchain.py --retain 0  # without the retained history

This is a measurement script, not a test: nothing in it asserts anything about
time. It measures as real use runs: the garbage collector stays on, every
governed call's record stays in its context's trace and its audit events in the
`MemorySink` (``--retain`` calls are made and kept before timing, and every timed
call is kept too), and the rows of a section take turns, ``--calls`` calls each
per repeat. A row reports the median time per call over ``--repeat`` repeats;
its ratio is the median of its per-repeat ratios to its baseline (measured back
to back, under the same load).

The function is the same everywhere: ``add(a: int, b: int) -> int`` as a ``def``
and as an ``async def``. Natively it is the framework's own tool
(``agents.function_tool``, ``langchain_core.tools.StructuredTool.from_function``);
governed it is a toolbox ``@tool`` (``MEMORY_ONLY``, ``READ_ONLY``) behind an
audited gateway (STRICT to memory), offered by `GovernedAgentTools` /
`GovernedLangChainTools`. Each call is what the framework makes when a model
calls the tool: ``on_invoke_tool(ToolContext, arguments_json)`` for the Agents
SDK, ``tool.invoke(tool_call)`` / ``tool.ainvoke(tool_call)`` for LangChain.

Target (issue 12): each governed call within 1.5x of the native call of the same
framework, for ``def`` and ``async def``. The frameworks run a native ``def``
tool on a worker thread from their async paths; the governed ``MEMORY_ONLY``
tool runs inline, which is why those ratios can fall below 1.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents import function_tool
from agents.tool_context import ToolContext
from langchain_core.tools import StructuredTool

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.integrations.langchain import CONTEXT_KEY, GovernedLangChainTools
from toolbox.integrations.openai_agents import GovernedAgentTools

TARGET = 1.5


def add_plain(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def aadd_plain(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="add")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="aadd")
async def aadd(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@dataclass
class Row:
    label: str
    call: Callable[[], Any]
    """One call: a function, or a coroutine function (awaited)."""
    baseline: str | None = None
    key: str | None = None
    is_async: bool = False
    times: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


@dataclass
class Governed:
    """One audited gateway and context per governed row, so each row keeps its own history."""

    gateway: Gateway
    sink: MemorySink
    context: ExecutionContext


def governed() -> Governed:
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[add, aadd], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    # Unbounded trace (the default keeps the newest 10,000 records): every call kept, as checked at the end.
    context = ExecutionContext(tenant="bench-tenant", principal="bench-principal", trace_retention=None)
    return Governed(gateway, sink, context)


ARGS = '{"a": 1, "b": 2}'
GOVERNED_ARGS = '{"a": 1, "b": 2, "purpose": "Sum"}'


def agents_rows() -> tuple[list[Row], list[Governed]]:
    native_def = function_tool(add_plain)
    native_async = function_tool(aadd_plain)
    context = ToolContext(None, tool_name="add_plain", tool_call_id="call_1", tool_arguments=ARGS)
    rows = [
        Row(
            "native def (agents.function_tool; the SDK runs it on a thread)",
            lambda: native_def.on_invoke_tool(context, ARGS),
            key="OD",
        ),
        Row("native async def", lambda: native_async.on_invoke_tool(context, ARGS), key="OA"),
    ]
    made = []
    for name, baseline in (("add", "OD"), ("aadd", "OA")):
        g = governed()
        made.append(g)
        function = next(t for t in GovernedAgentTools(g.gateway).tools if t.name == name)
        ctx = ToolContext(g.context, tool_name=name, tool_call_id="call_1", tool_arguments=GOVERNED_ARGS)
        kind = "def" if name == "add" else "async def"
        rows.append(
            Row(
                f"governed {kind} (GovernedAgentTools, audited)",
                lambda f=function, c=ctx: f.on_invoke_tool(c, GOVERNED_ARGS),  # type: ignore[attr-defined]
                baseline=baseline,
            )
        )
    return rows, made


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": arguments, "id": "call_1", "type": "tool_call"}


def langchain_rows() -> tuple[list[Row], list[Row], list[Governed]]:
    native_def = StructuredTool.from_function(add_plain)
    native_async = StructuredTool.from_function(coroutine=aadd_plain, name="aadd_plain", description="Add.")
    plain = {"a": 1, "b": 2}
    governed_args = {"a": 1, "b": 2, "purpose": "Sum"}
    made = []
    tools = {}
    for name in ("add", "aadd"):
        g = governed()
        made.append(g)
        config = {"configurable": {CONTEXT_KEY: g.context}}
        tools[name] = (next(t for t in GovernedLangChainTools(g.gateway).tools if t.name == name), config)
    (gdef, cdef), (gasync, casync) = tools["add"], tools["aadd"]
    native_config: Any = {"configurable": {}}
    sync_rows = [
        Row(
            "native def, tool.invoke(call)",
            lambda: native_def.invoke(tool_call("add_plain", plain), native_config),
            key="LD",
        ),
        Row(
            "governed def, tool.invoke(call) (GovernedLangChainTools, audited)",
            lambda: gdef.invoke(tool_call("add", governed_args), cdef),
            baseline="LD",
        ),
    ]
    async_rows = [
        Row(
            "native def, await tool.ainvoke(call) (LangChain runs it on a thread)",
            lambda: native_def.ainvoke(tool_call("add_plain", plain), native_config),
            key="LDA",
        ),
        Row(
            "native async def, await tool.ainvoke(call)",
            lambda: native_async.ainvoke(tool_call("aadd_plain", plain), native_config),
            key="LA",
        ),
        Row(
            "governed def, await tool.ainvoke(call) (inline, audited)",
            lambda: gdef.ainvoke(tool_call("add", governed_args), cdef),
            baseline="LDA",
        ),
        Row(
            "governed async def, await tool.ainvoke(call) (audited)",
            lambda: gasync.ainvoke(tool_call("aadd", governed_args), casync),
            baseline="LA",
        ),
    ]
    return sync_rows, async_rows, made


def content(answer: Any) -> str:
    return str(getattr(answer, "content", answer))


async def arun_rows(rows: list[Row], *, calls: int, repeat: int, retain: int) -> None:
    """Check each row's answer, make the governed rows' retained calls, then time interleaved repeats."""
    for row in rows:
        first = row.call()
        row.is_async = isinstance(first, Awaitable)
        answer = await first if isinstance(first, Awaitable) else first
        if content(answer) != "3":
            raise SystemExit(f"sanity check failed for {row.label!r}: {content(answer)!r}")
        if row.baseline is not None:
            for _ in range(retain):
                made = row.call()
                if row.is_async:
                    await made
    for _ in range(repeat):
        for row in rows:
            call = row.call
            start = time.perf_counter()
            if row.is_async:
                for _ in range(calls):
                    await call()
            else:
                for _ in range(calls):
                    call()
            row.times.append((time.perf_counter() - start) / calls)


def ratios(rows: list[Row]) -> None:
    by_key = {row.key: row for row in rows if row.key}
    for row in rows:
        if row.baseline is not None:
            base = by_key[row.baseline]
            row.ratios = [mine / theirs for mine, theirs in zip(row.times, base.times, strict=True)]


def show(title: str, rows: list[Row], missed: list[str]) -> None:
    print()
    print(title)
    for row in rows:
        median = statistics.median(row.times) * 1e6
        spread = f"{min(row.times) * 1e6:.1f}-{max(row.times) * 1e6:.1f}"
        if row.key:
            print(f"  [{row.key}] {row.label:<72} {median:8.1f} us  ({spread})")
            continue
        ratio = statistics.median(row.ratios)
        status = "met" if ratio <= TARGET else "MISSED"
        if status == "MISSED":
            missed.append(f"{title}: {row.label} {ratio:.2f}x {row.baseline}")
        print(
            f"       {row.label:<72} {median:8.1f} us  ({spread})  {ratio:5.2f}x {row.baseline}"
            f"  target <= {TARGET}x  {status}"
        )


def check_retained(made: list[Governed], expected_calls: int) -> None:
    for g in made:
        responses = sum(1 for r in g.sink.records if r.type == "INVOCATION_RESPONSE")
        if len(g.context.trace) < expected_calls or responses < expected_calls:
            raise SystemExit(f"history not retained: {len(g.context.trace)} records, {responses} responses")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per row per repeat (default 2000)")
    parser.add_argument("--repeat", type=int, default=7, help="repeats, median kept (default 7)")
    parser.add_argument(
        "--retain", type=int, default=20000, help="governed calls made and kept before timing (default 20000)"
    )
    options = parser.parse_args()
    gc.enable()
    print(
        f"python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}, collector on, "
        f"{options.retain} calls retained per governed row, "
        f"{options.calls} calls x {options.repeat} repeats, medians"
    )
    missed: list[str] = []

    agents, agents_made = agents_rows()
    asyncio.run(arun_rows(agents, calls=options.calls, repeat=options.repeat, retain=options.retain))
    ratios(agents)
    show("1. OpenAI Agents SDK: await tool.on_invoke_tool(ToolContext, arguments_json)", agents, missed)

    sync_rows, async_rows, lc_made = langchain_rows()
    asyncio.run(arun_rows(sync_rows, calls=options.calls, repeat=options.repeat, retain=options.retain))
    ratios(sync_rows)
    show("2. LangChain, sync: tool.invoke(tool_call) -> ToolMessage", sync_rows, missed)
    asyncio.run(arun_rows(async_rows, calls=options.calls, repeat=options.repeat, retain=options.retain))
    ratios(async_rows)
    show("3. LangChain, async: await tool.ainvoke(tool_call) -> ToolMessage", async_rows, missed)

    expected = options.retain + 1 + options.calls * options.repeat
    check_retained([*agents_made, *lc_made], expected)
    print()
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if missed:
        print("missed targets:")
        for line in missed:
            print(f"  {line}")
    print(json.dumps({"missed": len(missed)}))


if __name__ == "__main__":
    main()
