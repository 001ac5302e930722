/**
 * The conformance vectors of `spec/vectors/`, run through this adapter.
 *
 * Every case is one test. A `call` case runs through `Adapter.call` on a fake clock with a fixed
 * jitter; its envelope, `tool.outcome` and `tool.lifecycle` events, `tool.call` span and
 * `tool.outcomes` increment are compared with what the case expects, and so are the log records
 * the call emitted as its events happened, with the matchers of the vectors' README (the same
 * semantics as the Rust and Python runners). An `envelope` case is read with
 * `Envelope.fromJSON`. A case that fails fails its test; none is skipped.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import {
  Adapter,
  type AttemptContext,
  attr,
  type BodyEnd,
  Envelope,
  FixedJitter,
  HttpArrival,
  HttpClassifier,
  type HttpExchange,
  HttpResponse,
  InvalidEnvelope,
  type JsonValue,
  LIFECYCLE_EVENT,
  NS_PER_MS,
  OUTCOME_EVENT,
  OUTCOMES_COUNTER,
  RetryPolicy,
  TOOL_CALL_SPAN,
  TransportError,
  type TransportErrorKind,
} from "../src/index.js";
import { FakeClock } from "../src/testing.js";
import { SPEC_DIR, VECTORS_DIR, readJson, vectorFiles } from "./support/paths.js";
import { attributes, MemoryTelemetry, spanJson, timeText } from "./support/telemetry.js";

type Json = JsonValue;
type JsonMap = Record<string, Json>;

interface Case {
  readonly file: string;
  readonly data: JsonMap;
}

const CALL_FIELDS = new Set([
  "kind",
  "id",
  "rules",
  "description",
  "tool",
  "target",
  "classifier",
  "policy",
  "attempt_timeout_ms",
  "deadline_ms",
  "jitter",
  "authority",
  "actor",
  "method",
  "idempotent",
  "idempotency_key",
  "trace_every_call",
  "start",
  "attempts",
  "expect",
]);
const ENVELOPE_FIELDS = new Set(["kind", "id", "rules", "description", "json", "expect"]);
const CLASSIFIER_FIELDS = new Set([
  "not_found",
  "items_at",
  "total_at",
  "total_header",
  "truncated_when",
  "has_more_at",
  "operation_id_at",
  "request_id_header",
  "scope",
]);
const STEP_FIELDS = new Set(["after_ms", "response", "transport_error", "hang", "stall"]);
const RESPONSE_FIELDS = new Set(["status", "headers", "body", "body_end"]);
const STALL_FIELDS = new Set(["status", "headers", "body"]);
const TRANSPORT_FIELDS = new Set(["kind", "message"]);
const EXPECT_FIELDS = new Set(["envelope", "events", "span", "counter"]);
const POLICY_FIELDS = new Set([
  "max_attempts",
  "initial_backoff_ms",
  "max_backoff_ms",
  "max_elapsed_ms",
  "retry_after_cap_ms",
]);

function isMap(value: Json | undefined): value is JsonMap {
  return value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value);
}

function map(value: Json | undefined): JsonMap {
  return isMap(value) ? value : {};
}

function list(value: Json | undefined): Json[] {
  return Array.isArray(value) ? value : [];
}

function text(value: Json | undefined): string {
  if (typeof value !== "string") {
    throw new TypeError(`expected a text, got ${JSON.stringify(value)}`);
  }
  return value;
}

function num(value: Json | undefined, fallback?: number): number {
  if (value === undefined && fallback !== undefined) {
    return fallback;
  }
  if (typeof value !== "number") {
    throw new TypeError(`expected a number, got ${JSON.stringify(value)}`);
  }
  return value;
}

function optionalText(value: Json | undefined): string | undefined {
  return value === undefined || value === null ? undefined : text(value);
}

/** Every case of every vector file, in file order. */
function load(): Case[] {
  const files = vectorFiles();
  assert.ok(files.length > 0, `no vector files in ${VECTORS_DIR}`);
  const cases: Case[] = [];
  for (const file of files) {
    const document = map(readJson(path.join(VECTORS_DIR, file)) as Json);
    assert.equal(document["spec_version"], 1, file);
    assert.equal(`${text(document["area"])}.json`, file, "a file is named by its area");
    for (const data of list(document["cases"])) {
      cases.push({ file, data: map(data) });
    }
  }
  return cases;
}

const CASES = load();

test("case ids are unique and every case names a rule", () => {
  const seen = new Set<string>();
  for (const { file, data } of CASES) {
    const id = text(data["id"]);
    assert.ok(!seen.has(id), `${file}: ${id} twice`);
    seen.add(id);
    assert.ok(list(data["rules"]).length > 0, `${file}: ${id} names no rule`);
  }
});

test("every rule of the contract has a vector, and every vector names a rule of it", () => {
  const contract = readFileSync(path.join(SPEC_DIR, "v1", "contract.md"), "utf8");
  const rules = new Set(Array.from(contract.matchAll(/\*\*\[([A-Z0-9-]+)\]\*\*/g), (m) => m[1] ?? ""));
  assert.ok(rules.size > 20, `only ${rules.size} rule ids in the contract`);
  const covered = new Set<string>();
  for (const { file, data } of CASES) {
    for (const rule of list(data["rules"])) {
      assert.ok(rules.has(text(rule)), `${file}: ${text(data["id"])} names ${text(rule)}, which the contract lacks`);
      covered.add(text(rule));
    }
  }
  assert.deepEqual([...rules].filter((rule) => !covered.has(rule)), [], "rules without a vector");
});

for (const testCase of CASES) {
  test(`${testCase.file} ${text(testCase.data["id"])}`, async () => {
    const kind = testCase.data["kind"];
    const errors =
      kind === "call"
        ? await runCall(testCase.data)
        : kind === "envelope"
          ? runEnvelope(testCase.data)
          : [`unknown case kind ${JSON.stringify(kind)}`];
    assert.deepEqual(errors, [], `${testCase.file} ${text(testCase.data["id"])}:\n  ${errors.join("\n  ")}`);
  });
}

// --- Setting a case up ---------------------------------------------------------------------

function unknownFields(data: JsonMap, allowed: ReadonlySet<string>, what: string): string[] {
  return Object.keys(data)
    .filter((key) => !allowed.has(key))
    .map((key) => `unknown ${what} field ${JSON.stringify(key)}`);
}

function classifier(declared: JsonMap): HttpClassifier {
  const hasMore = declared["has_more_at"];
  const totalHeader = declared["total_header"];
  return new HttpClassifier({
    notFound: text(declared["not_found"]) as "confirmed_absent" | "unreachable",
    itemsAt: optionalText(declared["items_at"]),
    totalAt: optionalText(declared["total_at"]),
    totalHeader: totalHeader === undefined ? "x-total-count" : totalHeader === null ? null : text(totalHeader),
    truncatedWhen: list(declared["truncated_when"]).map((pair) => {
      const [at, value] = list(pair);
      return [text(at), value ?? null] as const;
    }),
    hasMoreAt: hasMore === undefined ? undefined : [text(list(hasMore)[0]), text(list(hasMore)[1])],
    operationIdAt: optionalText(declared["operation_id_at"]),
    requestIdHeader: optionalText(declared["request_id_header"]) ?? "x-request-id",
    scope: optionalText(declared["scope"]),
  });
}

function policy(declared: JsonMap): RetryPolicy {
  return new RetryPolicy({
    maxAttempts: num(declared["max_attempts"], 3),
    initialBackoffMs: num(declared["initial_backoff_ms"], 100),
    maxBackoffMs: num(declared["max_backoff_ms"], 5_000),
    maxElapsedMs: num(declared["max_elapsed_ms"], 30_000),
    retryAfterCapMs: num(declared["retry_after_cap_ms"], 30_000),
  });
}

function bodyEnd(declared: Json | undefined): BodyEnd | undefined {
  if (declared === undefined || declared === null || declared === "complete") {
    return undefined;
  }
  const fields = map(declared);
  const keys = Object.keys(fields);
  if (keys.length === 1 && keys[0] === "size_cap") {
    return { kind: "size_cap", limit: num(fields["size_cap"]) };
  }
  if (keys.length === 1 && keys[0] === "broken") {
    return { kind: "broken", error: text(fields["broken"]) };
  }
  throw new TypeError(`unknown body_end ${JSON.stringify(declared)}`);
}

function headers(declared: Json | undefined): [string, string][] {
  return list(declared).map((pair) => {
    const [name, value] = list(pair);
    return [text(name), text(value)];
  });
}

const never = (): Promise<never> => new Promise<never>(() => undefined);

/** What the scripted tool plays, and what it could not play. */
class Script {
  readonly errors: string[] = [];
  readonly keys: (string | undefined)[] = [];

  constructor(
    readonly steps: JsonMap[],
    readonly clock: FakeClock,
  ) {}

  async attempt(context: AttemptContext): Promise<HttpExchange> {
    this.keys.push(context.idempotencyKey);
    const step = this.steps.shift();
    if (step === undefined) {
      const message = `the adapter made attempt ${context.number} but the case lists fewer`;
      this.errors.push(message);
      return new TransportError("protocol", message);
    }
    try {
      if ("hang" in step) {
        return await never();
      }
      if ("stall" in step) {
        // The status, headers and body arrive at once, as a client records them; then nothing.
        const declared = map(step["stall"]);
        const arrival = context.receiving(
          new HttpArrival({
            status: num(declared["status"]),
            headers: headers(declared["headers"]),
            receivedAt: this.clock.wallNs(),
          }),
        );
        arrival.add(optionalText(declared["body"]) ?? "");
        return await never();
      }
      this.clock.advance(num(step["after_ms"]) * NS_PER_MS);
      if ("response" in step) {
        const response = map(step["response"]);
        const end = bodyEnd(response["body_end"]);
        return new HttpResponse({
          status: num(response["status"]),
          headers: headers(response["headers"]),
          body: optionalText(response["body"]) ?? "",
          ...(end === undefined ? {} : { bodyEnd: end }),
          receivedAt: this.clock.wallNs(),
        });
      }
      const error = map(step["transport_error"]);
      return new TransportError(text(error["kind"]) as TransportErrorKind, text(error["message"]));
    } catch (error) {
      const message = `step ${JSON.stringify(step)} cannot be played: ${String(error)}`;
      this.errors.push(message);
      return new TransportError("protocol", message);
    }
  }
}

async function runCall(data: JsonMap): Promise<string[]> {
  const expect = map(data["expect"]);
  const errors = [
    ...unknownFields(data, CALL_FIELDS, "case"),
    ...unknownFields(map(data["classifier"]), CLASSIFIER_FIELDS, "classifier"),
    ...unknownFields(map(data["policy"]), POLICY_FIELDS, "policy"),
    ...unknownFields(expect, EXPECT_FIELDS, "expect"),
    ...unknownFields(map(data["authority"]), new Set(["principal", "scope"]), "authority"),
  ];
  for (const step of list(data["attempts"])) {
    const fields = map(step);
    errors.push(
      ...unknownFields(fields, STEP_FIELDS, "step"),
      ...unknownFields(map(fields["response"]), RESPONSE_FIELDS, "response"),
      ...unknownFields(map(fields["stall"]), STALL_FIELDS, "stall"),
      ...unknownFields(map(fields["transport_error"]), TRANSPORT_FIELDS, "transport"),
    );
  }
  const telemetry = new MemoryTelemetry();
  try {
    const clock = new FakeClock(text(data["start"]));
    const authority = data["authority"];
    const made = data["idempotency_key"] === true;
    let adapter: Adapter<HttpExchange>;
    try {
      adapter = new Adapter({
        tool: text(data["tool"]),
        target: text(data["target"]),
        classifier: classifier(map(data["classifier"])),
        retry: policy(map(data["policy"])),
        attemptTimeoutMs: num(data["attempt_timeout_ms"], 10_000),
        deadlineMs: num(data["deadline_ms"], 30_000),
        authority: isMap(authority)
          ? {
              ...(authority["principal"] === undefined ? {} : { principal: text(authority["principal"]) }),
              ...(authority["scope"] === undefined ? {} : { scope: text(authority["scope"]) }),
            }
          : undefined,
        actor: optionalText(data["actor"]),
        method: optionalText(data["method"]) ?? "GET",
        idempotent: typeof data["idempotent"] === "boolean" ? data["idempotent"] : undefined,
        idempotencyKey: made,
        traceEveryCall: data["trace_every_call"] === true,
        tracerProvider: telemetry.tracerProvider,
        meterProvider: telemetry.meterProvider,
        loggerProvider: telemetry.loggerProvider,
        jitter: new FixedJitter(num(data["jitter"])),
        clock,
      });
    } catch (error) {
      return [...errors, `the case cannot be set up: ${String(error)}`];
    }
    const script = new Script(list(data["attempts"]).map(map), clock);
    const envelope = await adapter.call((context) => script.attempt(context));
    errors.push(...script.errors);
    if (script.steps.length > 0) {
      errors.push(`${script.steps.length} listed attempt(s) were never made`);
    }
    errors.push(...idempotencyKeys(script.keys, made));
    const generated: string[] = [];
    compareEnvelope(envelope, expect["envelope"] ?? null, errors, generated);
    await compareTelemetry(expect, telemetry, errors, generated);
    compareLogs(expect, telemetry, errors, generated);
    if (new Set(generated).size > 1) {
      errors.push(`the ids matched by $generated_id differ within the case: ${JSON.stringify(generated)}`);
    }
    return errors;
  } finally {
    await telemetry.shutdown();
  }
}

// --- Comparing what the adapter made -------------------------------------------------------

const GENERATED_ID = /^candor-[0-9a-f]{32}$/;

function idempotencyKeys(keys: readonly (string | undefined)[], made: boolean): string[] {
  if (!made) {
    return keys.some((key) => key !== undefined) ? [`attempts were given idempotency keys: ${JSON.stringify(keys)}`] : [];
  }
  if (new Set(keys).size !== 1) {
    return [`the attempts were not given one idempotency key: ${JSON.stringify(keys)}`];
  }
  const key = keys[0];
  return key !== undefined && GENERATED_ID.test(key) ? [] : [`${JSON.stringify(key)} is not an idempotency key the adapter made`];
}

function compareEnvelope(envelope: Envelope, expected: Json, errors: string[], generated: string[]): void {
  const actual = JSON.parse(envelope.stringify()) as JsonMap;
  const provenance = map(actual["provenance"]);
  const adapter = provenance["adapter"];
  delete provenance["adapter"];
  if (typeof adapter !== "string" || adapter === "") {
    errors.push(`provenance.adapter must name the adapter: ${JSON.stringify(adapter)}`);
  }
  compare(expected, actual, "envelope", errors, generated);
}

/**
 * Checks and removes a `tool.outcome` event's provenance attributes, which the cases do not list:
 * they equal the expected envelope's provenance, the adapter any non-empty text and the actor
 * absent when it has none. A `tool.lifecycle` event's are listed, and compared as listed.
 */
function checkProvenance(eventAttributes: Record<string, Json>, provenance: JsonMap, errors: string[]): void {
  for (const [name, key] of [
    [attr.PROVENANCE_SOURCE_SYSTEM, "source_system"],
    [attr.PROVENANCE_ACTOR, "actor"],
  ] as const) {
    const actual = eventAttributes[name];
    Reflect.deleteProperty(eventAttributes, name);
    if (!same(provenance[key], actual)) {
      errors.push(`${name}: ${JSON.stringify(actual)}, the envelope's ${key} is ${JSON.stringify(provenance[key])}`);
    }
  }
  const adapter = eventAttributes[attr.PROVENANCE_ADAPTER];
  Reflect.deleteProperty(eventAttributes, attr.PROVENANCE_ADAPTER);
  if (typeof adapter !== "string" || adapter === "") {
    errors.push(`${attr.PROVENANCE_ADAPTER} must name the adapter: ${JSON.stringify(adapter)}`);
  }
}

async function compareTelemetry(
  expect: JsonMap,
  telemetry: MemoryTelemetry,
  errors: string[],
  generated: string[],
): Promise<void> {
  const finished = telemetry.finishedSpans();
  const calls = finished.filter((span) => span.name === TOOL_CALL_SPAN);
  if (calls.length !== finished.length) {
    errors.push(`${finished.length - calls.length} span(s) other than ${TOOL_CALL_SPAN}`);
  }
  const provenance = map(map(expect["envelope"])["provenance"]);
  const events: Json[] = [];
  for (const call of calls) {
    for (const event of call.events) {
      const eventAttributes = attributes(event.attributes);
      if (event.name === OUTCOME_EVENT) {
        checkProvenance(eventAttributes, provenance, errors);
      }
      events.push({ name: event.name, time: timeText(event.time), attributes: eventAttributes });
    }
  }
  compare(expect["events"] ?? null, events, "events", errors, generated);
  let span: Json = null;
  const [only] = calls;
  if (calls.length === 1 && only !== undefined) {
    span = spanJson(only);
  } else if (calls.length > 1) {
    errors.push(`${calls.length} tool.call spans for one call`);
  }
  compare(expect["span"] ?? null, span, "span", errors, generated);
  compare(expect["counter"] ?? null, await counter(telemetry, errors), "counter", errors, generated);
}

/** The log records the call emitted (rule TELEMETRY-MOMENT), compared with the events they must be. */
function compareLogs(expect: JsonMap, telemetry: MemoryTelemetry, errors: string[], generated: string[]): void {
  const expected = list(expect["events"]).filter((event) => {
    const fields = map(event);
    return fields["name"] === LIFECYCLE_EVENT || map(fields["attributes"])[attr.RETRY_ACTION] === "retry";
  });
  const [call] = telemetry.finishedSpans().filter((span) => span.name === TOOL_CALL_SPAN);
  const spanIds = call === undefined ? undefined : `${call.spanContext().traceId}/${call.spanContext().spanId}`;
  const provenance = map(map(expect["envelope"])["provenance"]);
  const records: Json[] = [];
  for (const record of telemetry.logRecords()) {
    const ids = record.spanContext === undefined ? undefined : `${record.spanContext.traceId}/${record.spanContext.spanId}`;
    if (ids !== spanIds) {
      errors.push(`a log record is not in the call's span: ${String(ids)}, the span ${String(spanIds)}`);
    }
    const recordAttributes = attributes(record.attributes as Record<string, string | number | boolean>);
    if (record.eventName === OUTCOME_EVENT) {
      checkProvenance(recordAttributes, provenance, errors);
    }
    records.push({ name: record.eventName ?? null, time: timeText(record.hrTime), attributes: recordAttributes });
  }
  compare(expected, records, "log records", errors, generated);
}

/** The call's one increment of `tool.outcomes`: the one attribute set not at 0. */
async function counter(telemetry: MemoryTelemetry, errors: string[]): Promise<Json> {
  const counted: Json[] = [];
  for (const point of await telemetry.points()) {
    if (point.name !== OUTCOMES_COUNTER) {
      continue;
    }
    if (point.kind !== "sum") {
      errors.push(`${OUTCOMES_COUNTER} is not a sum`);
    } else if (!point.monotonic) {
      errors.push(`${OUTCOMES_COUNTER} is not monotonic`);
    }
    if (point.value !== 0) {
      counted.push({ name: point.name, unit: point.unit, attributes: point.attributes, value: point.value });
    }
  }
  if (counted.length === 1) {
    return counted[0] ?? null;
  }
  errors.push(counted.length === 0 ? `nothing counted on ${OUTCOMES_COUNTER}` : `${counted.length} attribute sets counted: ${JSON.stringify(counted)}`);
  return null;
}

function runEnvelope(data: JsonMap): string[] {
  const expect = map(data["expect"]);
  const errors = [...unknownFields(data, ENVELOPE_FIELDS, "case"), ...unknownFields(expect, new Set(["valid", "error"]), "expect")];
  let envelope: Envelope;
  try {
    envelope = Envelope.fromJSON(data["json"]);
  } catch (error) {
    if (!(error instanceof InvalidEnvelope)) {
      return [...errors, `the reader threw ${String(error)}`];
    }
    if (expect["valid"] === true) {
      errors.push(`refused a valid envelope: ${error.message}`);
    } else if (expect["error"] !== error.rule) {
      errors.push(`refused as ${error.rule} (${error.message}), expected ${JSON.stringify(expect["error"])}`);
    }
    return errors;
  }
  if (expect["valid"] !== true) {
    errors.push("read an envelope the contract refuses");
  } else {
    compare(data["json"] ?? null, JSON.parse(envelope.stringify()) as Json, "written again", errors, []);
    // Read from its text too, where numbers keep how they were written.
    const again = Envelope.parse(JSON.stringify(data["json"]));
    compare(data["json"] ?? null, again.toJSON(), "read from text and written again", errors, []);
  }
  return errors;
}

// --- The comparison, as the Rust and Python runners make it --------------------------------

const MATCHER_KEYS = new Set(["$contains", "$excludes", "$max_chars", "$any", "$generated_id"]);

function isMatcher(value: Json): value is JsonMap {
  return isMap(value) && Object.keys(value).length > 0 && Object.keys(value).every((key) => key.startsWith("$"));
}

/** JSON equality: the same type and value, objects with the same members in any order. */
function same(a: Json | undefined, b: Json | undefined): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  }
  if (isMap(a) || isMap(b)) {
    if (!isMap(a) || !isMap(b)) {
      return false;
    }
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => key in b && same(a[key], b[key]));
  }
  return a === b;
}

function compare(expected: Json, actual: Json, at: string, errors: string[], generated: string[]): void {
  if (isMatcher(expected)) {
    matchText(expected, actual, at, errors, generated);
  } else if (isMap(expected) && isMap(actual)) {
    for (const key of [...new Set([...Object.keys(expected), ...Object.keys(actual)])].sort()) {
      const where = `${at}.${key}`;
      const want = expected[key];
      const got = actual[key];
      if (want !== undefined && got !== undefined) {
        compare(want, got, where, errors, generated);
      } else if (want !== undefined) {
        errors.push(`${where}: missing, expected ${JSON.stringify(want)}`);
      } else {
        errors.push(`${where}: unexpected ${JSON.stringify(got)}`);
      }
    }
  } else if (Array.isArray(expected) && Array.isArray(actual) && expected.length === actual.length) {
    expected.forEach((want, index) => {
      compare(want, actual[index] ?? null, `${at}[${index}]`, errors, generated);
    });
  } else if (!same(expected, actual)) {
    errors.push(`${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

function matchText(matcher: JsonMap, actual: Json, at: string, errors: string[], generated: string[]): void {
  if (typeof actual !== "string") {
    errors.push(`${at}: expected a text, got ${JSON.stringify(actual)}`);
    return;
  }
  const words = (key: string): string[] => list(matcher[key]).filter((word): word is string => typeof word === "string");
  for (const key of Object.keys(matcher)) {
    if (!MATCHER_KEYS.has(key)) {
      errors.push(`${at}: unknown matcher ${key}`);
    }
  }
  for (const word of words("$contains")) {
    if (!actual.includes(word)) {
      errors.push(`${at}: ${JSON.stringify(actual)} does not contain ${JSON.stringify(word)}`);
    }
  }
  for (const word of words("$excludes")) {
    if (actual.includes(word)) {
      errors.push(`${at}: ${JSON.stringify(actual)} contains ${JSON.stringify(word)}`);
    }
  }
  if (matcher["$generated_id"] === true) {
    if (!GENERATED_ID.test(actual)) {
      errors.push(`${at}: ${JSON.stringify(actual)} is not an id the adapter made`);
    }
    generated.push(actual);
  }
  const limit = matcher["$max_chars"];
  if (typeof limit === "number" && Array.from(actual).length > limit) {
    errors.push(`${at}: ${Array.from(actual).length} characters, at most ${limit} expected`);
  }
}
