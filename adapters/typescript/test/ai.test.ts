// The Vercel AI SDK tool: generateText with the SDK's mock language model, which asks for a tool
// call and then answers; the test reads what the model was given in the next step's prompt.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { generateText, stepCountIs, type Tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import * as z from "zod";

import { envelopeTool, modelOutput, type OnAccessFailure, ToolAccessFailure } from "../src/ai.js";
import {
  Adapter,
  Envelope,
  type EnvelopeJson,
  FnClassifier,
  InvalidEnvelope,
  modelText,
  modelView,
  type Outcome,
} from "../src/index.js";
import { callTool, McpToolClassifier } from "../src/mcp.js";
import { CLASSES, OUTCOMES } from "./support/envelopes.js";

/** An adapter whose one attempt answers with the outcome named by the query. */
function catalogue(): Adapter<string> {
  return new Adapter<string>({
    tool: "catalogue.search",
    target: "https://catalogue.example/v1/items",
    classifier: new FnClassifier((q: string): Outcome => OUTCOMES[CLASSES.find((name) => name === q) ?? "success"]),
    retry: { maxAttempts: 2, initialBackoffMs: 1, maxBackoffMs: 2 },
  });
}

function searchTool(onAccessFailure: OnAccessFailure, adapter = catalogue()): Tool<{ q: string }, EnvelopeJson> {
  return envelopeTool({
    description: "Searches the catalogue.",
    inputSchema: z.object({ q: z.string() }),
    execute: ({ q }) => adapter.call(() => q),
    onAccessFailure,
  });
}

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** A model that asks for one call of `search` with `input`, then answers with text. */
function mockModel(input: unknown): MockLanguageModelV3 {
  let calls = 0;
  return new MockLanguageModelV3({
    doGenerate: () => {
      const step = calls++;
      return Promise.resolve({
        content:
          step === 0
            ? [{ type: "tool-call" as const, toolCallId: "call-1", toolName: "search", input: JSON.stringify(input) }]
            : [{ type: "text" as const, text: "done" }],
        finishReason: step === 0 ? { unified: "tool-calls" as const, raw: "tool_calls" } : { unified: "stop" as const, raw: "stop" },
        usage,
        warnings: [],
      });
    },
  });
}

/** Runs a generation with `search`, and returns what the model was given for the call, and the steps. */
async function run(search: Tool<{ q: string }, EnvelopeJson>, q: string) {
  const model = mockModel({ q });
  const result = await generateText({ model, tools: { search }, prompt: "Find cats.", stopWhen: stepCountIs(2) });
  assert.equal(model.doGenerateCalls.length, 2);
  const prompt = model.doGenerateCalls[1]?.prompt ?? [];
  const given = prompt.flatMap((message) =>
    message.role === "tool" ? message.content.flatMap((part) => (part.type === "tool-result" ? [part] : [])) : [],
  );
  const [part, ...more] = given;
  assert.ok(part !== undefined);
  assert.deepEqual(more, []);
  assert.equal(part.toolCallId, "call-1");
  const [first] = result.steps;
  assert.ok(first !== undefined);
  return { output: part.output, step: first };
}

test("a tool call that fails reaches the model as a failure, never as an empty result", async () => {
  const { output, step } = await run(searchTool("fail"), "access_failure");
  assert.ok(output.type === "error-text", `the model was given ${JSON.stringify(output)}`);
  assert.match(output.value, /^catalogue\.search: FAILED to get an answer from https:\/\/catalogue\.example\/v1\/items/);
  assert.match(output.value, /The source's contents are unknown; nothing can be concluded from this call\./);
  assert.doesNotMatch(output.value, /no results|not found|nothing matches|verified absence/i);
  // The application reads the whole envelope in the tool's output.
  const [result] = step.toolResults;
  const envelope = Envelope.fromJSON(result?.output);
  assert.equal(envelope.outcome.class, "access_failure");
  assert.equal(envelope.attempts.length, 2);
  assert.equal(output.value, modelText(envelope));
});

test('with "throw", the failure is a tool error whose text the model is given', async () => {
  const { output, step } = await run(searchTool("throw"), "access_failure");
  assert.ok(output.type === "error-text", `the model was given ${JSON.stringify(output)}`);
  assert.match(output.value, /FAILED to get an answer/);
  assert.match(output.value, /nothing can be concluded from this call/);
  const errors = step.content.flatMap((part) => (part.type === "tool-error" ? [part.error] : []));
  assert.equal(errors.length, 1);
  const [error] = errors;
  assert.ok(error instanceof ToolAccessFailure);
  assert.equal(error.envelope.outcome.class, "access_failure");
  assert.equal(output.value, modelText(error.envelope));
  assert.deepEqual(step.toolResults, []);
});

test('with "return", the failure is the summary and the outcome, which say it failed', async () => {
  const { output } = await run(searchTool("return"), "access_failure");
  assert.ok(output.type === "json", `the model was given ${JSON.stringify(output)}`);
  const view = output.value as { summary: string; outcome: { class: string }; next_actions: string[] };
  assert.equal(view.outcome.class, "access_failure");
  assert.match(view.summary, /FAILED to get an answer/);
  assert.deepEqual(view.next_actions, ["retry", "escalate"]);
});

for (const name of ["success", "empty", "partial"] as const) {
  test(`the ${name} outcome reaches the model as the summary, the outcome and the next actions`, async () => {
    const { output, step } = await run(searchTool("fail"), name);
    const envelope = Envelope.fromJSON(step.toolResults[0]?.output);
    assert.equal(envelope.outcome.class, name);
    const view = modelView(envelope);
    assert.deepEqual(output, { type: "json", value: { ...view, next_actions: [...view.next_actions] } });
  });
}

test("an empty reaches the model as a verified absence, a partial as never the whole", async () => {
  const empty = await run(searchTool("fail"), "empty");
  assert.match(JSON.stringify(empty.output), /confirmed that nothing matches\. This is a verified absence\./);
  const partial = await run(searchTool("fail"), "partial");
  assert.match(JSON.stringify(partial.output), /PARTIAL answer .* Do not treat it as the whole answer\./);
});

test("an execute that returns no envelope is a tool error", async () => {
  const broken = envelopeTool({
    inputSchema: z.object({ q: z.string() }),
    execute: ({ q }) => q as unknown as Envelope,
    onAccessFailure: "fail",
  });
  const { output, step } = await run(broken, "cats");
  assert.deepEqual(output, { type: "error-text", value: "the tool's execute returned string, not an Envelope" });
  assert.equal(step.content.filter((part) => part.type === "tool-error").length, 1);
});

test("onAccessFailure must be a choice of the three", () => {
  assert.throws(
    () => searchTool("retry" as OnAccessFailure),
    (error: unknown) => error instanceof TypeError && error.message.includes("onAccessFailure must be one of fail, throw, return"),
  );
});

test("modelOutput reads an envelope or its JSON", () => {
  const failed = modelOutput(
    new Envelope({
      tool: "t",
      target: "https://t.example",
      outcome: OUTCOMES.access_failure,
      provenance: {
        source_system: "t.example",
        adapter: "candor-adapter-typescript/0.1.0",
        started_at: "2027-01-15T08:00:00.000000Z",
        finished_at: "2027-01-15T08:00:00.000000Z",
      },
      attempts: [],
    }),
    "fail",
  );
  assert.equal(failed.type, "error-text");
  assert.throws(
    () => modelOutput([], "fail"),
    (error: unknown) => error instanceof InvalidEnvelope && error.rule === "schema",
  );
});

test("an MCP tool's error result, called through the MCP wrapper, reaches the model as a failure", async () => {
  const server = new McpServer({ name: "catalogue", version: "1.0.0" });
  server.registerTool("search", { inputSchema: { q: z.string() } }, ({ q }) => ({
    content: [{ type: "text", text: `the index for ${q} is being rebuilt` }],
    isError: true,
  }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "candor-test", version: "0.1.0" });
  await client.connect(clientSide);
  const adapter = new Adapter({ tool: "catalogue.search", target: "mcp://catalogue", classifier: new McpToolClassifier() });
  try {
    const search = envelopeTool({
      inputSchema: z.object({ q: z.string() }),
      execute: ({ q }) => callTool(adapter, client, "search", { q }),
      onAccessFailure: "fail",
    });
    const { output } = await run(search, "cats");
    assert.ok(output.type === "error-text", `the model was given ${JSON.stringify(output)}`);
    assert.match(output.value, /^catalogue\.search: FAILED to get an answer from mcp:\/\/catalogue \(server_error, permanent after 1 attempt\(s\)\): tool error: the index for cats is being rebuilt\./);
  } finally {
    await client.close();
    await server.close();
  }
});
