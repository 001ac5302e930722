// The MCP server helper: envelope tools on the SDK's McpServer, read by the SDK's own client,
// which validates the structured content against the output schema the tool declared.

import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { JsonSchemaType } from "@modelcontextprotocol/sdk/validation";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import * as z from "zod";

import { Adapter, Envelope, FnClassifier, type Outcome } from "../src/index.js";
import { callTool, McpToolClassifier, registerEnvelopeTool, toolResult } from "../src/mcp.js";
import { answered, CLASSES, OUTCOMES } from "./support/envelopes.js";
import { readJson, SPEC_DIR } from "./support/paths.js";

const SCHEMA = readJson(path.join(SPEC_DIR, "v1", "envelope.v1.schema.json"));

/** An adapter whose one attempt answers with the outcome named by the query. */
const catalogue = new Adapter<string>({
  tool: "catalogue.search",
  target: "https://catalogue.example/v1/items",
  classifier: new FnClassifier((q: string): Outcome => OUTCOMES[CLASSES.find((name) => name === q) ?? "success"]),
  retry: { maxAttempts: 2, initialBackoffMs: 1, maxBackoffMs: 2 },
});

function server(): McpServer {
  const mcp = new McpServer({ name: "catalogue", version: "1.0.0" });
  registerEnvelopeTool(
    mcp,
    "search",
    { title: "Search", description: "Searches the catalogue.", inputSchema: { q: z.string() } },
    ({ q }) => catalogue.call(() => q),
  );
  registerEnvelopeTool(mcp, "status", { description: "The catalogue's status." }, (extra) => {
    assert.equal(typeof extra.requestId, "number");
    return answered(OUTCOMES.success);
  });
  registerEnvelopeTool(mcp, "broken", { inputSchema: { q: z.string() } }, ({ q }) => q as unknown as Envelope);
  return mcp;
}

/**
 * Runs `action`: the SDK's default validator (Ajv), compiling the envelope schema, warns that it
 * does not know the schema's integer formats ("uint64", …) and ignores them; nothing else is
 * expected on the console.
 */
async function quietly<T>(action: () => T | Promise<T>): Promise<T> {
  const warned: unknown[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => warned.push(args.join(" "));
  try {
    return await action();
  } finally {
    console.warn = warn;
    for (const warning of warned) {
      assert.match(String(warning), /^unknown format "uint(8|16|32|64)" ignored in schema/);
    }
  }
}

/** The SDK's client, connected in-process, with the tools listed (so that it validates results). */
async function connect(mcp: McpServer = server()): Promise<{ client: Client; close: () => Promise<void> }> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await mcp.connect(serverSide);
  const client = new Client({ name: "candor-test", version: "0.1.0" });
  await client.connect(clientSide);
  await quietly(() => client.listTools());
  return {
    client,
    close: async () => {
      await client.close();
      await mcp.close();
    },
  };
}

function asResult(value: unknown): CallToolResult {
  assert.ok(typeof value === "object" && value !== null && "content" in value);
  return value as CallToolResult;
}

test("the tools declare the envelope's JSON Schema as their output schema", async () => {
  const { client, close } = await connect();
  try {
    const { tools } = await quietly(() => client.listTools());
    const search = tools.find((t) => t.name === "search");
    assert.ok(search !== undefined);
    assert.deepEqual(search.outputSchema, SCHEMA);
    assert.deepEqual(tools.find((t) => t.name === "status")?.outputSchema, SCHEMA);
    assert.equal(search.title, "Search");
    assert.equal(search.description, "Searches the catalogue.");
    assert.deepEqual(search.inputSchema.properties, { q: { type: "string" } });
    assert.deepEqual(search.inputSchema.required, ["q"]);
  } finally {
    await close();
  }
});

for (const name of CLASSES) {
  test(`the result of ${name} is the envelope, validated by the client, with its summary first`, async () => {
    const { client, close } = await connect();
    try {
      const result = asResult(await client.callTool({ name: "search", arguments: { q: name } }));
      const envelope = Envelope.fromJSON(result.structuredContent);
      assert.equal(envelope.outcome.class, name);
      assert.deepEqual(result.content, [
        { type: "text", text: envelope.summary() },
        { type: "text", text: envelope.stringify() },
      ]);
      assert.equal(result.isError, name === "access_failure");
      assert.equal(envelope.attempts.length, name === "access_failure" ? 2 : 1);
    } finally {
      await close();
    }
  });
}

test("an access failure is an error result that says nothing can be concluded", async () => {
  const { client, close } = await connect();
  try {
    const result = asResult(await client.callTool({ name: "search", arguments: { q: "access_failure" } }));
    assert.equal(result.isError, true);
    const [summary] = result.content;
    assert.equal(summary?.type, "text");
    assert.match(summary.text, /^catalogue\.search: FAILED to get an answer from .* nothing can be concluded from this call\.$/);
    assert.equal((result.structuredContent?.["outcome"] as { class: string }).class, "access_failure");
  } finally {
    await close();
  }
});

test("the declared schema accepts an envelope and refuses what is not one", async () => {
  const { client, close } = await connect();
  try {
    const { tools } = await quietly(() => client.listTools());
    const declared = tools.find((t) => t.name === "search")?.outputSchema;
    assert.ok(declared !== undefined);
    const validate = await quietly(() => new AjvJsonSchemaValidator().getValidator(declared as JsonSchemaType));
    for (const name of CLASSES) {
      assert.equal(validate(answered(OUTCOMES[name]).toJSON()).valid, true, name);
    }
    const refused = validate({ schema_version: 1, tool: "x" });
    assert.equal(refused.valid, false);
    assert.match(refused.errorMessage, /must have required property 'target'/);
  } finally {
    await close();
  }
});

test("the SDK's client refuses a result of an envelope tool whose structured content is no envelope", async () => {
  const mcp = server();
  const impostor = registerEnvelopeTool(mcp, "impostor", {}, () => answered(OUTCOMES.success));
  impostor.update({ callback: () => ({ content: [], structuredContent: { schema_version: 1 } }) });
  const { client, close } = await connect(mcp);
  try {
    await assert.rejects(
      client.callTool({ name: "impostor" }),
      /Structured content does not match the tool's output schema: data must have required property 'tool'/,
    );
  } finally {
    await close();
  }
});

test("a handler that returns no envelope is a tool error", async () => {
  const { client, close } = await connect();
  try {
    const result = asResult(await client.callTool({ name: "broken", arguments: { q: "cats" } }));
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent, undefined);
    assert.deepEqual(result.content, [
      { type: "text", text: "the handler of the tool broken returned string, not an Envelope" },
    ]);
  } finally {
    await close();
  }
});

test("a tool without parameters gets the request's context", async () => {
  const { client, close } = await connect();
  try {
    const result = asResult(await client.callTool({ name: "status" }));
    assert.equal(result.isError, false);
    assert.equal(Envelope.fromJSON(result.structuredContent).outcome.class, "success");
  } finally {
    await close();
  }
});

test("a Candor client reads the server's failure as a failure, and its success as the envelope", async () => {
  const { client, close } = await connect();
  const reader = new Adapter({
    tool: "catalogue",
    target: "mcp://catalogue/search",
    classifier: new McpToolClassifier(),
    retry: { maxAttempts: 1 },
  });
  try {
    const failed = await callTool(reader, client, "search", { q: "access_failure" });
    assert.equal(failed.outcome.class, "access_failure");
    assert.equal(failed.outcome.failure.error_type, "tool_error");
    assert.match(failed.outcome.failure.message, /^tool error: catalogue\.search: FAILED to get an answer/);
    const found = await callTool(reader, client, "search", { q: "success" });
    assert.equal(found.outcome.class, "success");
    assert.equal(Envelope.fromJSON(found.outcome.payload).outcome.class, "success");
  } finally {
    await close();
  }
});

test("toolResult is the SDK's CallToolResult of section 10.5", () => {
  const result: CallToolResult = toolResult(answered(OUTCOMES.empty));
  assert.equal(result.isError, false);
  assert.equal(result.content.length, 2);
});
