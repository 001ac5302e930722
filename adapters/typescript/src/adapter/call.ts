/**
 * One call in progress: its attempts under the retry policy, and the envelope it ends in.
 *
 * {@link runCall} is the retry loop: it makes a call's attempts, each raced against its time,
 * classified, and decided on by the retry policy, then ends the call. {@link CallRun} holds a
 * call's times, attempts and decisions, records each retry's event as it happens, and makes the
 * envelope, with its telemetry recorded ({@link CallRun.finish}). Rule RETRY-UNSAFE (a call that
 * may have been applied is not sent again unless it is safe to repeat) is applied here, attempt
 * by attempt.
 */

import { type Context, context as otelContext } from "@opentelemetry/api";

import type { Classification } from "../classify/classification.js";
import { generatedOperationId } from "../classify/http.js";
import { type Clock, nowOf } from "../clock.js";
import { NS_PER_MS, wholeMs } from "../duration.js";
import { type Attempt, Envelope, failureKindOf, type Outcome } from "../envelope.js";
import { actionOf, type Decision, type RetryPolicy } from "../retry.js";
import type { LiveSpan, Transition } from "../telemetry.js";
import { ADAPTER_VERSION } from "../version.js";
import type { RetryAction } from "../vocab.js";
import { AttemptContext, type AttemptFn, type AttemptTimers, noAnswer, type Settled, stamp } from "./attempt.js";
import { mayHaveBeenApplied, NOT_SENT_AGAIN } from "./repeat.js";
import type { AdapterSettings } from "./settings.js";

/**
 * Makes a call's attempts under the retry policy, then ends the call with `end(run, last)`.
 * One async function for the whole call, which awaits each attempt's answer once (and each
 * backoff): the steps between are synchronous.
 */
export async function runCall<R>(
  adapter: AdapterSettings<R>,
  timers: AttemptTimers,
  fn: AttemptFn<R>,
  end: (run: CallRun<R>, last: Classification) => Envelope | Promise<Envelope>,
): Promise<Envelope> {
  const run = new CallRun(adapter, adapter.policy, timers);
  let last: Classification;
  try {
    for (;;) {
      const context = run.nextContext();
      const started = run.start(fn, context);
      const classification = run.unsafeToRepeat(
        started instanceof Promise ? run.classifySettled(await started, context) : started,
      );
      const decision = run.settle(classification);
      if (decision.kind !== "retry") {
        last = classification;
        break;
      }
      await run.clock.sleep(decision.afterNs);
      run.slept();
    }
  } catch (error) {
    run.abandon();
    throw error;
  }
  return end(run, last);
}

/** One call in progress: its attempts, times and decisions. */
export class CallRun<R> {
  readonly clock: Clock;
  readonly started: number;
  readonly startedWall: bigint;
  readonly startedAt: { ns: bigint; text: string };
  readonly parent: Context;
  readonly attempts: Attempt[] = [];
  readonly idempotencyKey: string | undefined;
  lastStartedNs: bigint;
  live: LiveSpan | undefined;
  number = 0;
  offset = 0;
  elapsed = 0;

  constructor(
    readonly adapter: AdapterSettings<R>,
    readonly policy: RetryPolicy,
    /** Races each attempt, and each status read of a following, against its time. */
    readonly timers: AttemptTimers,
  ) {
    this.clock = adapter.clock;
    this.parent = otelContext.active();
    const now = nowOf(this.clock);
    this.started = now.monotonicNs;
    this.startedWall = now.wallNs;
    this.startedAt = stamp(this.startedWall);
    this.lastStartedNs = this.startedAt.ns;
    this.idempotencyKey = adapter.idempotencyKey ? generatedOperationId() : undefined;
  }

  nextContext(): AttemptContext {
    this.number += 1;
    const deadlineLeft = Math.max(this.adapter.deadlineNs - this.offset, 0);
    return new AttemptContext(this.number, Math.min(this.adapter.attemptTimeoutNs, deadlineLeft), this.idempotencyKey);
  }

  /**
   * Starts one attempt: the classification of what `fn` threw, or what its answer settles to
   * against the attempt's time ({@link AttemptTimers.race}).
   */
  start(fn: AttemptFn<R>, context: AttemptContext): Classification | Promise<Settled<R> | undefined> {
    let pending: Promise<R>;
    try {
      pending = Promise.resolve(fn(context));
    } catch (error) {
      return this.classifyError(error);
    }
    return this.timers.race(pending, context);
  }

  /** The classification of what an attempt settled to; `undefined` when its time ran out. */
  classifySettled(settled: Settled<R> | undefined, context: AttemptContext): Classification {
    if (settled === undefined) {
      return this.timedOut(context);
    }
    return settled.ok ? this.adapter.classifier.classify(settled.value) : this.classifyError(settled.error);
  }

  private classifyError(error: unknown): Classification {
    const classification = this.adapter.classifier.classifyError?.(error);
    if (classification === undefined) {
      throw error;
    }
    return classification;
  }

  /** The attempt's classification when its time ran out: what had arrived, else no answer. */
  timedOut(context: AttemptContext): Classification {
    const arrival = context.arrival;
    const classifier = this.adapter.classifier;
    if (arrival !== undefined && classifier.classifyArrival !== undefined) {
      return classifier.classifyArrival(arrival, context.timeoutNs);
    }
    return {
      outcome: { class: "access_failure", failure: noAnswer(context.timeoutNs, context.timeoutNs < this.adapter.attemptTimeoutNs) },
    };
  }

  /** The classification, made permanent when the call must not be sent again (rule RETRY-UNSAFE). */
  unsafeToRepeat(classification: Classification): Classification {
    const outcome = classification.outcome;
    if (
      outcome.class !== "access_failure" ||
      !outcome.failure.retryable ||
      this.adapter.safeToRepeat ||
      !mayHaveBeenApplied(outcome.failure)
    ) {
      return classification;
    }
    const failure = { ...outcome.failure, retryable: false, message: NOT_SENT_AGAIN + outcome.failure.message };
    return { ...classification, outcome: { class: "access_failure", failure } };
  }

  /** Decides what follows the attempt just made, and records it. */
  settle(classification: Classification): Decision {
    const outcome = classification.outcome;
    const elapsed = Math.max(this.clock.monotonicNs() - this.started, 0);
    let decision = this.policy.decide(this.number, elapsed, outcome, this.adapter.jitter.next());
    if (decision.kind === "retry" && elapsed + decision.afterNs >= this.adapter.deadlineNs) {
      decision = { kind: "give_up", action: "exhausted" };
    }
    // The first attempt starts with the call, at the call's own time.
    const started = this.offset === 0 ? this.startedAt : stamp(this.startedWall + BigInt(this.offset));
    this.lastStartedNs = started.ns;
    const attempt = attemptRecord(
      this.number,
      started.text,
      wholeMs(elapsed - this.offset),
      outcome,
      actionOf(decision, outcome),
      decision.kind === "retry" ? wholeMs(decision.afterNs) : undefined,
    );
    this.attempts.push(attempt);
    this.elapsed = elapsed;
    if (decision.kind === "retry") {
      // The failed attempt's event happens now, not when the call ends.
      this.live = this.adapter.telemetry.retried(
        this.live,
        this.parent,
        this.startedAt.ns,
        attempt,
        started.ns,
        this.policy.maxAttempts,
      );
    }
    return decision;
  }

  slept(): void {
    this.offset = this.clock.monotonicNs() - this.started;
  }

  /** Ends the span the call's events started, when the call ends by an exception. */
  abandon(): void {
    if (this.live !== undefined) {
      this.adapter.telemetry.abandon(this.live, this.clock.wallNs());
      this.live = undefined;
    }
  }

  /** Records a state of an operation the call saw, now (rule TELEMETRY-LIFECYCLE). */
  saw(transition: Transition): void {
    this.live = this.adapter.telemetry.transition(this.live, this.parent, this.startedAt.ns, transition);
  }

  /** The time of the last attempt's event: its start plus its whole milliseconds. */
  lastEventNs(): bigint {
    const last = this.attempts.at(-1);
    if (last === undefined) {
      return stamp(this.startedWall + BigInt(this.elapsed)).ns;
    }
    return this.lastStartedNs + BigInt(last.duration_ms) * BigInt(NS_PER_MS);
  }

  /** Records the attempt of a following: from the acceptance to the following's end (offsets in ns). */
  addFollowing(accepted: number, finished: number, outcome: Outcome, action: RetryAction | undefined): void {
    const started = stamp(this.startedWall + BigInt(accepted));
    this.lastStartedNs = started.ns;
    this.attempts.push(
      attemptRecord(this.attempts.length + 1, started.text, wholeMs(finished - accepted), outcome, action, undefined),
    );
    this.elapsed = finished;
  }

  /** The call's envelope, with its telemetry recorded. */
  finish(last: Classification, followed = false): Envelope {
    if (!followed && last.lifecycle !== undefined) {
      this.saw({ atNs: this.lastEventNs(), lifecycle: last.lifecycle, evidence: last.evidence });
    }
    const adapter = this.adapter;
    const finished = stamp(this.startedWall + BigInt(this.elapsed));
    const provenance =
      adapter.actor === undefined
        ? {
            source_system: adapter.sourceSystem,
            adapter: ADAPTER_VERSION,
            started_at: this.startedAt.text,
            finished_at: finished.text,
          }
        : {
            source_system: adapter.sourceSystem,
            actor: adapter.actor,
            adapter: ADAPTER_VERSION,
            started_at: this.startedAt.text,
            finished_at: finished.text,
          };
    const envelope = new Envelope({
      tool: adapter.tool,
      target: adapter.target,
      outcome: last.outcome,
      provenance,
      // The call's attempts end here: the envelope holds the list itself.
      attempts: Object.freeze(this.attempts),
      authority: adapter.authority,
      evidence: last.evidence,
      lifecycle: last.lifecycle,
    });
    adapter.telemetry.record(envelope, this.policy.maxAttempts, {
      startedNs: this.startedAt.ns,
      finishedNs: finished.ns,
      lastStartedNs: this.lastStartedNs,
      live: this.live,
      parent: this.parent,
    });
    this.live = undefined;
    return envelope;
  }
}

function attemptRecord(
  number: number,
  startedAt: string,
  durationMs: number,
  outcome: Outcome,
  action: RetryAction | undefined,
  backoffMs: number | undefined,
): Attempt {
  const attempt: { -readonly [K in keyof Attempt]: Attempt[K] } = {
    number,
    started_at: startedAt,
    duration_ms: durationMs,
    class: outcome.class,
  };
  const kind = failureKindOf(outcome);
  if (kind !== undefined) {
    attempt.failure_kind = kind;
  }
  if (outcome.class === "access_failure" && outcome.failure.status !== undefined) {
    attempt.status = outcome.failure.status;
  }
  if (action !== undefined) {
    attempt.retry_action = action;
  }
  if (backoffMs !== undefined) {
    attempt.backoff_ms = backoffMs;
  }
  if (outcome.class === "access_failure" && outcome.failure.error_type !== undefined) {
    attempt.error_type = outcome.failure.error_type;
  }
  return attempt;
}
