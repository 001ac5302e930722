/** One envelope of each class, as a call through an adapter returns it. */

import { type Attempt, accessFailure, empty, Envelope, type Outcome, partial, success } from "../../src/index.js";

const STARTED = "2027-01-15T08:00:00.000000Z";

/** A successful outcome, an empty one, a partial one and an access failure (transient, exhausted). */
export const OUTCOMES: Readonly<Record<Outcome["class"], Outcome>> = {
  success: success({ items: ["cats-1", "cats-2"] }, { items: 2, scope: "catalogue" }),
  empty: empty({ items: 0, scope: "catalogue" }),
  partial: partial({ items: ["cats-1"] }, { kind: "size_cap", covered: "items 1-1 of 5", dropped: "4 item(s)", returned: 1, expected: 5 }),
  access_failure: accessFailure({
    kind: "server_error",
    retryable: true,
    message: "HTTP 503: the catalogue is busy",
    status: 503,
    error_type: "503",
  }),
};

/** The outcome classes, in the vocabulary's order. */
export const CLASSES = ["success", "empty", "partial", "access_failure"] as const;

/** An envelope with `outcome`: one attempt, or three for an access failure. */
export function answered(outcome: Outcome): Envelope {
  const attempt = (number: number): Attempt => ({
    number,
    started_at: STARTED,
    duration_ms: 40,
    class: outcome.class,
    ...(outcome.class === "access_failure"
      ? { failure_kind: outcome.failure.kind, status: 503, retry_action: number < 3 ? "retry" : "exhausted", error_type: "503" }
      : outcome.class === "partial"
        ? { failure_kind: outcome.truncation.kind, retry_action: "exhausted" }
        : {}),
    ...(outcome.class === "access_failure" && number < 3 ? { backoff_ms: 100 } : {}),
  });
  const count = outcome.class === "access_failure" ? 3 : 1;
  return new Envelope({
    tool: "catalogue.search",
    target: "https://catalogue.example/v1/items",
    outcome,
    provenance: {
      source_system: "catalogue.example",
      adapter: "candor-adapter-typescript/0.1.0",
      started_at: STARTED,
      finished_at: "2027-01-15T08:00:00.340000Z",
    },
    attempts: Array.from({ length: count }, (_, index) => attempt(index + 1)),
  });
}
