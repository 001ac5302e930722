// The envelope as an MCP tool result (contract 10.5), without the SDK.

import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";

import { callToolResult, ENVELOPE_JSON_SCHEMA, envelopeOutputSchema, MCP_PROTOCOL_REVISION } from "../src/index.js";
import { answered, CLASSES, OUTCOMES } from "./support/envelopes.js";
import { readJson, SPEC_DIR } from "./support/paths.js";

test("the package's copy of the envelope schema is the spec's (else: npm run sync-schema)", () => {
  assert.deepEqual(ENVELOPE_JSON_SCHEMA, readJson(path.join(SPEC_DIR, "v1", "envelope.v1.schema.json")));
});

test("the output schema is a copy of the envelope schema each time", () => {
  const schema = envelopeOutputSchema();
  assert.deepEqual(schema, ENVELOPE_JSON_SCHEMA);
  schema["title"] = "changed";
  assert.equal(envelopeOutputSchema()["title"], "Candor result envelope");
});

for (const name of CLASSES) {
  test(`the result of ${name} is the envelope, the summary first, isError ${String(name === "access_failure")}`, () => {
    const envelope = answered(OUTCOMES[name]);
    const result = callToolResult(envelope);
    assert.deepEqual(Object.keys(result), ["content", "structuredContent", "isError"]);
    assert.deepEqual(result.content, [
      { type: "text", text: envelope.summary() },
      { type: "text", text: envelope.stringify() },
    ]);
    assert.deepEqual(result.structuredContent, envelope.toJSON());
    assert.equal(result.isError, name === "access_failure");
  });
}

test("the protocol revision rendered is 2025-06-18", () => {
  assert.equal(MCP_PROTOCOL_REVISION, "2025-06-18");
});
