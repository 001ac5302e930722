/**
 * The envelope: what a call returns once the adapter has classified it (contract section 3).
 *
 * The types follow the envelope's JSON field for field (`spec/v1/envelope.v1.schema.json`), so
 * that a consumer in any language reads the same names:
 *
 * - an {@link Outcome} is exactly one of four classes, discriminated by `class`: an access
 *   failure carries no payload, a partial says what it covered and what it dropped;
 * - a {@link Lifecycle} is discriminated by `state`, and a `completed` one cannot be written
 *   without the evidence that verified it;
 * - the next actions are derived from the outcome and the lifecycle ({@link nextActions}), never
 *   set by hand, and a reader refuses an envelope whose list differs.
 *
 * Timestamps are strings in the envelope's own form, `2027-01-15T08:00:00.040000Z`.
 */

import { type JsonObject, type JsonValue, sortedKeys } from "./json.js";
import {
  type AccessFailureKind,
  type EvidenceKind,
  type FailureKind,
  isTerminalState,
  type LifecycleState,
  type NextAction,
  type OutcomeClass,
  type PartialKind,
  type RetryAction,
} from "./vocab.js";
import { parseEnvelope, readEnvelope } from "./wire.js";

/** The version of the envelope's JSON shape. */
export const ENVELOPE_SCHEMA_VERSION = 1;

/** What a success or an empty examined. */
export interface Extent {
  /** How many items the answer holds, when it is a collection. */
  readonly items?: number;
  /** The total the source declared, when it declared one. */
  readonly declared_total?: number;
  /** The scope examined, in the author's words. */
  readonly scope?: string;
}

/** What a partial covered and what it dropped. */
export interface Truncation {
  /** How the answer was cut off. */
  readonly kind: PartialKind;
  /** What the answer covered, e.g. `items 1-3 of 10`. */
  readonly covered: string;
  /** What was dropped, e.g. `7 item(s)`. */
  readonly dropped: string;
  /** How many items arrived, when known. */
  readonly returned?: number;
  /** How many items the source had, when known. */
  readonly expected?: number;
}

/** Why an access failure made no usable contact. */
export interface Failure {
  /** Why no usable answer arrived. */
  readonly kind: AccessFailureKind;
  /** Whether asking again could help; a final retryable failure means the budget ran out. */
  readonly retryable: boolean;
  /** What happened, in human words, credentials redacted. */
  readonly message: string;
  /** The HTTP status, when a status decided the failure. */
  readonly status?: number;
  /** A short, stable error identifier. */
  readonly error_type?: string;
  /** How long the source asked callers to wait (`Retry-After`), in milliseconds. */
  readonly retry_after_ms?: number;
}

/** Contact made, and the answer is complete: use it. */
export interface SuccessOutcome {
  readonly class: "success";
  /** The answer: any JSON value, `null` included. */
  readonly payload: JsonValue;
  /** What was examined. */
  readonly extent: Extent;
}

/** Contact made, and the source verified that nothing matches: a real absence. */
export interface EmptyOutcome {
  readonly class: "empty";
  /** What was examined and found empty. */
  readonly extent: Extent;
}

/** Contact made, and the answer was cut off: use what arrived, never as the whole. */
export interface PartialOutcome {
  readonly class: "partial";
  /** What arrived. */
  readonly payload: JsonValue;
  /** What the answer covered and what it dropped. */
  readonly truncation: Truncation;
}

/** No usable contact: nothing can be concluded about the source, not even an absence. */
export interface AccessFailureOutcome {
  readonly class: "access_failure";
  /** Why no usable answer arrived. */
  readonly failure: Failure;
}

/** What a call or an attempt produced: exactly one of four classes. */
export type Outcome = SuccessOutcome | EmptyOutcome | PartialOutcome | AccessFailureOutcome;

/** A success outcome. */
export function success(payload: JsonValue, extent: Extent = {}): SuccessOutcome {
  return { class: "success", payload, extent };
}

/** An empty outcome. */
export function empty(extent: Extent = {}): EmptyOutcome {
  return { class: "empty", extent };
}

/** A partial outcome. */
export function partial(payload: JsonValue, truncation: Truncation): PartialOutcome {
  return { class: "partial", payload, truncation };
}

/** An access failure outcome. */
export function accessFailure(failure: Failure): AccessFailureOutcome {
  return { class: "access_failure", failure };
}

/** The failure kind of an outcome: a partial's truncation kind, an access failure's kind. */
export function failureKindOf(outcome: Outcome): FailureKind | undefined {
  switch (outcome.class) {
    case "partial":
      return outcome.truncation.kind;
    case "access_failure":
      return outcome.failure.kind;
    default:
      return undefined;
  }
}

/** The principal or scope a call ran under. Never a secret. */
export interface Authority {
  /** Who the call ran as. */
  readonly principal?: string;
  /** What it was allowed to see. */
  readonly scope?: string;
}

/**
 * An authority as attributes carry it: `{principal}`, `scope={scope}` or
 * `{principal} scope={scope}`; `undefined` when it has neither.
 */
export function describeAuthority(authority: Authority): string | undefined {
  const { principal, scope } = authority;
  if (principal !== undefined && scope !== undefined) {
    return `${principal} scope=${scope}`;
  }
  if (principal !== undefined) {
    return principal;
  }
  return scope === undefined ? undefined : `scope=${scope}`;
}

/** Where an answer came from. */
export interface Provenance {
  /** The system that answered (or failed to). */
  readonly source_system: string;
  /** Who made the call, when the author set it. */
  readonly actor?: string;
  /** The implementation and its version, `{name}/{version}`. */
  readonly adapter: string;
  /** The call's start. */
  readonly started_at: string;
  /** The moment the call's last attempt ended. */
  readonly finished_at: string;
}

/** A handle that verifies an outcome independently of the call that produced it. */
export interface Evidence {
  /** What kind of handle this is. */
  readonly kind: EvidenceKind;
  /** The handle itself: an id, a receipt or a query. */
  readonly value: string;
}

/** One attempt of a call, as the retry policy saw it. */
export interface Attempt {
  /** 1 for the first attempt, then 2, 3, … */
  readonly number: number;
  /** When the attempt started. */
  readonly started_at: string;
  /** How long it took, in whole milliseconds rounded down. */
  readonly duration_ms: number;
  /** The attempt's class. */
  readonly class: OutcomeClass;
  /** Why it was not a complete answer, for a partial or an access failure. */
  readonly failure_kind?: FailureKind;
  /** The HTTP status of an access failure decided by one. */
  readonly status?: number;
  /** What the policy did next, for a partial or an access failure. */
  readonly retry_action?: RetryAction;
  /** The wait before the next attempt, when the action is `retry`. */
  readonly backoff_ms?: number;
  /** The error identifier of an access failure that has one. */
  readonly error_type?: string;
}

/** The asynchronous operation a call started or reported on. */
export interface Operation {
  /** The operation's stable id. */
  readonly id: string;
  /** Where its status can be read, when the source said. */
  readonly status_url?: string;
  /** `true` when the source named no id and the adapter made `id` up; absent otherwise. */
  readonly generated?: true;
}

/** The resource an operation produced or changed, as its end named it. */
export interface Resource {
  /** The resource's stable id or URL. */
  readonly id: string;
  /** Its version, when the source said (an `ETag`, a version number). */
  readonly version?: string;
}

/** Where an asynchronous operation stands; each state carries what it needs. */
export type Lifecycle =
  | { readonly state: "accepted"; readonly operation: Operation }
  | { readonly state: "queued"; readonly operation: Operation }
  | { readonly state: "running"; readonly operation: Operation; readonly percent_complete?: number }
  | {
      readonly state: "partial";
      readonly operation: Operation;
      readonly covered: string;
      readonly resource?: Resource;
    }
  | {
      readonly state: "completed";
      readonly operation: Operation;
      readonly verified_by: Evidence;
      readonly resource?: Resource;
    }
  | { readonly state: "cancelled"; readonly operation: Operation }
  | { readonly state: "failed"; readonly operation: Operation; readonly reason: string };

const FINISH: readonly NextAction[] = Object.freeze(["finish"]);
const POLL: readonly NextAction[] = Object.freeze(["poll", "compensate", "escalate"]);
const FINISH_COMPENSATE: readonly NextAction[] = Object.freeze(["finish", "compensate", "escalate"]);
const COMPENSATE: readonly NextAction[] = Object.freeze(["compensate", "escalate"]);
const FINISH_ESCALATE: readonly NextAction[] = Object.freeze(["finish", "escalate"]);
const RETRY: readonly NextAction[] = Object.freeze(["retry", "escalate"]);
const ESCALATE: readonly NextAction[] = Object.freeze(["escalate"]);

/** The next actions an outcome and a lifecycle allow, in order (rule ENVELOPE-NEXT-ACTIONS). */
export function nextActions(outcome: Outcome, lifecycle?: Lifecycle): readonly NextAction[] {
  switch (outcome.class) {
    case "success": {
      const state: LifecycleState | undefined = lifecycle?.state;
      if (state === undefined || state === "completed") {
        return FINISH;
      }
      if (state === "accepted" || state === "queued" || state === "running") {
        return POLL;
      }
      return state === "partial" ? FINISH_COMPENSATE : COMPENSATE;
    }
    case "empty":
      return FINISH;
    case "partial":
      return FINISH_ESCALATE;
    case "access_failure":
      return outcome.failure.retryable ? RETRY : ESCALATE;
  }
}

/** What an {@link Envelope} is made of. */
export interface EnvelopeInit {
  /** The logical tool name. */
  readonly tool: string;
  /** The target, credentials redacted. */
  readonly target: string;
  /** What happened. */
  readonly outcome: Outcome;
  /** Where the answer came from. */
  readonly provenance: Provenance;
  /** Every attempt, in order. */
  readonly attempts: readonly Attempt[];
  /** The authority the call ran under, when the author set one. */
  readonly authority?: Authority | undefined;
  /** A handle that verifies the outcome. */
  readonly evidence?: Evidence | undefined;
  /** The state of an asynchronous operation. */
  readonly lifecycle?: Lifecycle | undefined;
}

/** The envelope's JSON, as {@link Envelope.toJSON} returns it. */
export type EnvelopeJson = JsonObject;

function put(out: JsonObject, key: string, value: JsonValue | undefined): void {
  if (value !== undefined && value !== null) {
    out[key] = value;
  }
}

function extentJson(extent: Extent): JsonObject {
  const out: JsonObject = {};
  put(out, "items", extent.items);
  put(out, "declared_total", extent.declared_total);
  put(out, "scope", extent.scope);
  return out;
}

function outcomeJson(outcome: Outcome): JsonObject {
  switch (outcome.class) {
    case "success":
      return { class: "success", payload: sortedKeys(outcome.payload), extent: extentJson(outcome.extent) };
    case "empty":
      return { class: "empty", extent: extentJson(outcome.extent) };
    case "partial": {
      const t = outcome.truncation;
      const truncation: JsonObject = { kind: t.kind, covered: t.covered, dropped: t.dropped };
      put(truncation, "returned", t.returned);
      put(truncation, "expected", t.expected);
      return { class: "partial", payload: sortedKeys(outcome.payload), truncation };
    }
    case "access_failure": {
      const f = outcome.failure;
      const failure: JsonObject = { kind: f.kind, retryable: f.retryable, message: f.message };
      put(failure, "status", f.status);
      put(failure, "error_type", f.error_type);
      put(failure, "retry_after_ms", f.retry_after_ms);
      return { class: "access_failure", failure };
    }
  }
}

function evidenceJson(evidence: Evidence): JsonObject {
  return { kind: evidence.kind, value: evidence.value };
}

function operationJson(operation: Operation): JsonObject {
  const out: JsonObject = { id: operation.id };
  put(out, "status_url", operation.status_url);
  if (operation.generated === true) {
    out["generated"] = true;
  }
  return out;
}

function resourceJson(resource: Resource): JsonObject {
  const out: JsonObject = { id: resource.id };
  put(out, "version", resource.version);
  return out;
}

/** A lifecycle's JSON: the state, the operation and the state's own fields. */
export function lifecycleJson(lifecycle: Lifecycle): JsonObject {
  const out: JsonObject = { state: lifecycle.state, operation: operationJson(lifecycle.operation) };
  switch (lifecycle.state) {
    case "running":
      put(out, "percent_complete", lifecycle.percent_complete);
      break;
    case "partial":
      out["covered"] = lifecycle.covered;
      if (lifecycle.resource !== undefined) {
        out["resource"] = resourceJson(lifecycle.resource);
      }
      break;
    case "completed":
      out["verified_by"] = evidenceJson(lifecycle.verified_by);
      if (lifecycle.resource !== undefined) {
        out["resource"] = resourceJson(lifecycle.resource);
      }
      break;
    case "failed":
      out["reason"] = lifecycle.reason;
      break;
    default:
      break;
  }
  return out;
}

function attemptJson(attempt: Attempt): JsonObject {
  const out: JsonObject = {
    number: attempt.number,
    started_at: attempt.started_at,
    duration_ms: attempt.duration_ms,
    class: attempt.class,
  };
  put(out, "failure_kind", attempt.failure_kind);
  put(out, "status", attempt.status);
  put(out, "retry_action", attempt.retry_action);
  put(out, "backoff_ms", attempt.backoff_ms);
  put(out, "error_type", attempt.error_type);
  return out;
}

/**
 * The typed result of one call.
 *
 * Branch on `envelope.outcome.class`: there are exactly four classes, and a consumer must handle
 * each. {@link Envelope.next_actions} is derived; {@link Envelope.toJSON} gives the JSON of
 * `spec/v1/envelope.v1.schema.json`, which `JSON.stringify(envelope)` writes; {@link
 * Envelope.fromJSON} and {@link Envelope.parse} read one back, refusing what the contract refuses.
 */
export class Envelope {
  /** Always {@link ENVELOPE_SCHEMA_VERSION}. */
  readonly schema_version: typeof ENVELOPE_SCHEMA_VERSION = ENVELOPE_SCHEMA_VERSION;
  /** The logical tool name. */
  readonly tool: string;
  /** The target, credentials redacted. */
  readonly target: string;
  /** What happened. */
  readonly outcome: Outcome;
  /** The authority the call ran under, when the author set one. */
  readonly authority: Authority | undefined;
  /** Where the answer came from. */
  readonly provenance: Provenance;
  /** A handle that verifies the outcome independently of the call. */
  readonly evidence: Evidence | undefined;
  /** Every attempt, in order. */
  readonly attempts: readonly Attempt[];
  /** The state of the asynchronous operation the call started or reported on. */
  readonly lifecycle: Lifecycle | undefined;

  constructor(init: EnvelopeInit) {
    this.tool = init.tool;
    this.target = init.target;
    this.outcome = init.outcome;
    this.authority = init.authority;
    this.provenance = init.provenance;
    this.evidence = init.evidence;
    // A frozen list is taken as it is (the adapter's own); any other is copied.
    this.attempts = Object.isFrozen(init.attempts) ? init.attempts : Object.freeze([...init.attempts]);
    this.lifecycle = init.lifecycle;
  }

  /** The class: the one field every consumer must branch on. */
  get outcomeClass(): OutcomeClass {
    return this.outcome.class;
  }

  /** What a consumer may legally do next, derived from the outcome and the lifecycle. */
  get next_actions(): readonly NextAction[] {
    return nextActions(this.outcome, this.lifecycle);
  }

  /**
   * A one-line human summary whose words follow from the class (contract 10.4): an access
   * failure is never worded as an absence, a partial never as the whole answer, and an
   * acceptance never as a completion.
   */
  summary(): string {
    const { tool, target, outcome, lifecycle } = this;
    switch (outcome.class) {
      case "success":
        if (lifecycle !== undefined && !isTerminalState(lifecycle.state)) {
          return (
            `${tool}: ${target} accepted the request; operation ${lifecycle.operation.id} is ` +
            `${lifecycle.state} and has not completed yet. Poll its status before relying on the result.`
          );
        }
        if (outcome.extent.items !== undefined) {
          return `${tool}: complete answer from ${target} with ${outcome.extent.items} item(s).`;
        }
        return `${tool}: complete answer from ${target}.`;
      case "empty":
        return `${tool}: ${target} was reached and confirmed that nothing matches. This is a verified absence.`;
      case "partial": {
        const t = outcome.truncation;
        return (
          `${tool}: PARTIAL answer from ${target} (${t.kind}): covered ${t.covered}; dropped ${t.dropped}. ` +
          "Do not treat it as the whole answer."
        );
      }
      case "access_failure": {
        const f = outcome.failure;
        const status = f.status === undefined ? "" : `, HTTP ${f.status}`;
        const action = f.retryable ? "exhausted" : "permanent";
        return (
          `${tool}: FAILED to get an answer from ${target} (${f.kind}${status}, ${action} after ` +
          `${this.attempts.length} attempt(s)): ${f.message}. The source's contents are unknown; ` +
          "nothing can be concluded from this call."
        );
      }
    }
  }

  /**
   * The envelope's JSON: optional fields without a value are left out (never `null`),
   * timestamps are in the envelope's form, and payload objects list their keys in order.
   */
  toJSON(): EnvelopeJson {
    const out: JsonObject = {
      schema_version: this.schema_version,
      tool: this.tool,
      target: this.target,
      outcome: outcomeJson(this.outcome),
      next_actions: [...this.next_actions],
    };
    if (this.authority !== undefined) {
      const authority: JsonObject = {};
      put(authority, "principal", this.authority.principal);
      put(authority, "scope", this.authority.scope);
      out["authority"] = authority;
    }
    const p = this.provenance;
    const provenance: JsonObject = { source_system: p.source_system };
    put(provenance, "actor", p.actor);
    provenance["adapter"] = p.adapter;
    provenance["started_at"] = p.started_at;
    provenance["finished_at"] = p.finished_at;
    out["provenance"] = provenance;
    if (this.evidence !== undefined) {
      out["evidence"] = evidenceJson(this.evidence);
    }
    out["attempts"] = this.attempts.map(attemptJson);
    if (this.lifecycle !== undefined) {
      out["lifecycle"] = lifecycleJson(this.lifecycle);
    }
    return out;
  }

  /** The envelope as compact JSON text. */
  stringify(): string {
    return JSON.stringify(this.toJSON());
  }

  /**
   * Reads an envelope from JSON values (as `JSON.parse` returns them).
   *
   * @throws InvalidEnvelope whose `rule` says which rule the value broke: `schema`,
   *   `version` or `next_actions`, checked in that order.
   */
  static fromJSON(value: unknown): Envelope {
    return readEnvelope(value);
  }

  /**
   * Reads an envelope from JSON text. Unlike {@link Envelope.fromJSON} it sees how numbers were
   * written (an integer field written `1.0` is refused) and refuses a field given twice.
   *
   * @throws InvalidEnvelope, as {@link Envelope.fromJSON}; text that is not JSON is a
   *   `schema` error.
   */
  static parse(text: string): Envelope {
    return parseEnvelope(text);
  }
}

