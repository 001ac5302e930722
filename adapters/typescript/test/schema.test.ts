import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";

import {
  AccessFailureKind,
  EvidenceKind,
  FailureKind,
  LifecycleState,
  NextAction,
  OutcomeClass,
  PartialKind,
  RetryAction,
  type Vocabulary,
} from "../src/index.js";
import { SPEC_DIR, readJson } from "./support/paths.js";

interface Schema {
  $defs: Record<string, { enum?: string[]; oneOf?: { properties: { state?: { const: string } } }[] }>;
}

const SCHEMA = readJson(path.join(SPEC_DIR, "v1", "envelope.v1.schema.json")) as Schema;

const VOCABULARIES: [string, Vocabulary<string>][] = [
  ["OutcomeClass", OutcomeClass],
  ["FailureKind", FailureKind],
  ["AccessFailureKind", AccessFailureKind],
  ["PartialKind", PartialKind],
  ["RetryAction", RetryAction],
  ["NextAction", NextAction],
  ["EvidenceKind", EvidenceKind],
];

for (const [name, vocab] of VOCABULARIES) {
  test(`the schema's ${name} enum is the vocabulary, in order`, () => {
    assert.deepEqual(SCHEMA.$defs[name]?.enum, [...vocab.values]);
  });
}

test("the schema's lifecycle states are the vocabulary, in order", () => {
  const states = SCHEMA.$defs["Lifecycle"]?.oneOf?.map((variant) => variant.properties.state?.const);
  assert.deepEqual(states, [...LifecycleState.values]);
});

test("the access failure kinds and the partial kinds are failure kinds, deadline in both", () => {
  for (const kind of [...AccessFailureKind.values, ...PartialKind.values]) {
    assert.ok((FailureKind.values as readonly string[]).includes(kind), kind);
  }
  assert.ok(AccessFailureKind.values.includes("deadline"));
  assert.ok(PartialKind.values.includes("deadline"));
});
