"""Micro-benchmarks of toolbox's core paths, each against a baseline measured in the same run.

Run from the repository root::

    .venv/bin/python bench/bench_core.py              # the table (about 30-40 s)
    .venv/bin/python bench/bench_core.py --profile    # then cProfile the governed path and discovery

This is a measurement script, not a test: nothing in it asserts anything about
time. Each row is timed with ``timeit.Timer`` (string statements compiled into
timeit's loop, garbage collector off): N is chosen automatically so that one
repeat lasts about ``--min-time`` seconds, there are 7 repeats, and the row
reports the minimum time per operation. The repeats of the rows of one group
(a baseline and what is compared with it) are interleaved, so both see the
same machine load; the ratio divides a row's time by its baseline's. Targets
are printed next to the ratios for information only.

Sections:

1. ``Tools.load`` discovery with 1 and 100 installed fake provider
   distributions against a bare ``importlib.metadata.entry_points`` scan.
2. ``tools.get(CalculatorTool)`` / ``tools.get("calculator")`` against a plain
   dict lookup of a type key.
3. A full ``MEMORY_ONLY`` typed call through the intent phase against a bare
   call and a pydantic-validated call; the calculator against a bare
   ``evaluate_expression``; ``await ready.aexecute()`` against an ``async def``
   bare call, inside one event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import cProfile
import gc
import importlib
import importlib.metadata
import io
import os
import pstats
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import importlib_metadata
import pydantic
from pydantic import BaseModel

import toolbox.registry._calculator
import toolbox.registry._entry_points
from toolbox import (
    CalculatorTool,
    Effect,
    ExecutionContext,
    OperationDescriptor,
    ReadIntent,
    RiskClass,
    ToolDescriptor,
    ToolPolicy,
    ToolProvider,
    ToolRuntime,
    Tools,
)
from toolbox.registry._calculator import evaluate_expression

REPO = Path(__file__).resolve().parents[1]
GROUP = "toolbox.providers"
FAKE_MODULE_PREFIX = "bench_fake_provider_"
FAKE_TOOL_PREFIX = "bench-fake-"
PURPOSE = "Add two numbers for the benchmark"
CALC_PURPOSE = "Evaluate an expression for the benchmark"
TARGET_RATIO = 3.0

FAKE_PROVIDER_SOURCE = """\
from toolbox import hookimpl
from toolbox.testing import fake_provider


@hookimpl
def toolbox_providers():
    return [fake_provider("{tool}")]
"""


# -- timing ----------------------------------------------------------------------------


@dataclass
class Measurement:
    label: str
    number: int
    per_op: float
    """Minimum over the repeats of (repeat time / number), in seconds."""


@dataclass
class Spec:
    """One row to time: ``stmt`` run in ``namespace``, after ``setup`` at each repeat."""

    label: str
    stmt: str
    namespace: dict[str, Any]
    setup: Callable[[], object] | None = None


def _choose_number(elapsed_for: Callable[[int], float], min_time: float) -> int:
    """N such that one repeat lasts about ``min_time`` seconds.

    Like ``timeit.Timer.autorange``, but calibrated rather than stepped to keep the
    run short: grow N tenfold until a repeat takes a tenth of ``min_time``, then
    scale N to ``min_time`` (two significant digits).
    """
    number = 1
    while True:
        elapsed = elapsed_for(number)
        if elapsed >= min_time / 10 or number >= 10**9:
            break
        number *= 10
    if elapsed >= min_time:
        return number
    wanted = min_time / (elapsed / number) if elapsed > 0 else number * 10.0
    return max(number, int(float(f"{wanted:.2g}")))


def measure_group(specs: Sequence[Spec], *, repeat: int, min_time: float) -> list[Measurement]:
    """``timeit.Timer(stmt, setup, globals=ns)`` per spec, N auto-chosen, ``repeat`` interleaved repeats.

    Each repeat is ``Timer.repeat(repeat=1, number=N)``; the rows take turns so a
    baseline and its comparison are sampled under the same conditions.
    """
    timers = [timeit.Timer(s.stmt, s.setup or "pass", globals=s.namespace) for s in specs]
    numbers = [_choose_number(t.timeit, min_time) for t in timers]
    samples: list[list[float]] = [[] for _ in specs]
    for _ in range(repeat):
        for timer, number, times in zip(timers, numbers, samples, strict=True):
            times.extend(timer.repeat(repeat=1, number=number))
    return [
        Measurement(s.label, n, min(times) / n) for s, n, times in zip(specs, numbers, samples, strict=True)
    ]


_ASYNC_TEMPLATE = """
async def _inner(_it, _timer):
    _t0 = _timer()
    for _i in _it:
        {stmt}
    _t1 = _timer()
    return _t1 - _t0
"""


def _async_runner(spec: Spec) -> Callable[[int], Awaitable[float]]:
    """timeit's loop compiled as an ``async def``: the statement may ``await``.

    Names resolve in the spec's namespace, the clock is ``time.perf_counter`` and the
    garbage collector is off while timing, exactly as in ``timeit``.
    """
    code = compile(_ASYNC_TEMPLATE.format(stmt=spec.stmt), f"<async {spec.label}>", "exec")
    scope: dict[str, Any] = {}
    exec(code, spec.namespace, scope)
    inner = scope["_inner"]

    async def run(number: int) -> float:
        if spec.setup is not None:
            spec.setup()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return float(await inner(range(number), time.perf_counter))
        finally:
            if gc_was_enabled:
                gc.enable()

    return run


async def ameasure_group(specs: Sequence[Spec], *, repeat: int, min_time: float) -> list[Measurement]:
    """`measure_group` for statements that ``await``, inside the running event loop."""
    runners = [_async_runner(s) for s in specs]
    numbers = []
    for run in runners:
        # _choose_number needs a synchronous callable; calibrate with the same steps here.
        number = 1
        while True:
            elapsed = await run(number)
            if elapsed >= min_time / 10 or number >= 10**9:
                break
            number *= 10
        if elapsed < min_time:
            wanted = min_time / (elapsed / number) if elapsed > 0 else number * 10.0
            number = max(number, int(float(f"{wanted:.2g}")))
        numbers.append(number)
    samples: list[list[float]] = [[] for _ in specs]
    for _ in range(repeat):
        for run, number, times in zip(runners, numbers, samples, strict=True):
            times.append(await run(number))
    return [
        Measurement(s.label, n, min(times) / n) for s, n, times in zip(specs, numbers, samples, strict=True)
    ]


# -- output ------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:8.2f} us"
    return f"{seconds * 1e9:8.1f} ns"


class Table:
    """Baselines (shown with their key) and measurements with a ratio to a baseline."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._baselines: dict[str, Measurement] = {}
        self.missed: list[str] = []

    def section(self, title: str) -> None:
        self.lines.append("")
        self.lines.append(title)

    def baseline(self, key: str, m: Measurement) -> None:
        self._baselines[key] = m
        self._row(f"[{key}]", m, "baseline", "", "")

    def measured(
        self,
        m: Measurement,
        against: str,
        target: float | None = None,
        *,
        label: str | None = None,
        ratio: float | None = None,
    ) -> None:
        """A row and its ratio to baseline ``against`` (``ratio`` when given, else per op / per op)."""
        if ratio is None:
            ratio = m.per_op / self._baselines[against].per_op
        shown = m if label is None else Measurement(label, m.number, m.per_op)
        ratio_text = f"{ratio:7.2f}x {against}"
        if target is None:
            self._row("", shown, ratio_text, "-", "(info)")
            return
        status = "met" if ratio <= target else "MISSED"
        if status == "MISSED":
            self.missed.append(f"{m.label.strip()} vs [{against}]: {ratio:.2f}x > {target:g}x")
        self._row("", shown, ratio_text, f"<= {target:g}x", status)

    def note(self, text: str) -> None:
        self.lines.append(f"         note: {text}")

    def _row(self, key: str, m: Measurement, ratio: str, target: str, status: str) -> None:
        line = (
            f"  {key:<6} {m.label:<66} {m.number:>9} {fmt_time(m.per_op)}  {ratio:<13} {target:<7} {status}"
        )
        self.lines.append(line.rstrip())

    @staticmethod
    def header() -> str:
        columns = f"{'measurement':<66} {'N/repeat':>9} {'per op':>11}  {'ratio':<13} {'target':<7} status"
        head = f"  {'key':<6} {columns}"
        return head + "\n  " + "-" * (len(head) - 2)


# -- section 1: discovery ----------------------------------------------------------------


def _load_distributions_helper() -> ModuleType:
    """Import tests/toolbox_test_support/distributions.py without leaving tests/ on sys.path."""
    tests_dir = str(REPO / "tests")
    sys.path.insert(0, tests_dir)
    try:
        return importlib.import_module("toolbox_test_support.distributions")
    finally:
        sys.path.remove(tests_dir)
        sys.path_importer_cache.pop(tests_dir, None)


def write_fake_distributions(root: Path, count: int) -> list[str]:
    """``count`` distributions in ``root``, each with one entry point providing one fake tool.

    The modules are byte-compiled as an installer would (this matters when
    ``PYTHONDONTWRITEBYTECODE`` is set): every load then reads ``.pyc`` files.
    """
    helper = _load_distributions_helper()
    names = []
    for i in range(count):
        module = f"{FAKE_MODULE_PREFIX}{i:03d}"
        tool = f"{FAKE_TOOL_PREFIX}{i:03d}"
        helper.write_distribution(
            root,
            f"bench-fake-provider-{i:03d}",
            {module: FAKE_PROVIDER_SOURCE.format(tool=tool)},
            {f"fake{i:03d}": module},
            group=GROUP,
        )
        names.append(tool)
    compileall.compile_dir(root, quiet=1)
    return names


def reset_import_state() -> None:
    """Forget the fake provider modules and the import and metadata caches, so the next load re-imports.

    Clears the path finders' caches (``importlib.invalidate_caches``, which also
    clears ``importlib_metadata``'s, whose finder is on ``sys.meta_path``), the
    standard library ``importlib.metadata`` path cache and the listing discovery keeps
    (`toolbox.registry._entry_points`).
    """
    for name in [n for n in sys.modules if n.startswith(FAKE_MODULE_PREFIX)]:
        del sys.modules[name]
    importlib.invalidate_caches()
    # Called on an instance: on Python 3.11 this method lacks its @classmethod decorator.
    importlib.metadata.MetadataPathFinder().invalidate_caches()
    toolbox.registry._entry_points.clear()


@contextmanager
def on_sys_path(root: Path) -> Iterator[None]:
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path.remove(str(root))
        sys.path_importer_cache.pop(str(root), None)
        reset_import_state()


def bench_discovery(table: Table, *, repeat: int, min_time: float) -> None:
    table.section(
        "1. Discovery: Tools.load(ctx, env={}, policy=ToolPolicy.standard()) with N installed fake "
        "provider distributions"
    )
    table.note(
        "each op (baselines too) first drops the fake modules from sys.modules and clears the "
        "import/metadata caches,"
    )
    table.note("so every load re-scans sys.path and re-imports each provider module (from its .pyc)")
    ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
    policy = ToolPolicy.standard()
    others: set[tuple[str, str]] = set()
    for count in (1, 100):
        with tempfile.TemporaryDirectory(prefix="toolbox-bench-") as tmp:
            root = Path(tmp)
            expected = set(write_fake_distributions(root, count))
            with on_sys_path(root):
                ns: dict[str, Any] = {
                    "Tools": Tools,
                    "ctx": ctx,
                    "policy": policy,
                    "reset": reset_import_state,
                    "stdlib_entry_points": importlib.metadata.entry_points,
                    "backport_entry_points": importlib_metadata.entry_points,
                    "GROUP": GROUP,
                }
                # Sanity check (not timing): one load finds every fake tool and breaks nothing.
                reset_import_state()
                tools = Tools.load(ctx, env={}, policy=policy)
                found = {d.name for d in tools.descriptors()}
                missing = expected - found
                if missing or tools.broken_providers:
                    raise SystemExit(
                        f"discovery sanity check failed: missing {sorted(missing)[:5]}, "
                        f"broken {tools.broken_providers[:3]}"
                    )
                others |= {
                    (d.name, tools.distribution_of(d.name) or "?")
                    for d in tools.descriptors()
                    if not d.name.startswith(FAKE_TOOL_PREFIX)
                }
                n_eps = len(importlib.metadata.entry_points(group=GROUP))
                scan, backport, load = measure_group(
                    [
                        Spec(
                            f"importlib.metadata.entry_points(group=...), {count} fake dist(s)",
                            "reset(); stdlib_entry_points(group=GROUP)",
                            ns,
                        ),
                        Spec(
                            "  the same scan with importlib_metadata (the backport toolbox uses)",
                            "reset(); backport_entry_points(group=GROUP)",
                            ns,
                        ),
                        Spec(
                            f"Tools.load, {count} fake dist(s) ({n_eps} entry points in the group)",
                            "reset(); Tools.load(ctx, env={}, policy=policy)",
                            ns,
                        ),
                    ],
                    repeat=repeat,
                    min_time=min_time,
                )
                key = f"D{count}"
                table.baseline(key, scan)
                table.measured(backport, key)
                table.measured(load, key)
    listed = ", ".join(f"{name} (from {dist})" for name, dist in sorted(others)) or "none"
    table.note("besides the fake tools, every Tools.load round also discovered and loaded the tools of")
    table.note(f"this virtualenv's installed provider distributions: {listed}")


# -- the trivial MEMORY_ONLY tool -----------------------------------------------------------


def add(a: int, b: int) -> int:
    return a + b


async def add_async(a: int, b: int) -> int:
    return a + b


class AddArgs(BaseModel):
    a: int
    b: int


ADDER = ToolDescriptor(
    name="bench-adder",
    version="1.0",
    summary="Adds two ints (benchmark tool).",
    risk=RiskClass.MEMORY_ONLY,
    operations=(OperationDescriptor(name="add", effect=Effect.READ_ONLY, summary="a + b"),),
)


class AdderTool:
    """A tiny MEMORY_ONLY tool: ``add(a, b)`` is a READ_ONLY operation."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def add(self, a: int, b: int) -> ReadIntent[int]:
        return self._runtime.read_intent("add", lambda: add(a, b))


ADDER_PROVIDER = ToolProvider(tool_type=AdderTool, descriptor=ADDER)


def governed_namespace() -> tuple[dict[str, Any], Callable[[], None]]:
    """A namespace with a primed ``tools``, and a setup that swaps in a fresh one.

    Every intent appends a record to its context's trace; the setup (run before each
    timeit repeat) builds a new context and `Tools` so the trace does not grow across
    repeats. Explicit providers only: no discovery cost.
    """
    ns: dict[str, Any] = {
        "AdderTool": AdderTool,
        "CalculatorTool": CalculatorTool,
        "AddArgs": AddArgs,
        "add": add,
        "add_async": add_async,
        "evaluate_expression": evaluate_expression,
        "PURPOSE": PURPOSE,
        "CALC_PURPOSE": CALC_PURPOSE,
    }

    def fresh() -> None:
        ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
        tools = Tools.load(
            ctx,
            env={},
            policy=ToolPolicy.standard(),
            providers=[ADDER_PROVIDER, toolbox.registry._calculator],
            discover=False,
        )
        # The first get() builds the instance; prime it so the loops time the cached path.
        adder = tools.get(AdderTool)
        calculator = tools.get(CalculatorTool)
        ns["tools"] = tools
        ns["adder"] = adder
        ns["by_type"] = {AdderTool: adder, CalculatorTool: calculator}

    fresh()
    return ns, fresh


# -- section 2: get ----------------------------------------------------------------------


def bench_get(table: Table, *, repeat: int, min_time: float) -> None:
    table.section("2. Lookup: tools.get(...) of an allowed, already-built tool")
    ns, fresh = governed_namespace()
    plain, by_type, by_name, method = measure_group(
        [
            Spec("plain dict lookup: by_type[CalculatorTool]", "by_type[CalculatorTool]", ns),
            Spec("tools.get(CalculatorTool)", "tools.get(CalculatorTool)", ns, fresh),
            Spec('tools.get("calculator")', 'tools.get("calculator")', ns, fresh),
            Spec("  floor of any method API: by_type.get(CalculatorTool)", "by_type.get(CalculatorTool)", ns),
        ],
        repeat=repeat,
        min_time=min_time,
    )
    table.baseline("G", plain)
    table.measured(by_type, "G", TARGET_RATIO)
    table.measured(by_name, "G", TARGET_RATIO)
    table.measured(method, "G")


# -- section 3: calls ----------------------------------------------------------------------

PYDANTIC_STMT = 'm = AddArgs.model_validate({"a": 1, "b": 2}); add(m.a, m.b)'
GOVERNED_STMT = "tools.get(AdderTool).add(1, 2).purpose(PURPOSE).execute()"
AGOVERNED_STMT = "await tools.get(AdderTool).add(1, 2).purpose(PURPOSE).aexecute()"
CALC_STMT = 'tools.get(CalculatorTool).evaluate("2+3*4").purpose(CALC_PURPOSE).execute()'


def bench_calls(table: Table, *, repeat: int, min_time: float) -> None:
    ns, fresh = governed_namespace()
    if eval(GOVERNED_STMT, ns) != 3 or eval(CALC_STMT, ns) != 14:
        raise SystemExit("sanity check failed: a governed call returned a wrong result")
    kw: dict[str, Any] = {"repeat": repeat, "min_time": min_time}

    table.section(f"3a. Typed MEMORY_ONLY call: {GOVERNED_STMT}")
    bare, pyd, full, op, ready, executed = measure_group(
        [
            Spec("bare call: add(1, 2)", "add(1, 2)", ns),
            Spec("pydantic: m = AddArgs.model_validate({...}); add(m.a, m.b)", PYDANTIC_STMT, ns),
            Spec("governed: get(AdderTool).add(1, 2).purpose(...).execute()", GOVERNED_STMT, ns, fresh),
            Spec("  adder.add(1, 2)                  (-> ReadIntent)", "adder.add(1, 2)", ns, fresh),
            Spec(
                "  adder.add(1, 2).purpose(...)     (-> Ready)", "adder.add(1, 2).purpose(PURPOSE)", ns, fresh
            ),
            Spec(
                "  adder.add(1, 2).purpose(...).execute()",
                "adder.add(1, 2).purpose(PURPOSE).execute()",
                ns,
                fresh,
            ),
        ],
        **kw,
    )
    table.baseline("A", bare)
    table.baseline("P", pyd)
    table.measured(full, "A")
    table.measured(full, "P", TARGET_RATIO, label="  the same governed call, against the pydantic baseline")
    table.note("breakdown: prefixes of the chain on the bound tool instance (cumulative, get() excluded)")
    for m in (op, ready, executed):
        table.measured(m, "A")

    table.section(f"3b. Calculator: {CALC_STMT}")
    calc_bare, calc_gov = measure_group(
        [
            Spec('bare: evaluate_expression("2+3*4")', 'evaluate_expression("2+3*4")', ns),
            Spec('governed: get(CalculatorTool).evaluate("2+3*4")...execute()', CALC_STMT, ns, fresh),
        ],
        **kw,
    )
    table.baseline("C", calc_bare)
    table.measured(calc_gov, "C", TARGET_RATIO)

    table.section(f"3c. Async, inside one event loop: {AGOVERNED_STMT}")

    async def run_async() -> list[Measurement]:
        return await ameasure_group(
            [
                Spec("bare: await add_async(1, 2)", "await add_async(1, 2)", ns),
                Spec("pydantic: the same statement as [P], in the async loop", PYDANTIC_STMT, ns),
                Spec(
                    "governed: await get(AdderTool).add(1, 2).purpose(...).aexecute()",
                    AGOVERNED_STMT,
                    ns,
                    fresh,
                ),
            ],
            **kw,
        )

    abare, apyd, agov = asyncio.run(run_async())
    table.baseline("AA", abare)
    table.baseline("AP", apyd)
    table.measured(agov, "AA")
    table.measured(agov, "AP", TARGET_RATIO, label="  the same governed call, against the pydantic baseline")
    table.note(
        "timeit's loop compiled as an async def and awaited in one asyncio.run(); MEMORY_ONLY runs inline"
    )


# -- profile ---------------------------------------------------------------------------------


def _stats(profiler: cProfile.Profile, limit: int) -> str:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(limit)
    return out.getvalue()


def profile_governed(calls: int = 200_000) -> str:
    """cProfile ``calls`` governed adder calls and a tenth as many calculator calls."""
    ns, fresh = governed_namespace()
    code = compile(
        f"for _ in range({calls}):\n    {GOVERNED_STMT}\nfor _ in range({calls // 10}):\n    {CALC_STMT}\n",
        "<governed>",
        "exec",
    )
    fresh()
    profiler = cProfile.Profile()
    profiler.runctx(code, ns, {})
    return _stats(profiler, 25)


def profile_discovery(count: int = 100, loads: int = 10) -> str:
    """cProfile ``loads`` cold ``Tools.load`` calls with ``count`` fake provider distributions."""
    ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
    policy = ToolPolicy.standard()
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="toolbox-bench-") as tmp:
        root = Path(tmp)
        write_fake_distributions(root, count)
        with on_sys_path(root):
            for _ in range(loads):
                reset_import_state()
                profiler.enable()
                Tools.load(ctx, env={}, policy=policy)
                profiler.disable()
    return _stats(profiler, 30)


def timing_parser(description: str | None) -> argparse.ArgumentParser:
    """An argument parser with the timing options every benchmark shares (--repeat, --min-time)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7, help="timeit repeats, minimum kept (default 7)")
    parser.add_argument(
        "--min-time",
        type=float,
        default=0.2,
        help="seconds one repeat should last; N is chosen from it (default 0.2, as timeit)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__)
    parser.add_argument(
        "--profile", action="store_true", help="then cProfile the governed path and discovery"
    )
    args = parser.parse_args(argv)

    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    table = Table()
    opts = {"repeat": args.repeat, "min_time": args.min_time}
    bench_discovery(table, **opts)
    bench_get(table, **opts)
    bench_calls(table, **opts)
    elapsed = time.perf_counter() - started

    print(
        f"toolbox core benchmark: Python {sys.version.split()[0]} on {sys.platform}, "
        f"pydantic {pydantic.VERSION}, importlib_metadata {importlib.metadata.version('importlib_metadata')}"
    )
    print(
        f"per op = min over {args.repeat} interleaved timeit repeats of (repeat time / N); "
        "ratio = per op / per op of baseline [key], same run"
    )
    print(
        "targets are informational; nothing here is asserted. Load average before/after: "
        f"{load_before:.2f} / {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)"
    )
    print()
    print(table.header())
    print("\n".join(table.lines))
    print()
    print(f"targets missed: {len(table.missed)}")
    for item in table.missed:
        print(f"  - {item}")
    print(f"measured in {elapsed:.1f} s")
    if args.profile:
        print()
        print("cProfile: 200k governed adder calls + 20k governed calculator calls, by own time")
        print(profile_governed())
        print("cProfile: 10 cold Tools.load calls with 100 fake provider distributions, by own time")
        print(profile_discovery())
    return 0


if __name__ == "__main__":
    sys.exit(main())
