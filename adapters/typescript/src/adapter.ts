/**
 * The adapter: a configured tool that runs calls through classification, retry and telemetry.
 *
 * Build one {@link Adapter} per tool and share it. `await adapter.call(attempt => …)` runs one
 * call: the function makes one attempt and returns (or resolves to) the raw result, which the
 * classifier classifies; the adapter retries under its policy and returns the {@link Envelope}.
 *
 * Each attempt gets an {@link AttemptContext}: its number, its time (the attempt timeout, or less
 * when the call's deadline is nearer), the call's idempotency key when the adapter makes one, and
 * an `AbortSignal` that aborts when the attempt's time runs out. An attempt still running then is
 * abandoned (a result that arrives later is ignored) and is an access failure `timeout`
 * (`deadline` when the deadline cut it), unless its response had begun to arrive: a client
 * records the status and headers, then the body as it arrives, on the context
 * ({@link AttemptContext.receiving}), and the attempt's outcome is then that response with the
 * body received by then (a 2xx is a partial `mid_stream`; rule RETRY-ATTEMPT-TIMEOUT).
 *
 * A call that may have been applied is not sent again unless it is safe to repeat (rule
 * RETRY-UNSAFE): its method is idempotent, the author declares it `idempotent`, or the adapter
 * gives every attempt the call's idempotency key. A failure known not to have been processed (no
 * connection made, a 408, 429 or 503) is retried whatever the method.
 *
 * An adapter with a status reader also follows an operation that a call accepted to its end
 * (contract 10.8): {@link Adapter.callAndFollow} makes the call and, when its answer accepted an
 * operation, reads the operation's status until it ends; {@link Adapter.resume} follows an
 * operation that an earlier call accepted.
 *
 * The work is done in `adapter/`: the settings and their checks (`settings.ts`), one attempt
 * and its race against its time (`attempt.ts`), the call and its retry loop (`call.ts`), rule
 * RETRY-UNSAFE (`repeat.ts`) and the following of an accepted operation (`following.ts`).
 */

import type { Classification } from "./classify/classification.js";
import type { Envelope, Operation } from "./envelope.js";
import type { StatusReader } from "./follow.js";
import { type AttemptFn, AttemptTimers } from "./adapter/attempt.js";
import { CallRun, runCall } from "./adapter/call.js";
import { acceptedBy, follow, Following, type ReadStatusFn } from "./adapter/following.js";
import { AdapterSettings } from "./adapter/settings.js";

export { AttemptContext, type AttemptFn } from "./adapter/attempt.js";
export type { ReadStatusFn } from "./adapter/following.js";
export { type AdapterOptions, hostOf } from "./adapter/settings.js";

/** How {@link Adapter.call} ends a call: with the last attempt's envelope. */
function finishCall<R>(run: CallRun<R>, last: Classification): Envelope {
  return run.finish(last);
}

/**
 * A tool wrapped by Candor: every call returns an {@link Envelope} of exactly one of four
 * classes, made after the retry policy has run, with telemetry recorded.
 *
 * `R` is the raw result one attempt produces, which the classifier classifies (an
 * `HttpExchange` for the `HttpClassifier`).
 *
 * @throws InvalidSetting when a setting is refused (contract 10.1): a blank tool or target, a
 *   zero attempt timeout, deadline or operation deadline, or a retry policy it refuses.
 */
export class Adapter<R> extends AdapterSettings<R> {
  /** Races each attempt and status read against its time, on the adapter's clock. */
  private readonly timers = new AttemptTimers(this.clock, this.attemptTimeoutNs);

  /**
   * Runs one call and returns its envelope.
   *
   * `attempt` is attempted under the retry policy; each result is classified, and the envelope
   * is that of the last attempt. An attempt still running when its time runs out is abandoned
   * (its signal aborts). A budget that runs out returns the last access failure with the action
   * `exhausted`, never an empty. What an attempt throws is classified by the classifier's
   * `classifyError`; anything it does not classify propagates, and the call records nothing more:
   * it is not counted, and a span its earlier failures started ends with the events it has.
   */
  call(attempt: AttemptFn<R>): Promise<Envelope> {
    return runCall(this, this.timers, attempt, finishCall);
  }

  /**
   * Runs one call like {@link Adapter.call} and, when its answer accepted an operation, follows
   * the operation to its end: `readStatus(operation, attempt)` makes one status request, which the
   * adapter's status reader reads, until the operation ends, the operation deadline runs out, or
   * its status cannot be read. An answer that accepted nothing is returned as `call` returns it.
   *
   * @throws TypeError when the adapter has no status reader.
   */
  async callAndFollow<Q>(attempt: AttemptFn<R>, readStatus: ReadStatusFn<Q>): Promise<Envelope> {
    const reader = this.needReader();
    return runCall(this, this.timers, attempt, (run, last) => {
      const following = acceptedBy(run, last, reader);
      return following === undefined ? run.finish(last) : follow(following, readStatus);
    });
  }

  /**
   * Follows an operation that an earlier call accepted (its envelope's `lifecycle.operation`) to
   * its end, as {@link Adapter.callAndFollow} does. The first read is made at once, and the
   * operation deadline counts from now.
   *
   * @throws TypeError when the adapter has no status reader.
   */
  async resume<Q>(operation: Operation, readStatus: ReadStatusFn<Q>): Promise<Envelope> {
    const reader = this.needReader();
    const following = new Following(
      new CallRun(this, this.policy, this.timers),
      reader,
      operation,
      0,
      0,
      { kind: "job_id", value: operation.id },
      undefined,
    );
    return follow(following, readStatus);
  }

  private needReader(): StatusReader<unknown> {
    if (this.statusReader === undefined) {
      throw new TypeError(
        "following an operation needs a status reader: new Adapter({ ..., statusReader: new StatusUrl() }), " +
          "new LongRunning() or new FnStatus(mapping)",
      );
    }
    return this.statusReader;
  }
}
