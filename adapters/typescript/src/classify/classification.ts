/**
 * Classification: a total function from what an attempt returned to exactly one outcome
 * (contract section 2). {@link HttpClassifier} holds the rules for tools reached over HTTP;
 * {@link FnClassifier} takes an author's own mapping for anything else.
 */

import type { Evidence, Lifecycle, Outcome } from "../envelope.js";
import type { HttpArrival } from "./http.js";

/** What one attempt's raw result was classified as. */
export interface Classification {
  /** The attempt's outcome. */
  readonly outcome: Outcome;
  /** A handle that verifies the outcome, when the response carried one. */
  readonly evidence?: Evidence | undefined;
  /** The state of an asynchronous operation the response reported on. */
  readonly lifecycle?: Lifecycle | undefined;
  /**
   * How long the source asked to wait before the status of the operation it accepted is read
   * (an acceptance's `Retry-After`), in milliseconds.
   */
  readonly pollAfterMs?: number | undefined;
}

/**
 * Classifies the raw result `R` of one attempt.
 *
 * `classify` must be total and deterministic: every raw result gets exactly one outcome, and the
 * same result always the same one, without throwing.
 */
export interface Classifier<R> {
  /** Classifies one attempt's raw result. */
  classify(raw: R): Classification;
  /**
   * Classifies what an attempt threw, or returns `undefined` when it is no outcome of the tool
   * (a bug in the calling code), which then propagates unchanged. Without it, everything an
   * attempt throws propagates.
   */
  classifyError?(error: unknown): Classification | undefined;
  /**
   * Classifies the response that had begun to arrive when the attempt's time ran out (rule
   * RETRY-ATTEMPT-TIMEOUT), `afterNs` nanoseconds into the attempt. Without it, an attempt whose
   * time ran out has no answer.
   */
  classifyArrival?(arrival: HttpArrival, afterNs: number): Classification;
}

/**
 * A classifier made of the author's own mapping, for tools that are not reached over HTTP.
 *
 * The mapping returns an {@link Outcome} or a whole {@link Classification}; `classifyError`, when
 * given, classifies what an attempt threw.
 */
export class FnClassifier<R> implements Classifier<R> {
  constructor(
    private readonly mapping: (raw: R) => Outcome | Classification,
    private readonly errors?: (error: unknown) => Outcome | Classification | undefined,
  ) {}

  /** Applies the mapping. */
  classify(raw: R): Classification {
    return asClassification(this.mapping(raw));
  }

  /** Applies the error mapping, when there is one. */
  classifyError(error: unknown): Classification | undefined {
    const result = this.errors?.(error);
    return result === undefined ? undefined : asClassification(result);
  }
}

function asClassification(result: Outcome | Classification): Classification {
  return "class" in result ? { outcome: result } : result;
}
