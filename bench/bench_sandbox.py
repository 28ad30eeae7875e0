"""The fixed cost of one sandboxed ``print(1)`` against a bare ``python -c 'print(1)'`` subprocess.

Run from the repository root::

    .venv/bin/python bench/bench_sandbox.py            # the table (about 30 s)
    .venv/bin/python bench/bench_sandbox.py --calls 50 --repeat 9

This is a measurement script, not a test: nothing in it asserts anything about
time. Every row runs the same interpreter (the default profile's
``/usr/bin/python3``), timed as real use runs: garbage collector on, the rows'
repeats interleaved, the median of the repeats kept, each ratio the median of
the per-repeat ratios against the bare row of the same repeat. Beside the wall
clock, the CPU time per call of this process and of every process it started
(``getrusage``: the sandbox's processes are all reaped, so all counted; the
kernel's deferred teardown of a network namespace is not), which a loaded
machine disturbs far less than the wall clock. Rows:

- [B] bare: ``subprocess.run([python, "-c", "print(1)"])``, the baseline of issue 32
  (target: the sandboxed call at most 1.5x this);
- [I] isolated: the same with ``-I -S -B``, the interpreter's own floor (the flags
  the sandbox starts it with, as ``python -I -S -B /sandbox/init.pyc``: isolated
  mode, no ``site`` so no site-packages, no bytecode written);
- [W] bubblewrap: the sandbox's exact command line (util-linux ``unshare`` to the
  run's fresh host user, bubblewrap's namespaces, mounts and seccomp, the compiled
  init) run by the supervisor, outside the governed chain: the boundary's cost;
- [T] typed: ``sandbox.run_python("print(1)").audit_as(...).execute()``, governed, with
  an audit trail to memory: what a caller pays;
- [G] by name: ``gateway.invoke("sandbox.run_python", ...)``, the same through the Gateway.

No pool: every call builds a new sandbox (a warm pool would have to prove a used
sandbox never serves another tenant; at this cost none is needed).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable

from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy, Tools
from toolbox.audit import AuditTrail, MemorySink
from toolbox.foundations._dispatch import run_dispatched
from toolbox_sandbox import SANDBOX_ACKNOWLEDGEMENT, SandboxProfile, SandboxTool, plugin, probe
from toolbox_sandbox._run import Request, execute

PYTHON = SandboxProfile().python
ACK = {SANDBOX_ACKNOWLEDGEMENT.env: SANDBOX_ACKNOWLEDGEMENT.value}


def rows() -> dict[str, Callable[[], object]]:
    context = ExecutionContext(tenant="bench", principal="bench")
    governance = Governance(audit=AuditTrail(MemorySink()))
    policy = ToolPolicy.standard().allow(SandboxTool)
    gateway = Gateway.load(policy=policy, providers=[plugin], discover=False, env=ACK, governance=governance)
    tools = Tools(gateway.catalog, context)
    sandbox = tools.get(SandboxTool)
    request = Request(
        tool="sandbox",
        bwrap="/usr/bin/bwrap",
        profile_name="default",
        profile=SandboxProfile(),
        mode="python",
        code=b"print(1)",
        argv=(),
        stdin=b"",
        files=(),
    )
    arguments = {"source": "print(1)", "audit_as": "Print one"}

    def bare() -> object:
        return subprocess.run([PYTHON, "-c", "print(1)"], capture_output=True, check=True)

    def isolated() -> object:
        return subprocess.run([PYTHON, "-I", "-S", "-B", "-c", "print(1)"], capture_output=True, check=True)

    def boundary() -> object:
        result = run_dispatched("sandbox", lambda: execute(request))
        assert result.stdout == "1\n"
        return result

    def typed() -> object:
        result = sandbox.run_python("print(1)").audit_as("Print one").execute()
        assert result.stdout == "1\n"
        return result

    def by_name() -> object:
        result = gateway.invoke("sandbox.run_python", arguments, context=context)
        assert result.content.stdout == "1\n"
        return result

    return {
        "[B] bare": bare,
        "[I] isolated": isolated,
        "[W] bubblewrap": boundary,
        "[T] typed": typed,
        "[G] by name": by_name,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per row per repeat (default 20)")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved repeats (default 7)")
    options = parser.parse_args()
    support = probe()
    if support.missing:
        raise SystemExit("the sandbox cannot run here: " + "; ".join(support.missing))
    gc.enable()
    load = _load()
    table = rows()
    for call in table.values():  # warm up: the interpreter probe, caches, the page cache
        call()
    times: dict[str, list[float]] = {name: [] for name in table}
    cpu: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(options.repeat):
        for name, call in table.items():
            spent = _cpu()
            started = time.perf_counter()
            for _ in range(options.calls):
                call()
            times[name].append((time.perf_counter() - started) / options.calls)
            cpu[name].append((_cpu() - spent) / options.calls)
    print(f"{support.bwrap}; seccomp={support.seccomp}; fresh user per run={support.fresh_user}")
    print(f"limits: rlimits+supervisor; {support.cgroups}")
    print(
        f"interpreter {PYTHON}; {options.calls} calls x {options.repeat} interleaved repeats, GC on, medians"
    )
    print(f"load average before and after: {load} -> {_load()}")
    print(f"{'row':<16}{'ms/call':>10}{'x [B]':>9}{'x [I]':>9}{'CPU ms':>10}{'CPU x [B]':>11}")
    for name, samples in times.items():
        over_bare = _ratio(samples, times["[B] bare"])
        over_isolated = _ratio(samples, times["[I] isolated"])
        spent = statistics.median(cpu[name]) * 1000
        print(
            f"{name:<16}{statistics.median(samples) * 1000:>10.2f}{over_bare:>9.2f}{over_isolated:>9.2f}"
            f"{spent:>10.2f}{_ratio(cpu[name], cpu['[B] bare']):>11.2f}"
        )
    print("target (issue 32): [T] / [B] <= 1.5 (wall clock)")


def _cpu() -> float:
    """CPU seconds of this process and of every process it waited for (and they for theirs)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _ratio(samples: list[float], baseline: list[float]) -> float:
    return statistics.median(t / b for t, b in zip(samples, baseline, strict=True))


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
