// The MCP client wrapper: a real MCP TypeScript SDK server and client connected in-process over
// the SDK's linked in-memory transports.

/* eslint-disable @typescript-eslint/no-deprecated -- the SDK's low-level Server, "for advanced use
   cases", is the server whose handlers answer with JSON-RPC errors. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  type CallToolResult,
  CallToolRequestSchema,
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  ListToolsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";

import { Adapter, type AdapterOptions, type Clock, type Envelope, SystemClock } from "../src/index.js";
import { callTool, McpToolClassifier } from "../src/mcp.js";
import { MemoryTelemetry } from "./support/telemetry.js";

/** What the catalogue's tools saw. */
const seen = { cancelled: 0 };

/** A server made with the SDK's high-level McpServer. */
function catalogue(): McpServer {
  const server = new McpServer({ name: "catalogue", version: "1.0.0" });
  server.registerTool("search", { description: 'Finds items; "none" finds nothing.', inputSchema: { q: z.string() } }, ({ q }) => {
    const items = q === "none" ? [] : [`${q}-1`, `${q}-2`];
    return { content: [{ type: "text", text: JSON.stringify({ items }) }], structuredContent: { items } };
  });
  server.registerTool("text", { inputSchema: { q: z.string() } }, ({ q }) => ({ content: [{ type: "text", text: `hello ${q}` }] }));
  server.registerTool("fails", { inputSchema: { q: z.string() } }, ({ q }) => ({
    content: [{ type: "text", text: `quota exceeded for ${q};\n token=abc123` }],
    isError: true,
  }));
  server.registerTool("raises", { inputSchema: { q: z.string() } }, ({ q }) => {
    throw new Error(`cannot search ${q}`);
  });
  server.registerTool("slow", { inputSchema: { q: z.string() } }, (_, extra) => {
    // Never answers: it waits until the client cancels the request.
    return new Promise<CallToolResult>((_resolve, reject) => {
      extra.signal.addEventListener("abort", () => {
        seen.cancelled += 1;
        reject(new Error("cancelled"));
      });
    });
  });
  return server;
}

/** A server made with the SDK's low-level Server, whose handlers answer with JSON-RPC errors. */
function rpc(): Server {
  const server = new Server({ name: "rpc", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [
      {
        name: "typed",
        inputSchema: { type: "object" },
        outputSchema: { type: "object", properties: { items: { type: "array" } }, required: ["items"] },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, (request) => {
    switch (request.params.name) {
      case "rejects":
        throw new McpError(ErrorCode.InvalidParams, `q=${JSON.stringify(request.params.arguments?.["q"])} is not a query`);
      case "internal":
        throw new McpError(ErrorCode.InternalError, "the index is rebuilding");
      case "custom":
        throw new McpError(-32050, "the catalogue is closed on Sundays");
      case "typed":
        return { content: [], structuredContent: { rows: [] } };
      default:
        // Not a CallToolResult: the SDK's server refuses it.
        return { content: "not a list" };
    }
  });
  return server;
}

interface Connected {
  readonly client: Client;
  readonly close: () => Promise<void>;
}

async function connect(server: McpServer | Server): Promise<Connected> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "candor-test", version: "0.1.0" });
  await client.connect(clientSide);
  return {
    client,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

function adapter(
  classifier = new McpToolClassifier({ itemsAt: "/items" }),
  options: Partial<AdapterOptions<CallToolResult>> = {},
): Adapter<CallToolResult> {
  return new Adapter({
    tool: "catalogue.search",
    target: "mcp://catalogue",
    classifier,
    retry: { maxAttempts: 2, initialBackoffMs: 1, maxBackoffMs: 2 },
    ...options,
  });
}

async function call(
  over: McpServer | Server,
  name: string,
  q: string,
  using: Adapter<CallToolResult> = adapter(),
): Promise<Envelope> {
  const { client, close } = await connect(over);
  try {
    return await callTool(using, client, name, { q });
  } finally {
    await close();
  }
}

function failureOf(envelope: Envelope) {
  assert.equal(envelope.outcome.class, "access_failure", envelope.summary());
  return envelope.outcome.failure;
}

test("a result is a success with its items", async () => {
  const envelope = await call(catalogue(), "search", "cats");
  assert.equal(envelope.outcome.class, "success");
  assert.deepEqual(envelope.outcome.payload, { items: ["cats-1", "cats-2"] });
  assert.deepEqual(envelope.outcome.extent, { items: 2 });
  assert.equal(envelope.provenance.source_system, "catalogue");
  assert.equal(envelope.attempts.length, 1);
});

test("an empty result is empty only when the tool declares that empty means absent", async () => {
  const undeclared = await call(catalogue(), "search", "none");
  assert.equal(undeclared.outcome.class, "success");
  assert.deepEqual(undeclared.outcome.extent, { items: 0 });
  assert.doesNotMatch(undeclared.summary(), /confirmed|absence/);
  const declared = await call(
    catalogue(),
    "search",
    "none",
    adapter(new McpToolClassifier({ emptyMeansAbsent: true, itemsAt: "/items", scope: "catalogue" })),
  );
  assert.equal(declared.outcome.class, "empty");
  assert.deepEqual(declared.outcome.extent, { items: 0, scope: "catalogue" });
  assert.match(declared.summary(), /verified absence/);
  const found = await call(catalogue(), "search", "cats", adapter(new McpToolClassifier({ emptyMeansAbsent: true, itemsAt: "/items" })));
  assert.equal(found.outcome.class, "success");
});

test("unstructured content is the payload", async () => {
  const envelope = await call(catalogue(), "text", "cats", adapter(new McpToolClassifier()));
  assert.equal(envelope.outcome.class, "success");
  assert.deepEqual(envelope.outcome.payload, [{ type: "text", text: "hello cats" }]);
  assert.deepEqual(envelope.outcome.extent, {});
});

test("a declared collection that is missing is a protocol failure", async () => {
  const missing = failureOf(await call(catalogue(), "text", "cats"));
  assert.deepEqual(
    { kind: missing.kind, retryable: missing.retryable, error_type: missing.error_type, message: missing.message },
    {
      kind: "protocol",
      retryable: false,
      error_type: "malformed_response",
      message: "declared collection /items is missing from the structured content",
    },
  );
  const wrong = new McpToolClassifier({ itemsAt: "/items" }).classify({ content: [], structuredContent: { items: { a: 1 } } });
  assert.equal(wrong.outcome.class, "access_failure");
  assert.match(wrong.outcome.failure.message, /is a object in the structured content/);
});

test("an error result is a permanent access failure, its text redacted", async () => {
  const telemetry = new MemoryTelemetry();
  const envelope = await call(
    catalogue(),
    "fails",
    "cats",
    adapter(undefined, { tracerProvider: telemetry.tracerProvider, meterProvider: telemetry.meterProvider }),
  );
  const failure = failureOf(envelope);
  assert.equal(failure.kind, "server_error");
  assert.equal(failure.retryable, false);
  assert.equal(failure.error_type, "tool_error");
  assert.match(failure.message, /^tool error: quota exceeded for cats; token=/);
  assert.doesNotMatch(failure.message, /abc123/);
  assert.equal(envelope.attempts.length, 1);
  assert.deepEqual(envelope.next_actions, ["escalate"]);
  const [span] = telemetry.finishedSpans();
  assert.equal(span?.status.message, failure.message);
  await telemetry.shutdown();
});

test("a tool that throws is an access failure: the server makes it an error result", async () => {
  const failure = failureOf(await call(catalogue(), "raises", "cats"));
  assert.equal(failure.error_type, "tool_error");
  assert.equal(failure.message, "tool error: cannot search cats");
});

test("a JSON-RPC error is an access failure by its code", async () => {
  const rejected = await call(rpc(), "rejects", "");
  const failure = failureOf(rejected);
  assert.equal(failure.kind, "client_error");
  assert.equal(failure.retryable, false);
  assert.equal(failure.error_type, "-32602");
  assert.equal(failure.message, 'MCP error -32602: q="" is not a query');
  assert.deepEqual(rejected.next_actions, ["escalate"]);
  assert.equal(rejected.attempts.length, 1);

  const internal = await call(rpc(), "internal", "cats");
  assert.deepEqual(
    { ...failureOf(internal), attempts: internal.attempts.length },
    {
      kind: "server_error",
      retryable: true,
      message: "MCP error -32603: the index is rebuilding",
      error_type: "-32603",
      attempts: 2,
    },
  );
  const custom = failureOf(await call(rpc(), "custom", "cats"));
  assert.deepEqual([custom.kind, custom.retryable, custom.error_type], ["server_error", false, "-32050"]);
});

test("a result the SDK refuses is a permanent protocol failure", async () => {
  // The server refuses its own handler's answer, with a JSON-RPC error.
  const refused = failureOf(await call(rpc(), "malformed", "cats"));
  assert.deepEqual([refused.kind, refused.retryable, refused.error_type], ["protocol", false, "malformed_response"]);
  assert.match(refused.message, /^MCP error -32602: Invalid tools\/call result/);

  // The client refuses structured content that does not match the tool's declared output schema.
  const { client, close } = await connect(rpc());
  try {
    await client.listTools();
    const mismatch = failureOf(await callTool(adapter(new McpToolClassifier()), client, "typed"));
    assert.deepEqual([mismatch.kind, mismatch.retryable, mismatch.error_type], ["protocol", false, "malformed_response"]);
    assert.match(mismatch.message, /Structured content does not match the tool's output schema/);
  } finally {
    await close();
  }
});

test("an answer that is not a CallToolResult, from a server not made with the SDK, is a protocol failure", async () => {
  const [clientSide, peer] = InMemoryTransport.createLinkedPair();
  peer.onmessage = (message) => {
    if ("method" in message && "id" in message) {
      const result =
        message.method === "initialize"
          ? { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: { tools: {} }, serverInfo: { name: "raw", version: "0" } }
          : { content: "not a list" };
      void peer.send({ jsonrpc: "2.0", id: message.id, result });
    }
  };
  await peer.start();
  const client = new Client({ name: "candor-test", version: "0.1.0" });
  await client.connect(clientSide);
  try {
    const failure = failureOf(await callTool(adapter(), client, "search", { q: "cats" }));
    assert.deepEqual([failure.kind, failure.retryable, failure.error_type], ["protocol", false, "malformed_response"]);
    assert.match(failure.message, /^the result is not a CallToolResult: /);
  } finally {
    await client.close();
  }
});

test("a closed transport is a transient connect failure, retried", async () => {
  const { client, close } = await connect(catalogue());
  await close();
  const envelope = await callTool(adapter(), client, "search", { q: "cats" });
  const failure = failureOf(envelope);
  assert.deepEqual([failure.kind, failure.retryable, failure.error_type], ["connect", true, "connect_error"]);
  assert.equal(envelope.attempts.length, 2);
  assert.deepEqual(envelope.next_actions, ["retry", "escalate"]);
});

test("a connection closed mid-call is a transient connect failure (-32000)", async () => {
  const server = catalogue();
  const { client, close } = await connect(server);
  try {
    const pending = callTool(adapter(undefined, { retry: { maxAttempts: 1 } }), client, "slow", { q: "cats" });
    setTimeout(() => void server.close(), 20);
    const failure = failureOf(await pending);
    assert.deepEqual([failure.kind, failure.retryable, failure.error_type], ["connect", true, "-32000"]);
    assert.equal(failure.message, "MCP error -32000: Connection closed");
  } finally {
    await close();
  }
});

test("a slow tool times out at the attempt timeout, and the SDK cancels the request", async () => {
  const before = seen.cancelled;
  const envelope = await call(
    catalogue(),
    "slow",
    "cats",
    adapter(undefined, { attemptTimeoutMs: 100, retry: { maxAttempts: 1 } }),
  );
  const failure = failureOf(envelope);
  assert.equal(failure.kind, "timeout");
  assert.equal(failure.retryable, true);
  assert.equal(envelope.attempts.length, 1);
  assert.ok((envelope.attempts[0]?.duration_ms ?? 0) >= 100);
  assert.equal(seen.cancelled, before + 1, "the server saw notifications/cancelled");
});

/** The system's time, but the adapter's own attempt timer never fires: only the SDK's can. */
class NoAdapterTimer implements Clock {
  private readonly system = new SystemClock();
  monotonicNs(): number {
    return this.system.monotonicNs();
  }
  wallNs(): bigint {
    return this.system.wallNs();
  }
  sleep(_ns: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((_resolve, reject) => {
      signal?.addEventListener("abort", () => {
        reject(signal.reason as Error);
      });
    });
  }
}

test("each attempt's timeout is the SDK's request timeout", async () => {
  const passed: unknown[] = [];
  const { client, close } = await connect(catalogue());
  const spy: Pick<Client, "callTool"> = {
    callTool: (params, schema, options) => {
      passed.push(options);
      return client.callTool(params, schema, options);
    },
  };
  try {
    const envelope = await callTool(
      adapter(undefined, { attemptTimeoutMs: 80, retry: { maxAttempts: 1 }, clock: new NoAdapterTimer() }),
      spy,
      "slow",
      { q: "cats" },
    );
    const failure = failureOf(envelope);
    // The SDK's own timer ended the attempt: its McpError RequestTimeout.
    assert.deepEqual([failure.kind, failure.retryable, failure.error_type], ["timeout", true, "-32001"]);
    assert.equal(failure.message, "MCP error -32001: Request timed out");
    assert.equal(passed.length, 1);
    const options = passed[0] as { timeout: number; signal: AbortSignal };
    assert.equal(options.timeout, 80);
    assert.ok(options.signal instanceof AbortSignal);
  } finally {
    await close();
  }
});

test("the transports' failures are access failures; a cancellation and a bug propagate", () => {
  const classifier = new McpToolClassifier();
  const kindOf = (error: unknown) => {
    const outcome = classifier.classifyError(error)?.outcome;
    return outcome?.class === "access_failure"
      ? [outcome.failure.kind, outcome.failure.retryable, outcome.failure.error_type]
      : outcome?.class;
  };
  assert.deepEqual(kindOf(new StreamableHTTPError(503, "Error POSTing to endpoint: busy")), ["server_error", true, "503"]);
  assert.deepEqual(kindOf(new StreamableHTTPError(401, "Error POSTing to endpoint: who")), ["auth", false, "401"]);
  assert.deepEqual(kindOf(new StreamableHTTPError(404, "Session not found")), ["client_error", false, "404"]);
  assert.deepEqual(kindOf(new StreamableHTTPError(-1, "Unexpected content type")), ["connect", true, "connect_error"]);
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
  assert.deepEqual(kindOf(new TypeError("fetch failed", { cause: refused })), ["connect", true, "connect_error"]);
  assert.deepEqual(kindOf(Object.assign(new Error("write EPIPE"), { code: "EPIPE" })), ["connect", true, "connection_reset"]);
  assert.deepEqual(kindOf(new DOMException("The operation timed out.", "TimeoutError")), ["timeout", true, "timeout"]);
  assert.equal(kindOf(new DOMException("This operation was aborted", "AbortError")), undefined);
  assert.equal(kindOf(new RangeError("a bug")), undefined);
  assert.equal(kindOf("not an error"), undefined);
});

test("an error that is no outcome of the tool propagates from the call", async () => {
  const broken: Pick<Client, "callTool"> = {
    callTool: () => Promise.reject(new RangeError("a bug in the calling code")),
  };
  await assert.rejects(callTool(adapter(), broken, "search"), RangeError);
});
