"""toolbox in two minutes, offline.

Starts a loopback HTTP server, then shows:

1. the standard policy allowing the MEMORY_ONLY calculator and denying HttpTool;
2. an explicit allow letting HttpTool read (purpose) and write (audit_as);
3. FsTool denied until its deployment acknowledgement is set;
4. the trace recorded for all of it, URLs redacted.

Run it with ``bash scripts/demo``.
"""

from __future__ import annotations

import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from toolbox import (
    AcknowledgementRequiredError,
    CalculatorTool,
    DenialRecord,
    ExecutionContext,
    ToolPolicy,
    ToolPolicyDeniedError,
    Tools,
)
from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool
from toolbox_http import EgressDeniedError, HttpTool


class DemoApi(BaseHTTPRequestHandler):
    """A tiny rates and inventory API on 127.0.0.1."""

    def do_GET(self) -> None:
        self._reply({"base": "USD", "rates": {"EUR": 0.92, "GBP": 0.79}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        changes = json.loads(self.rfile.read(length) or b"[]")
        self._reply({"accepted": len(changes)})

    def _reply(self, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep the demo output readable."""


def section(title: str) -> None:
    print(f"\n== {title}")


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), DemoApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    # The environment is injected so the demo never depends on (or leaks) the shell's.
    env: dict[str, str] = {}
    ctx = ExecutionContext(tenant="tenant-a", principal="reviewer")

    section("1. Standard policy: MEMORY_ONLY tools only")
    tools = Tools.load(ctx, env=env)
    calculator = tools.get(CalculatorTool)
    answer = calculator.evaluate("(120 + 80) * 0.92").purpose("Convert 200 USD to EUR").execute()
    print(f"calculator: 200 USD = {answer:.2f} EUR")
    try:
        tools.get(HttpTool)
    except ToolPolicyDeniedError as exc:
        print(f"HttpTool denied [{exc.reason_code}, rule {exc.rule}]:\n  {exc}")

    section("2. Explicit allow: HttpTool reads with a purpose, writes with audit_as")
    with tempfile.TemporaryDirectory() as reports:
        policy = ToolPolicy.standard().allow(HttpTool, FsTool)
        # The demo API listens on 127.0.0.1. HttpTool refuses loopback, private and cloud
        # metadata addresses by default: reaching this local server is an explicit opt-in.
        local_api: dict[str, object] = {"egress": {"allow_networks": ["127.0.0.0/8"]}}
        options: dict[str, dict[str, object]] = {"fs": {"roots": [reports]}, "http": local_api}
        tools = Tools.load(ctx, policy=policy, env=env, options=options)
        http = tools.get(HttpTool)
        rates = (
            http.get(f"{base}/rates?api_key=demo-secret-123")
            .purpose("Fetch exchange rates for settlement")
            .execute()
        )
        print(f"GET /rates -> {rates.status_code} {rates.json()['rates']}")
        sync = (
            http.post(f"{base}/inventory", json=[{"sku": "A-1", "delta": -2}])
            .audit_as("Synchronize approved inventory changes")
            .execute()
        )
        print(f"POST /inventory -> {sync.status_code} {sync.json()}")
        # Allowed is not unrestricted: the cloud metadata address is refused before any socket opens.
        try:
            http.get("http://169.254.169.254/latest/meta-data/").purpose("Read instance metadata").execute()
        except EgressDeniedError as exc:
            print(f"metadata denied [{exc.reason_code}, rule {exc.rule}]:\n  {exc}")

        section("3. FsTool is PRIVILEGED: allowed by policy, still needs its acknowledgement")
        try:
            tools.get(FsTool)
        except AcknowledgementRequiredError as exc:
            print(f"FsTool denied [{exc.reason_code}]:\n  {exc}")
        print(f"operator sets {FS_ACKNOWLEDGEMENT.env}={FS_ACKNOWLEDGEMENT.value}")
        env[FS_ACKNOWLEDGEMENT.env] = FS_ACKNOWLEDGEMENT.value
        written = (
            tools.get(FsTool)
            .write("settlement.json", json.dumps(rates.json()))
            .audit_as("Store the rates used for settlement")
            .execute()
        )
        print(f"FsTool wrote {written} bytes to settlement.json")
        tools.close()

    section("4. The trace (no bodies, no headers, no secrets)")
    for record in ctx.trace:
        if isinstance(record, DenialRecord):
            print(f"  {'DENIED':<8} {record.tool:<20} {record.reason_code} ({record.rule})")
        else:
            target = f" {record.target}" if record.target else ""
            operation = f"{record.tool}.{record.operation}"
            print(f"  {record.status:<8} {operation:<20} {record.intent_kind}={record.intent_text!r}{target}")
    server.shutdown()


if __name__ == "__main__":
    main()
