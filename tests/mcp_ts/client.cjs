// A test client of toolbox's MCP server on the official TypeScript SDK (tests/test_mcp_ts_client.py).
//
// Reads one JSON document on stdin:
//   {"transport": "http", "url": "...", "token": "...", "calls": [{"name": "...", "arguments": {...}}]}
//   {"transport": "stdio", "command": "...", "args": [...], "env": {...}, "calls": [...]}
// lists the tools (so the SDK learns each output schema, as a real client does), makes each call with
// the SDK's own Client.callTool, and prints one JSON document: the listed tools and, per call, the
// result or the error the SDK raised (a thrown McpError is what this client exists to catch).
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (chunk) => chunks.push(chunk));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

function transportOf(request) {
  if (request.transport === "http") {
    return new StreamableHTTPClientTransport(new URL(request.url), {
      requestInit: { headers: { Authorization: `Bearer ${request.token}` } },
    });
  }
  if (request.transport === "stdio") {
    return new StdioClientTransport({
      command: request.command,
      args: request.args || [],
      env: request.env || {},
      stderr: "pipe",
    });
  }
  throw new Error(`unknown transport ${request.transport}`);
}

async function main() {
  const request = JSON.parse(await readStdin());
  const client = new Client({ name: "toolbox-ts-test-client", version: "1.0.0" });
  await client.connect(transportOf(request));
  const listed = await client.listTools();
  const tools = listed.tools.map((tool) => ({
    name: tool.name,
    hasOutputSchema: Boolean(tool.outputSchema),
    annotations: tool.annotations || null,
  }));
  const results = [];
  for (const call of request.calls) {
    try {
      const result = await client.callTool({ name: call.name, arguments: call.arguments });
      results.push({ ok: true, result });
    } catch (error) {
      results.push({ ok: false, error: { name: error.name, code: error.code ?? null, message: String(error.message) } });
    }
  }
  await client.close();
  process.stdout.write(JSON.stringify({ sdk: request.sdk || null, tools, results }));
}

main().catch((error) => {
  process.stderr.write(`client failed: ${error && error.stack ? error.stack : error}\n`);
  process.exit(3);
});
