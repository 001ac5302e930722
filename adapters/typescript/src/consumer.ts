/**
 * The consumer's side: spending the outcome a call was given, all four classes of it.
 *
 * {@link matchOutcome} branches on an envelope's class with one arm per class. Every arm is a
 * required property, so that the type checker refuses a match that leaves a class out, and each
 * arm is given its class's outcome:
 *
 * ```ts
 * const text = matchOutcome(envelope, {
 *   success: (outcome) => `${outcome.extent.items ?? "?"} item(s)`,
 *   empty: (_, envelope) => `nothing in ${envelope.target}`,
 *   partial: (outcome) => `only ${outcome.truncation.covered}`,
 *   access_failure: (outcome) => `unknown: ${outcome.failure.message}`,
 * });
 * ```
 *
 * {@link modelView} and {@link modelText} are what a model is handed for a call, by the framework
 * integrations (`@candor/adapter/ai`): the summary first (its words follow the class), then the
 * outcome with its class and the legal next actions. An access failure is never handed over as
 * an empty result.
 */

import type {
  AccessFailureOutcome,
  EmptyOutcome,
  Envelope,
  PartialOutcome,
  SuccessOutcome,
} from "./envelope.js";
import type { JsonObject, JsonValue } from "./json.js";
import type { NextAction } from "./vocab.js";

/**
 * One arm per class for {@link matchOutcome}, each called with its class's outcome and the
 * envelope. All four are required: there is no default arm.
 */
export interface OutcomeArms<S, E, P, F> {
  /** Contact made, and the answer is complete. */
  readonly success: (outcome: SuccessOutcome, envelope: Envelope) => S;
  /** Contact made, and the source verified that nothing matches. */
  readonly empty: (outcome: EmptyOutcome, envelope: Envelope) => E;
  /** Contact made, and the answer was cut off: never the whole answer. */
  readonly partial: (outcome: PartialOutcome, envelope: Envelope) => P;
  /** No usable contact: nothing can be concluded about the source, not even an absence. */
  readonly access_failure: (outcome: AccessFailureOutcome, envelope: Envelope) => F;
}

const ARMS = ["success", "empty", "partial", "access_failure"] as const;

/**
 * Calls the arm of the envelope's class with its typed outcome and the envelope, and returns
 * what the arm returns.
 *
 * Every arm is required, so that no class is left to a default: a match without one is a type
 * error (TS2345, "Property 'partial' is missing"), and, in code that is not type-checked, a
 * `TypeError` whatever the envelope's class. The result is the union of the arms' result types,
 * one type when they agree.
 *
 * @throws TypeError when an arm is not a function.
 */
export function matchOutcome<S, E, P, F>(envelope: Envelope, arms: OutcomeArms<S, E, P, F>): S | E | P | F {
  const missing = ARMS.filter((arm) => {
    const given: unknown = Reflect.get(arms, arm);
    return typeof given !== "function";
  });
  if (missing.length > 0) {
    throw new TypeError(`matchOutcome needs one arm per class; missing: ${missing.join(", ")}`);
  }
  const outcome = envelope.outcome;
  switch (outcome.class) {
    case "success":
      return arms.success(outcome, envelope);
    case "empty":
      return arms.empty(outcome, envelope);
    case "partial":
      return arms.partial(outcome, envelope);
    case "access_failure":
      return arms.access_failure(outcome, envelope);
  }
}

/** What a model is given for a call, as {@link modelView} returns it. */
export interface ModelView {
  /** The one-line summary, whose words follow the class (contract 10.4). */
  readonly summary: string;
  /** The envelope's outcome: its `class` and the payload, extent, truncation or failure it carries. */
  readonly outcome: JsonObject;
  /** What may legally be done next. */
  readonly next_actions: readonly NextAction[];
}

function outcomeJson(envelope: Envelope): JsonObject {
  const outcome: JsonValue | undefined = envelope.toJSON()["outcome"];
  if (outcome === undefined || outcome === null || typeof outcome !== "object" || Array.isArray(outcome)) {
    throw new TypeError("an envelope's JSON has an outcome object");
  }
  return outcome;
}

/**
 * What a model is given for a call, as JSON values: `summary` (the one-line summary whose words
 * follow the class), `outcome` (the envelope's outcome: its `class` and what that class carries)
 * and `next_actions` (what may legally be done next), in that order.
 */
export function modelView(envelope: Envelope): ModelView {
  return {
    summary: envelope.summary(),
    outcome: outcomeJson(envelope),
    next_actions: [...envelope.next_actions],
  };
}

/**
 * What a model is given for a call, as text: the summary on the first line, then the outcome and
 * the next actions of {@link modelView} as one line of JSON.
 */
export function modelText(envelope: Envelope): string {
  const { summary, outcome, next_actions } = modelView(envelope);
  return `${summary}\n${JSON.stringify({ outcome, next_actions })}`;
}
