// The MCP TypeScript SDK's own client against an MCP server on stdio, for the end-to-end test of
// the Rust MCP helper (tests/e2e/clients/mcp_envelope_server.rs).
//
// Reads a JSON spec on stdin, written by the Rust end-to-end suite:
//   {"command": "/path/to/server", "args": [...], "tool": "lookup", "cases": ["success", ...]}
// Lists the server's tools (the SDK keeps each tool's outputSchema and compiles its validator),
// then calls the tool once per case with {"case": case}. The SDK validates every result's
// structuredContent against the declared outputSchema and throws when it does not conform.
// Prints {"output_schema": <the tool's declared outputSchema>, "results": [...]}, one result per
// case: {"case", "is_error", "structured", "texts"} when the SDK accepted the result, or
// {"case", "refused": "<the SDK's error>"} when it threw.

import { readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const client = new Client({ name: 'candor-e2e', version: '0.0.0' });
await client.connect(new StdioClientTransport({ command: spec.command, args: spec.args ?? [], stderr: 'inherit' }));

const { tools } = await client.listTools();
const tool = tools.find((t) => t.name === spec.tool);
if (tool === undefined) {
  throw new Error(`the server lists no tool ${spec.tool}: ${tools.map((t) => t.name).join(', ')}`);
}

const results = [];
for (const name of spec.cases) {
  try {
    const result = await client.callTool({ name: spec.tool, arguments: { case: name } });
    results.push({
      case: name,
      is_error: result.isError === true,
      structured: result.structuredContent ?? null,
      texts: result.content.filter((c) => c.type === 'text').map((c) => c.text),
    });
  } catch (err) {
    results.push({ case: name, refused: String(err instanceof Error ? err.message : err) });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ output_schema: tool.outputSchema ?? null, results }));
