"""Governed ``HttpTool.get`` against raw httpx, to the same loopback server, sync and async.

Run from the repository root::

    .venv/bin/python bench/bench_http.py                # the table (about 20 s)
    .venv/bin/python bench/bench_http.py --repeat 5 --calls 300

This is a measurement script, not a test: it asserts nothing about time. A
small keep-alive HTTP/1.1 server on 127.0.0.1 answers every GET with a 24-byte
JSON body. Each row makes ``--calls`` requests per repeat; the repeats of the
rows of one section are interleaved so they see the same machine load; a row
reports the minimum time per request over the repeats, and its ratio divides
by the raw httpx row of the same section, measured in the same run.

The governed rows run the whole product path: the static egress check and
intent at call time, the governed chain (kill switch, policy, retries by
effect, trace record), the guarded transport (address check at connect),
the bounded streaming read and the response object. Loopback is allowed
explicitly (``egress.allow_networks``), as it must be.

Sections:

1. Sync: ``client.get(url)`` on one ``httpx.Client`` [R] against
   ``tool.get(url).purpose(...).execute()``.
2. Async: ``await client.get(url)`` on one ``httpx.AsyncClient`` [AR] (the
   governed path likewise keeps one pooled client per event loop), and on a
   new ``AsyncClient`` per call sharing one TLS context [AN], against
   ``await tool.get(url).purpose(...).aexecute()``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from toolbox import ExecutionContext, ToolPolicy, Tools
from toolbox_http import HttpTool

TARGET = 1.10
BODY = b'{"rates": {"EUR": 1.1}}\n'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


def _sync_row(fn: Callable[[], object], calls: int, reset: Callable[[], None]) -> float:
    reset()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


async def _async_row(fn: Callable[[], Awaitable[object]], calls: int, reset: Callable[[], None]) -> float:
    reset()
    start = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - start) / calls


def _print(section: str, rows: list[tuple[str, str, float, str | None]]) -> None:
    print(f"\n{section}")
    print(f"  {'row':<62} {'per call':>10} {'ratio':>12} {'target':>8} {'status':>7}")
    baselines = {key: value for _, key, value, _ in rows if key}
    for name, key, value, against in rows:
        if against is None:
            print(f"  {name + f' [{key}]':<62} {value * 1e6:>8.1f}us {'':>12} {'':>8} {'':>7}")
            continue
        ratio = value / baselines[against]
        status = "met" if ratio <= TARGET else "MISSED"
        print(f"  {name:<62} {value * 1e6:>8.1f}us {ratio:>9.3f}x {against:<2} {TARGET:>6.2f}x {status:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/rates"

    ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
    options = {"http": {"egress": {"allow_networks": ["127.0.0.0/8"]}}}
    tools = Tools.load(ctx, policy=ToolPolicy.standard().allow(HttpTool), env={}, options=options)
    tool = tools.get(HttpTool)
    check = tool.get(url).purpose("Bench").execute()
    assert check.status_code == 200 and check.content == BODY, "the governed path does not work"

    def reset_trace() -> None:
        ctx.trace._records.clear()  # only a benchmark touches the private list: keep the trace bounded

    def nothing() -> None:
        pass

    print(f"bench_http: {args.repeat} repeats x {args.calls} GETs of {len(BODY)} bytes to {url}")
    print(f"load average before: {os.getloadavg()}")

    client = httpx.Client()

    def raw_sync() -> bytes:
        return client.get(url).content

    def governed_sync() -> object:
        return tool.get(url).purpose("Bench").execute()

    sync = {"R": float("inf"), "G": float("inf")}
    for _ in range(args.repeat):
        sync["R"] = min(sync["R"], _sync_row(raw_sync, args.calls, nothing))
        sync["G"] = min(sync["G"], _sync_row(governed_sync, args.calls, reset_trace))
    client.close()
    _print(
        "1. sync",
        [
            ("httpx.Client.get(url) on one client", "R", sync["R"], None),
            ("tool.get(url).purpose(...).execute()", "", sync["G"], "R"),
        ],
    )

    tls = httpx.create_ssl_context()  # built once, as the tool does: loading CAs costs milliseconds

    async def run_async() -> dict[str, float]:
        best = {"AR": float("inf"), "AN": float("inf"), "AG": float("inf")}
        async with httpx.AsyncClient() as shared:

            async def raw_shared() -> bytes:
                return (await shared.get(url)).content

            async def raw_new() -> bytes:
                async with httpx.AsyncClient(verify=tls) as fresh:
                    return (await fresh.get(url)).content

            async def governed() -> object:
                return await tool.get(url).purpose("Bench").aexecute()

            for _ in range(args.repeat):
                best["AR"] = min(best["AR"], await _async_row(raw_shared, args.calls, nothing))
                best["AN"] = min(best["AN"], await _async_row(raw_new, args.calls, nothing))
                best["AG"] = min(best["AG"], await _async_row(governed, args.calls, reset_trace))
        return best

    best = asyncio.run(run_async())
    _print(
        "2. async",
        [
            ("await AsyncClient.get(url) on one client", "AR", best["AR"], None),
            ("await AsyncClient.get(url) on a new client per call", "AN", best["AN"], None),
            ("await tool.get(url).purpose(...).aexecute()", "", best["AG"], "AR"),
            ("  the same governed call", "", best["AG"], "AN"),
        ],
    )
    print(f"\nload average after: {os.getloadavg()}")
    print(f"target: the governed call within {TARGET:.2f}x of raw httpx (small response); informational")
    tools.close()
    server.shutdown()


if __name__ == "__main__":
    main()
