/**
 * Reading an envelope from JSON, refusing whatever the contract refuses (rules ENVELOPE-SHAPE,
 * ENVELOPE-VERSION and ENVELOPE-NEXT-ACTIONS, checked in that order).
 */

import {
  type Attempt,
  type Authority,
  ENVELOPE_SCHEMA_VERSION,
  Envelope,
  type Evidence,
  type Extent,
  type Failure,
  type Lifecycle,
  type Operation,
  type Outcome,
  type Provenance,
  type Resource,
  type Truncation,
} from "./envelope.js";
import { fromPlain, type JsonNode, JsonNumber, JsonParseError, parseJsonText, toPlain } from "./json.js";
import { formatTimestamp, parseTimestamp } from "./timestamps.js";
import {
  AccessFailureKind,
  echo,
  EvidenceKind,
  FailureKind,
  LifecycleState,
  NextAction,
  OutcomeClass,
  PartialKind,
  RetryAction,
  UnknownValueError,
  type Vocabulary,
  parseMember,
} from "./vocab.js";

/** Which rule an envelope read from JSON broke. */
export type EnvelopeRule = "schema" | "version" | "next_actions";

/** An envelope read from JSON was refused; `rule` says which rule it broke. */
export class InvalidEnvelope extends Error {
  /** `schema`, `version` or `next_actions`. */
  readonly rule: EnvelopeRule;
  /** Where in the JSON the problem is, e.g. `outcome.failure.kind` (empty for the whole). */
  readonly path: string;

  constructor(rule: EnvelopeRule, message: string, path = "") {
    super(path === "" ? message : `${path}: ${message}`);
    this.name = "InvalidEnvelope";
    this.rule = rule;
    this.path = path;
  }
}

type Fields = Map<string, JsonNode>;

function schema(path: string, message: string): InvalidEnvelope {
  return new InvalidEnvelope("schema", message, path);
}

function at(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function kindOf(node: JsonNode): string {
  if (node === null) {
    return "null";
  }
  if (typeof node === "boolean") {
    return "a boolean";
  }
  if (typeof node === "string") {
    return "a string";
  }
  if (node instanceof JsonNumber) {
    return "a number";
  }
  return Array.isArray(node) ? "a list" : "an object";
}

/** An object with exactly these fields (an optional one may be absent or null). */
function object(node: JsonNode, path: string, required: readonly string[], optional: readonly string[] = []): Fields {
  if (!(node instanceof Map)) {
    throw schema(path, `expected an object, got ${kindOf(node)}`);
  }
  for (const key of node.keys()) {
    if (!required.includes(key) && !optional.includes(key)) {
      throw schema(path, `unknown field \`${echo(key)}\``);
    }
  }
  for (const key of required) {
    if (!node.has(key)) {
      throw schema(path, `missing field \`${key}\``);
    }
  }
  return node;
}

function field(data: Fields, key: string): JsonNode {
  return data.get(key) ?? null;
}

function str(node: JsonNode, path: string): string {
  if (typeof node !== "string") {
    throw schema(path, `expected a string, got ${kindOf(node)}`);
  }
  return node;
}

function bool(node: JsonNode, path: string): boolean {
  if (typeof node !== "boolean") {
    throw schema(path, `expected a boolean, got ${kindOf(node)}`);
  }
  return node;
}

function uint(node: JsonNode, path: string, bits: number): number {
  if (!(node instanceof JsonNumber) || node.integer === undefined) {
    throw schema(path, `expected an unsigned integer, got ${kindOf(node)}`);
  }
  if (node.integer < 0n || node.integer >= 2n ** BigInt(bits)) {
    throw schema(path, `${node.integer} is outside the range of a u${bits}`);
  }
  return node.value;
}

function member<T extends string>(vocab: Vocabulary<T>, node: JsonNode, path: string): T {
  try {
    return parseMember(vocab, node);
  } catch (error) {
    if (error instanceof UnknownValueError) {
      throw schema(path, error.message);
    }
    throw error;
  }
}

function optional<T>(data: Fields, key: string, path: string, read: (node: JsonNode, path: string) => T): T | undefined {
  const node = field(data, key);
  return node === null ? undefined : read(node, at(path, key));
}

function timestamp(node: JsonNode, path: string): string {
  const text = str(node, path);
  try {
    return formatTimestamp(parseTimestamp(text));
  } catch (error) {
    throw schema(path, error instanceof Error ? error.message : "invalid timestamp");
  }
}

/** `T` with each field that may be `undefined` made optional instead. */
type Defined<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};

/** Copies the fields that have a value, so that an absent one is left out. */
function defined<T extends object>(value: T): Defined<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Defined<T>;
}

const u16 = (node: JsonNode, path: string): number => uint(node, path, 16);
const u64 = (node: JsonNode, path: string): number => uint(node, path, 64);

function extent(node: JsonNode, path: string): Extent {
  const data = object(node, path, [], ["items", "declared_total", "scope"]);
  return defined({
    items: optional(data, "items", path, u64),
    declared_total: optional(data, "declared_total", path, u64),
    scope: optional(data, "scope", path, str),
  });
}

function truncation(node: JsonNode, path: string): Truncation {
  const data = object(node, path, ["kind", "covered", "dropped"], ["returned", "expected"]);
  return defined({
    kind: member(PartialKind, field(data, "kind"), at(path, "kind")),
    covered: str(field(data, "covered"), at(path, "covered")),
    dropped: str(field(data, "dropped"), at(path, "dropped")),
    returned: optional(data, "returned", path, u64),
    expected: optional(data, "expected", path, u64),
  });
}

function failure(node: JsonNode, path: string): Failure {
  const data = object(node, path, ["kind", "retryable", "message"], ["status", "error_type", "retry_after_ms"]);
  return defined({
    kind: member(AccessFailureKind, field(data, "kind"), at(path, "kind")),
    retryable: bool(field(data, "retryable"), at(path, "retryable")),
    message: str(field(data, "message"), at(path, "message")),
    status: optional(data, "status", path, u16),
    error_type: optional(data, "error_type", path, str),
    retry_after_ms: optional(data, "retry_after_ms", path, u64),
  });
}

const OUTCOME_FIELDS: Record<OutcomeClass, readonly string[]> = {
  success: ["payload", "extent"],
  empty: ["extent"],
  partial: ["payload", "truncation"],
  access_failure: ["failure"],
};

/** The tag of a tagged object: the member of `vocab` that its field `key` names. */
function tag<T extends string>(node: JsonNode, path: string, key: string, vocab: Vocabulary<T>): T {
  if (!(node instanceof Map)) {
    throw schema(path, `expected an object, got ${kindOf(node)}`);
  }
  if (!node.has(key)) {
    throw schema(path, `missing field \`${key}\``);
  }
  return member(vocab, field(node, key), at(path, key));
}

function outcome(node: JsonNode, path: string): Outcome {
  const cls = tag(node, path, "class", OutcomeClass);
  const data = object(node, path, ["class", ...OUTCOME_FIELDS[cls]]);
  switch (cls) {
    case "success":
      return {
        class: "success",
        payload: toPlain(field(data, "payload")),
        extent: extent(field(data, "extent"), at(path, "extent")),
      };
    case "empty":
      return { class: "empty", extent: extent(field(data, "extent"), at(path, "extent")) };
    case "partial":
      return {
        class: "partial",
        payload: toPlain(field(data, "payload")),
        truncation: truncation(field(data, "truncation"), at(path, "truncation")),
      };
    case "access_failure":
      return { class: "access_failure", failure: failure(field(data, "failure"), at(path, "failure")) };
  }
}

function authority(node: JsonNode, path: string): Authority {
  const data = object(node, path, [], ["principal", "scope"]);
  return defined({
    principal: optional(data, "principal", path, str),
    scope: optional(data, "scope", path, str),
  });
}

function provenance(node: JsonNode, path: string): Provenance {
  const data = object(node, path, ["source_system", "adapter", "started_at", "finished_at"], ["actor"]);
  return defined({
    source_system: str(field(data, "source_system"), at(path, "source_system")),
    actor: optional(data, "actor", path, str),
    adapter: str(field(data, "adapter"), at(path, "adapter")),
    started_at: timestamp(field(data, "started_at"), at(path, "started_at")),
    finished_at: timestamp(field(data, "finished_at"), at(path, "finished_at")),
  });
}

function evidence(node: JsonNode, path: string): Evidence {
  const data = object(node, path, ["kind", "value"]);
  return {
    kind: member(EvidenceKind, field(data, "kind"), at(path, "kind")),
    value: str(field(data, "value"), at(path, "value")),
  };
}

function attempt(node: JsonNode, path: string): Attempt {
  const data = object(
    node,
    path,
    ["number", "started_at", "duration_ms", "class"],
    ["failure_kind", "status", "retry_action", "backoff_ms", "error_type"],
  );
  return defined({
    number: uint(field(data, "number"), at(path, "number"), 32),
    started_at: timestamp(field(data, "started_at"), at(path, "started_at")),
    duration_ms: u64(field(data, "duration_ms"), at(path, "duration_ms")),
    class: member(OutcomeClass, field(data, "class"), at(path, "class")),
    failure_kind: optional(data, "failure_kind", path, (n, p) => member(FailureKind, n, p)),
    status: optional(data, "status", path, u16),
    retry_action: optional(data, "retry_action", path, (n, p) => member(RetryAction, n, p)),
    backoff_ms: optional(data, "backoff_ms", path, u64),
    error_type: optional(data, "error_type", path, str),
  });
}

function operation(node: JsonNode, path: string): Operation {
  const data = object(node, path, ["id"], ["status_url", "generated"]);
  const generated = data.has("generated") ? bool(field(data, "generated"), at(path, "generated")) : false;
  return defined({
    id: str(field(data, "id"), at(path, "id")),
    status_url: optional(data, "status_url", path, str),
    generated: generated ? (true as const) : undefined,
  });
}

function resource(node: JsonNode, path: string): Resource {
  const data = object(node, path, ["id"], ["version"]);
  return defined({
    id: str(field(data, "id"), at(path, "id")),
    version: optional(data, "version", path, str),
  });
}

const LIFECYCLE_FIELDS: Record<LifecycleState, readonly [readonly string[], readonly string[]]> = {
  accepted: [[], []],
  queued: [[], []],
  running: [[], ["percent_complete"]],
  partial: [["covered"], ["resource"]],
  completed: [["verified_by"], ["resource"]],
  cancelled: [[], []],
  failed: [["reason"], []],
};

function lifecycle(node: JsonNode, path: string): Lifecycle {
  const state = tag(node, path, "state", LifecycleState);
  const [required, optionalFields] = LIFECYCLE_FIELDS[state];
  const data = object(node, path, ["state", "operation", ...required], optionalFields);
  const op = operation(field(data, "operation"), at(path, "operation"));
  switch (state) {
    case "running":
      return defined({
        state,
        operation: op,
        percent_complete: optional(data, "percent_complete", path, (n, p) => uint(n, p, 8)),
      });
    case "partial":
      return defined({
        state,
        operation: op,
        covered: str(field(data, "covered"), at(path, "covered")),
        resource: optional(data, "resource", path, resource),
      });
    case "completed":
      return defined({
        state,
        operation: op,
        verified_by: evidence(field(data, "verified_by"), at(path, "verified_by")),
        resource: optional(data, "resource", path, resource),
      });
    case "failed":
      return { state, operation: op, reason: str(field(data, "reason"), at(path, "reason")) };
    default:
      return { state, operation: op };
  }
}

const REQUIRED = ["schema_version", "tool", "target", "outcome", "next_actions", "provenance", "attempts"];
const OPTIONAL = ["authority", "evidence", "lifecycle"];

/** Reads an envelope from a parsed JSON node; see {@link readEnvelope}. */
export function readEnvelopeNode(node: JsonNode): Envelope {
  const data = object(node, "", REQUIRED, OPTIONAL);
  const version = uint(field(data, "schema_version"), "schema_version", 32);
  const attempts = field(data, "attempts");
  if (!Array.isArray(attempts)) {
    throw schema("attempts", `expected a list, got ${kindOf(attempts)}`);
  }
  const listed = field(data, "next_actions");
  if (!Array.isArray(listed)) {
    throw schema("next_actions", `expected a list, got ${kindOf(listed)}`);
  }
  const found = listed.map((item, index) => member(NextAction, item, `next_actions[${index}]`));
  const envelope = new Envelope({
    tool: str(field(data, "tool"), "tool"),
    target: str(field(data, "target"), "target"),
    outcome: outcome(field(data, "outcome"), "outcome"),
    provenance: provenance(field(data, "provenance"), "provenance"),
    attempts: attempts.map((item, index) => attempt(item, `attempts[${index}]`)),
    authority: optional(data, "authority", "", authority),
    evidence: optional(data, "evidence", "", evidence),
    lifecycle: optional(data, "lifecycle", "", lifecycle),
  });
  if (version !== ENVELOPE_SCHEMA_VERSION) {
    throw new InvalidEnvelope(
      "version",
      `unsupported envelope schema_version ${version}; this reader understands ${ENVELOPE_SCHEMA_VERSION}`,
      "schema_version",
    );
  }
  const legal = envelope.next_actions;
  if (found.length !== legal.length || found.some((action, index) => action !== legal[index])) {
    throw new InvalidEnvelope(
      "next_actions",
      `next_actions ${JSON.stringify(found)} do not match the ${envelope.outcome.class} outcome, ` +
        `which allows ${JSON.stringify(legal)}`,
      "next_actions",
    );
  }
  return envelope;
}

/**
 * Reads an envelope from JSON values (as `JSON.parse` returns them); a number that is a safe
 * integer counts as a JSON integer.
 *
 * @throws {@link InvalidEnvelope}.
 */
export function readEnvelope(value: unknown): Envelope {
  let node: JsonNode;
  try {
    node = fromPlain(value);
  } catch (error) {
    throw schema("", error instanceof Error ? error.message : "not JSON");
  }
  return readEnvelopeNode(node);
}

/**
 * Reads an envelope from JSON text; a field given twice, or text that is not JSON, is a
 * `schema` error.
 *
 * @throws {@link InvalidEnvelope}.
 */
export function parseEnvelope(text: string): Envelope {
  let node: JsonNode;
  try {
    node = parseJsonText(text, { refuseDuplicateKeys: true });
  } catch (error) {
    if (error instanceof JsonParseError) {
      throw schema("", error.duplicate === undefined ? `not JSON: ${error.message}` : error.message);
    }
    throw error;
  }
  return readEnvelopeNode(node);
}

