/**
 * The closed vocabularies of the contract (`spec/v1/registry.md`).
 *
 * Every value has exactly one spelling, in lower-case snake case. Reading one is exact and
 * case-sensitive: an unknown or differently cased value is refused with
 * {@link UnknownValueError}, never mapped to a default.
 *
 * Each vocabulary is a constant and a type of the same name: `OutcomeClass.values` lists the
 * spellings, and the type `OutcomeClass` is their union.
 */

/** A closed vocabulary: its name, as messages say it, and its spellings in order. */
export interface Vocabulary<T extends string> {
  /** The vocabulary's name in words, e.g. `outcome class`. */
  readonly name: string;
  /** Every value, in the order the contract lists them. */
  readonly values: readonly T[];
}

function vocabulary<const T extends string>(name: string, values: readonly T[]): Vocabulary<T> {
  return Object.freeze({ name, values: Object.freeze([...values]) });
}

/** The outcome of a call or an attempt: exactly one of four, with no catch-all. */
export const OutcomeClass = vocabulary("outcome class", [
  "success",
  "empty",
  "partial",
  "access_failure",
]);
/** One of the four outcome classes. */
export type OutcomeClass = (typeof OutcomeClass.values)[number];

/** Why an attempt was not a complete answer: the `tool.failure.kind` attribute. */
export const FailureKind = vocabulary("failure kind", [
  "timeout",
  "connect",
  "server_error",
  "rate_limited",
  "auth",
  "client_error",
  "protocol",
  "size_cap",
  "declared_total",
  "truncation_marker",
  "mid_stream",
  "operation_partial",
  "deadline",
  "dns",
  "tls",
  "tool_error",
  "cancelled",
  "unknown",
]);
/** A failure kind. */
export type FailureKind = (typeof FailureKind.values)[number];

/** Why an attempt made no usable contact: the kinds an access failure can carry. */
export const AccessFailureKind = vocabulary("access failure kind", [
  "timeout",
  "connect",
  "server_error",
  "rate_limited",
  "auth",
  "client_error",
  "protocol",
  "deadline",
  "dns",
  "tls",
  "tool_error",
  "cancelled",
  "unknown",
]);
/** An access failure kind (a subset of the failure kinds, with the same spellings). */
export type AccessFailureKind = (typeof AccessFailureKind.values)[number];

/** How an answer was cut off: the kinds a partial can carry. */
export const PartialKind = vocabulary("partial kind", [
  "size_cap",
  "declared_total",
  "truncation_marker",
  "mid_stream",
  "operation_partial",
  "deadline",
]);
/** A partial kind (a subset of the failure kinds, with the same spellings). */
export type PartialKind = (typeof PartialKind.values)[number];

/** What the retry policy did after an attempt: the `tool.retry.action` attribute. */
export const RetryAction = vocabulary("retry action", [
  "retry",
  "exhausted",
  "permanent",
  "accept_partial",
]);
/** A retry action. */
export type RetryAction = (typeof RetryAction.values)[number];

/** Where an asynchronous operation stands; an acceptance is never `completed`. */
export const LifecycleState = vocabulary("lifecycle state", [
  "accepted",
  "queued",
  "running",
  "partial",
  "completed",
  "cancelled",
  "failed",
]);
/** A lifecycle state. */
export type LifecycleState = (typeof LifecycleState.values)[number];

/** What a consumer may legally do next with an envelope. */
export const NextAction = vocabulary("next action", [
  "retry",
  "poll",
  "compensate",
  "escalate",
  "finish",
]);
/** A next action. */
export type NextAction = (typeof NextAction.values)[number];

/** What kind of handle verifies an outcome independently of the call that produced it. */
export const EvidenceKind = vocabulary("evidence kind", ["request_id", "receipt", "job_id", "query"]);
/** An evidence kind. */
export type EvidenceKind = (typeof EvidenceKind.values)[number];

/** The longest part of a refused value that an error message repeats. */
export const MAX_ECHO_CHARS = 64;

/** `value` cut to {@link MAX_ECHO_CHARS} characters, so that a hostile value cannot flood a log. */
export function echo(value: string): string {
  const chars = Array.from(value);
  return chars.length <= MAX_ECHO_CHARS ? value : `${chars.slice(0, MAX_ECHO_CHARS).join("")}…`;
}

/** A value as an error message shows it: a text as it is, anything else as JSON where it can be. */
export function show(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "undefined":
    case "function":
    case "symbol":
      return typeof value;
    case "bigint":
      return value.toString();
    default:
      try {
        return JSON.stringify(value);
      } catch {
        return Object.prototype.toString.call(value);
      }
  }
}

/** A value that is not a member of a closed vocabulary. */
export class UnknownValueError extends Error {
  /** Which vocabulary was asked for, e.g. `outcome class`. */
  readonly vocabulary: string;
  /** The refused value, cut to a bounded length. */
  readonly value: string;
  /** The accepted spellings. */
  readonly expected: readonly string[];

  constructor(vocabulary: string, value: unknown, expected: readonly string[]) {
    const shown = echo(show(value));
    super(`unknown ${vocabulary} ${JSON.stringify(shown)}; expected one of: ${expected.join(", ")}`);
    this.name = "UnknownValueError";
    this.vocabulary = vocabulary;
    this.value = shown;
    this.expected = expected;
  }
}

/** Whether `value` is spelled exactly as one of the vocabulary's values. */
export function isMember<T extends string>(vocab: Vocabulary<T>, value: unknown): value is T {
  return typeof value === "string" && (vocab.values as readonly string[]).includes(value);
}

/**
 * The member of `vocab` spelled exactly `value`.
 *
 * @throws {@link UnknownValueError} for anything else, another case or a value that is not a
 *   string included.
 */
export function parseMember<T extends string>(vocab: Vocabulary<T>, value: unknown): T {
  if (isMember(vocab, value)) {
    return value;
  }
  throw new UnknownValueError(vocab.name, value, vocab.values);
}

const TERMINAL_STATES: ReadonlySet<LifecycleState> = new Set(["partial", "completed", "cancelled", "failed"]);

/** Whether an operation in `state` can no longer change state. */
export function isTerminalState(state: LifecycleState): boolean {
  return TERMINAL_STATES.has(state);
}
