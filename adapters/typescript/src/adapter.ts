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
 */

import { type Context, context as otelContext, type MeterProvider, type TracerProvider } from "@opentelemetry/api";
import type { LoggerProvider } from "@opentelemetry/api-logs";

import type { Classification, Classifier } from "./classify/classification.js";
import { generatedOperationId, type HttpArrival } from "./classify/http.js";
import { type Clock, nowOf, SystemClock, SystemTimer, sleepsAsSystemClock, TimerQueue } from "./clock.js";
import { debugDuration, NS_PER_MS, nsOfMs, wholeMs } from "./duration.js";
import {
  type Attempt,
  type Authority,
  describeAuthority,
  Envelope,
  type Evidence,
  type Failure,
  failureKindOf,
  type Lifecycle,
  type Operation,
  type Outcome,
} from "./envelope.js";
import { isEnded, isFailure, lifecycleOf, type OperationStatus, type StatusRead, type StatusReader } from "./follow.js";
import { redactText, redactUrl, urlParts } from "./redact.js";
import { actionOf, type Decision, InvalidSetting, type Jitter, RandomJitter, RetryPolicy, type RetryPolicyOptions } from "./retry.js";
import { type LiveSpan, Telemetry, type Transition } from "./telemetry.js";
import { intoSecond } from "./seconds.js";
import { formatTimestamp } from "./timestamps.js";
import { ADAPTER_VERSION } from "./version.js";
import type { LifecycleState, RetryAction } from "./vocab.js";

/** The methods that RFC 9110 (section 9.2.2) defines as idempotent. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);
/** The statuses that say the source did not process the request (rule RETRY-UNSAFE). */
const NOT_PROCESSED_STATUSES: ReadonlySet<number> = new Set([408, 429, 503]);
/** What precedes the message of a failure made permanent by rule RETRY-UNSAFE. */
const NOT_SENT_AGAIN = "the request may have been applied, so it was not sent again: ";

/** What an attempt is told about itself. */
export class AttemptContext {
  private recorded: HttpArrival | undefined;
  /** The signal, made when first read (most attempts never read it). */
  private made: AbortSignal | undefined;
  private controller: AbortController | undefined;
  /** Why the signal aborted (or aborts when made): set when the attempt's time ran out. */
  private expiredBy: unknown;
  private expired = false;

  constructor(
    /** The attempt's number, from 1 (for a status read, the read's number). */
    readonly number: number,
    /** How long this attempt may take, in nanoseconds. */
    readonly timeoutNs: number,
    /**
     * The call's idempotency key (`candor-` and 32 lowercase hexadecimal digits), the same for
     * every attempt of the call, when the adapter makes one; the attempt sends it unchanged in
     * the `Idempotency-Key` header. `undefined` otherwise, and for the reads of a following.
     */
    readonly idempotencyKey: string | undefined,
    /** The attempt's signal; by default one the adapter aborts when the attempt's time runs out. */
    signal?: AbortSignal,
  ) {
    this.made = signal;
  }

  /** Aborts when the attempt's time runs out: the attempt is abandoned then. */
  get signal(): AbortSignal {
    if (this.made === undefined) {
      if (this.expired) {
        this.made = AbortSignal.abort(this.expiredBy);
      } else {
        this.controller = new AbortController();
        this.made = this.controller.signal;
      }
    }
    return this.made;
  }

  /**
   * Aborts the attempt's signal with `reason` (at once if it was read, else when it is): the
   * adapter calls it when the attempt's time runs out. A second call does nothing.
   */
  expire(reason: unknown): void {
    if (this.expired) {
      return;
    }
    this.expired = true;
    this.expiredBy = reason;
    this.controller?.abort(reason);
  }

  /** How long this attempt may take, in milliseconds. */
  get timeoutMs(): number {
    return this.timeoutNs / NS_PER_MS;
  }

  /**
   * Records that this attempt's response has begun to arrive, and returns `arrival`.
   *
   * A client calls it once the status and headers have arrived, then adds the body to `arrival`
   * as it arrives, never past the attempt's time. When that time runs out before the attempt
   * returns, the attempt's outcome is the response as it stood then, classified by the
   * classifier's `classifyArrival`, not an attempt with no answer.
   */
  receiving(arrival: HttpArrival): HttpArrival {
    this.recorded = arrival;
    return arrival;
  }

  /** The response recorded by {@link AttemptContext.receiving}, if any. */
  get arrival(): HttpArrival | undefined {
    return this.recorded;
  }
}

/** The settings of an {@link Adapter}; each optional one has the contract's default (section 4). */
export interface AdapterOptions<R> {
  /** The logical tool name. Required, not blank. */
  readonly tool: string;
  /** The target as the author wrote it; credentials in it are redacted before any use. */
  readonly target: string;
  /** Classifies each attempt's raw result: an {@link HttpClassifier} or the author's own. */
  readonly classifier: Classifier<R>;
  /** The retry policy, or its settings. */
  readonly retry?: RetryPolicy | RetryPolicyOptions | undefined;
  /** How long one attempt may take, in milliseconds (default 10 s). */
  readonly attemptTimeoutMs?: number | undefined;
  /** How long the whole call, retries included, may take, in milliseconds (default 30 s). */
  readonly deadlineMs?: number | undefined;
  /** The request's method as RFC 9110 names it, in any case (default `GET`). */
  readonly method?: string | undefined;
  /** Whether the call may be made twice with the effect of once; by default, the method's. */
  readonly idempotent?: boolean | undefined;
  /** Whether the adapter makes one idempotency key per call and gives it to every attempt. */
  readonly idempotencyKey?: boolean | undefined;
  /** How the tool reports an accepted operation's progress, for following it. */
  readonly statusReader?: StatusReader<unknown> | undefined;
  /** How long a followed operation may take from its acceptance to its end (default 10 min). */
  readonly operationDeadlineMs?: number | undefined;
  /** `provenance.source_system`; by default the host of the redacted target. */
  readonly sourceSystem?: string | undefined;
  /** `provenance.actor`: who makes the calls. */
  readonly actor?: string | undefined;
  /** The principal and scope the calls run under; never a secret. */
  readonly authority?: Authority | undefined;
  /** Record a `tool.call` span for successes and empties too. */
  readonly traceEveryCall?: boolean | undefined;
  /** Where spans go; OpenTelemetry's global tracer provider by default. */
  readonly tracerProvider?: TracerProvider | undefined;
  /** Where the counters go; OpenTelemetry's global meter provider by default. */
  readonly meterProvider?: MeterProvider | undefined;
  /** Where the log records of events go; see `setLoggerProvider`. */
  readonly loggerProvider?: LoggerProvider | undefined;
  /** The backoff's random draws (a fixed one in tests). */
  readonly jitter?: Jitter | undefined;
  /** The clock (a fake one in tests). */
  readonly clock?: Clock | undefined;
}

/** One attempt: it makes one request and returns, or resolves to, its raw result. */
export type AttemptFn<R> = (attempt: AttemptContext) => R | Promise<R>;

/** One status read of a following: it reads the operation's status once. */
export type ReadStatusFn<Q> = (operation: Operation, attempt: AttemptContext) => Q | Promise<Q>;

/**
 * The host part of a target, cut as the redaction cuts it ({@link urlParts}); the whole target
 * when it has no scheme.
 */
export function hostOf(target: string): string {
  const parts = urlParts(target);
  return parts.scheme !== "" ? parts.host : target;
}

function methodName(method: string): string {
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(method)) {
    throw new InvalidSetting("method", method, "must be an HTTP method name such as \"POST\"");
  }
  return method.toUpperCase();
}

function positiveMs(setting: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidSetting(setting, value, "must be a duration above 0 ms");
  }
  return nsOfMs(value);
}

function notBlank(setting: string, value: string): string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new InvalidSetting(setting, value, "must not be empty or white space");
  }
  return value;
}

/** A wall-clock time as the envelope holds it: cut to the microsecond, and its text. */
function stamp(wallNs: bigint): { ns: bigint; text: string } {
  const into = intoSecond(wallNs);
  let ns: bigint;
  if (into === undefined) {
    ns = (wallNs / 1000n) * 1000n;
  } else {
    // At or after the epoch: cut by what is past the microsecond, mostly nothing.
    const past = into % 1000;
    ns = past === 0 ? wallNs : wallNs - BigInt(past);
  }
  return { ns, text: formatTimestamp(ns) };
}

/** The failure of an attempt that gave no answer in time, labelled from the adapter's knowledge. */
function noAnswer(afterNs: number, cutByDeadline: boolean): Failure {
  return cutByDeadline
    ? {
        kind: "deadline",
        retryable: true,
        message: `the call's deadline ran out ${debugDuration(afterNs)} into the attempt, with no answer`,
        error_type: "deadline",
      }
    : {
        kind: "timeout",
        retryable: true,
        message: `no answer within the attempt timeout of ${debugDuration(afterNs)}`,
        error_type: "timeout",
      };
}

/**
 * Whether the source may have processed the request that failed (rule RETRY-UNSAFE): only a
 * connection never made and a 408, 429 or 503 say that it did not.
 */
function mayHaveBeenApplied(failure: Failure): boolean {
  if (failure.status === undefined) {
    return failure.error_type !== "connect_error";
  }
  return !NOT_PROCESSED_STATUSES.has(failure.status);
}

type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** How {@link Adapter.call} ends a call: with the last attempt's envelope. */
function finishCall<R>(run: CallRun<R>, last: Classification): Envelope {
  return run.finish(last);
}

/** The reason an attempt's signal aborts with when its time runs out. */
function timeUp(afterNs: number): Error {
  const error = new Error(`the attempt's ${debugDuration(afterNs)} ran out`);
  error.name = "TimeoutError";
  return error;
}

/** The reason an attempt's timer (a sleep) is cancelled with when the attempt answers first. */
const TIMER_CANCELLED = new DOMException("This operation was aborted", "AbortError");

/** One call in progress: its attempts, times and decisions. */
class CallRun<R> {
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
    readonly adapter: Adapter<R>,
    readonly policy: RetryPolicy,
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

/** How a following ended. */
type Ending =
  | { readonly kind: "ended"; readonly status: OperationStatus }
  | { readonly kind: "deadline" }
  | { readonly kind: "unreadable"; readonly failure: Failure; readonly action: RetryAction };

/** The call's classification when the operation ended in `status`, and the retry action. */
function ended(
  operation: Operation,
  status: OperationStatus,
  acceptance: Evidence | undefined,
): [Classification, RetryAction | undefined] {
  const lifecycle = lifecycleOf(status, operation);
  const name = redactText(operation.id);
  switch (status.state) {
    case "completed":
      return [{ outcome: { class: "success", payload: status.result, extent: {} }, evidence: status.verified_by, lifecycle }, undefined];
    case "partial":
      return [
        {
          outcome: {
            class: "partial",
            payload: status.result,
            truncation: { kind: "operation_partial", covered: status.covered, dropped: status.dropped },
          },
          evidence: acceptance,
          lifecycle,
        },
        "accept_partial",
      ];
    case "failed":
      return [
        {
          outcome: {
            class: "access_failure",
            failure: {
              kind: "tool_error",
              retryable: false,
              message: `operation ${name} failed: ${redactText(status.reason)}`,
              error_type: "operation_failed",
            },
          },
          evidence: acceptance,
          lifecycle,
        },
        "permanent",
      ];
    default:
      return [
        {
          outcome: {
            class: "access_failure",
            failure: {
              kind: "cancelled",
              retryable: false,
              message: `operation ${name} was cancelled before it finished`,
              error_type: "operation_cancelled",
            },
          },
          evidence: acceptance,
          lifecycle,
        },
        "permanent",
      ];
  }
}

/** One following in progress: the status reads of an operation, up to its end. */
class Following<R> {
  readonly adapter: Adapter<R>;
  readonly acceptedNs: bigint;
  lastRead: OperationStatus | undefined;
  reads = 0;
  failedReads = 0;
  readStarted = 0;
  ending: Ending | undefined;

  constructor(
    readonly call: CallRun<R>,
    readonly reader: StatusReader<unknown>,
    readonly operation: Operation,
    /** The acceptance, as an offset from the call's start in nanoseconds. */
    readonly accepted: number,
    /** The wait before the next read, in nanoseconds. */
    public wait: number,
    readonly acceptance: Evidence | undefined,
    /** The state the call saw last, if it saw one. */
    public seen: LifecycleState | undefined,
  ) {
    this.adapter = call.adapter;
    this.acceptedNs = stamp(call.startedWall + BigInt(accepted)).ns;
    const refused = reader.refuse(operation);
    if (refused !== undefined) {
      this.ending = { kind: "unreadable", failure: refused, action: "permanent" };
    }
  }

  sinceAcceptance(): number {
    return Math.max(this.call.clock.monotonicNs() - this.call.started - this.accepted, 0);
  }

  /** Whether another read is due after the wait; one that would start at or after the deadline is not. */
  due(): boolean {
    if (this.ending !== undefined) {
      return false;
    }
    if (this.sinceAcceptance() + this.wait >= this.adapter.operationDeadlineNs) {
      this.ending = { kind: "deadline" };
      return false;
    }
    return true;
  }

  startRead(): AttemptContext {
    this.reads += 1;
    this.readStarted = this.sinceAcceptance();
    const left = Math.max(this.adapter.operationDeadlineNs - this.readStarted, 0);
    return new AttemptContext(this.reads, Math.min(this.adapter.attemptTimeoutNs, left), undefined);
  }

  timedOut(context: AttemptContext): StatusRead {
    return { status: noAnswer(context.timeoutNs, context.timeoutNs < this.adapter.attemptTimeoutNs) };
  }

  readError(error: unknown): StatusRead {
    const read = this.reader.readError(this.operation, error);
    if (read === undefined) {
      throw error;
    }
    return read;
  }

  /** Takes one read: the following ends, or the wait before the next read is set. */
  take(read: StatusRead): void {
    const status = read.status;
    this.ending = isFailure(status) ? this.failed(status) : this.status(status);
    if (this.ending === undefined) {
      const backoff = this.call.policy.backoffNs(this.reads, this.adapter.jitter.next());
      this.wait = Math.max(backoff, (read.retryAfterMs ?? 0) * NS_PER_MS);
    }
  }

  private status(status: OperationStatus): Ending | undefined {
    if (status.state !== this.seen) {
      this.seen = status.state;
      this.call.saw({ atNs: this.nowNs(), lifecycle: lifecycleOf(status, this.operation) });
    }
    if (isEnded(status)) {
      return { kind: "ended", status };
    }
    this.lastRead = status;
    this.failedReads = 0;
    return undefined;
  }

  private failed(failure: Failure): Ending | undefined {
    this.failedReads += 1;
    if (!failure.retryable) {
      return { kind: "unreadable", failure, action: "permanent" };
    }
    if (this.failedReads >= this.call.policy.maxAttempts) {
      return { kind: "unreadable", failure, action: "exhausted" };
    }
    return undefined;
  }

  /** Now, on the following attempt's grid of whole milliseconds from the acceptance. */
  private nowNs(): bigint {
    return this.acceptedNs + BigInt(wholeMs(this.sinceAcceptance())) * BigInt(NS_PER_MS);
  }

  /** The envelope: the start's attempts, then one attempt for the following. */
  finish(): Envelope {
    const [classification, action] = this.end();
    const finished = this.accepted + this.sinceAcceptance();
    this.call.addFollowing(this.accepted, finished, classification.outcome, action);
    return this.call.finish(classification, true);
  }

  private end(): [Classification, RetryAction | undefined] {
    const operation = this.operation;
    const last: Lifecycle =
      this.lastRead === undefined ? { state: "accepted", operation } : lifecycleOf(this.lastRead, operation);
    const name = redactText(operation.id);
    const ending = this.ending ?? { kind: "deadline" };
    let failure: Failure;
    let action: RetryAction;
    switch (ending.kind) {
      case "ended":
        return ended(operation, ending.status, this.acceptance);
      case "unreadable":
        failure = {
          ...ending.failure,
          message: `reading the status of operation ${name}, last seen ${last.state}: ${ending.failure.message}`,
        };
        action = ending.action;
        break;
      case "deadline":
        failure = {
          kind: "deadline",
          retryable: true,
          message:
            `operation ${name} was still ${last.state} when the operation deadline of ` +
            `${debugDuration(this.adapter.operationDeadlineNs)} ran out, after ${this.reads} status read(s)`,
          error_type: "deadline",
        };
        action = "exhausted";
        break;
    }
    return [{ outcome: { class: "access_failure", failure }, evidence: this.acceptance, lifecycle: last }, action];
  }
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
export class Adapter<R> {
  /** The logical tool name. */
  readonly tool: string;
  /** The target, credentials redacted. */
  readonly target: string;
  /** Classifies each attempt's raw result. */
  readonly classifier: Classifier<R>;
  /** The retry policy. */
  readonly policy: RetryPolicy;
  /** How long one attempt may take, in nanoseconds. */
  readonly attemptTimeoutNs: number;
  /** How long a call may take, in nanoseconds. */
  readonly deadlineNs: number;
  /** The request's method, in upper case. */
  readonly method: string;
  /** Whether a call may be made twice with the effect of once. */
  readonly idempotent: boolean;
  /** Whether the adapter makes one idempotency key per call. */
  readonly idempotencyKey: boolean;
  /** How the tool reports an accepted operation's progress, when declared. */
  readonly statusReader: StatusReader<unknown> | undefined;
  /** How long a followed operation may take, in nanoseconds. */
  readonly operationDeadlineNs: number;
  /** `provenance.source_system`. */
  readonly sourceSystem: string;
  /** `provenance.actor`. */
  readonly actor: string | undefined;
  /** The authority calls run under. */
  readonly authority: Authority | undefined;
  /** The backoff's random draws. */
  readonly jitter: Jitter;
  /** The clock. */
  readonly clock: Clock;
  /** Where spans, log records and counts go. */
  readonly telemetry: Telemetry;
  /** The attempt timers on the real clock, of the attempt timeout; `undefined` on another clock. */
  private readonly timers: TimerQueue | undefined;

  constructor(options: AdapterOptions<R>) {
    this.tool = notBlank("tool", options.tool);
    this.target = redactUrl(notBlank("target", options.target));
    this.classifier = options.classifier;
    this.policy = options.retry instanceof RetryPolicy ? options.retry : new RetryPolicy(options.retry);
    this.attemptTimeoutNs = positiveMs("attemptTimeoutMs", options.attemptTimeoutMs ?? 10_000);
    this.deadlineNs = positiveMs("deadlineMs", options.deadlineMs ?? 30_000);
    this.operationDeadlineNs = positiveMs("operationDeadlineMs", options.operationDeadlineMs ?? 600_000);
    this.method = methodName(options.method ?? "GET");
    this.idempotent = options.idempotent ?? IDEMPOTENT_METHODS.has(this.method);
    this.idempotencyKey = options.idempotencyKey ?? false;
    this.statusReader = options.statusReader;
    this.sourceSystem = options.sourceSystem ?? hostOf(this.target);
    this.actor = options.actor;
    this.authority = options.authority;
    this.jitter = options.jitter ?? new RandomJitter();
    this.clock = options.clock ?? new SystemClock();
    this.timers = sleepsAsSystemClock(this.clock) ? new TimerQueue(this.clock, this.attemptTimeoutNs) : undefined;
    this.telemetry = new Telemetry({
      tool: this.tool,
      target: this.target,
      authority: this.authority === undefined ? undefined : describeAuthority(this.authority),
      sourceSystem: this.sourceSystem,
      actor: this.actor,
      adapterVersion: ADAPTER_VERSION,
      tracerProvider: options.tracerProvider,
      meterProvider: options.meterProvider,
      loggerProvider: options.loggerProvider,
      traceEveryCall: options.traceEveryCall ?? false,
    });
  }

  /** Whether a call may be sent again after a failure that may have been applied (rule RETRY-UNSAFE). */
  get safeToRepeat(): boolean {
    return this.idempotent || this.idempotencyKey;
  }

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
    return this.runCall(attempt, finishCall);
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
    return this.runCall(attempt, (run, last) => {
      const following = this.acceptedBy(run, last, reader);
      return following === undefined ? run.finish(last) : this.follow(following, readStatus);
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
      new CallRun(this, this.policy),
      reader,
      operation,
      0,
      0,
      { kind: "job_id", value: operation.id },
      undefined,
    );
    return this.follow(following, readStatus);
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

  /**
   * Makes a call's attempts under the retry policy, then ends the call with `end(run, last)`.
   * One async function for the whole call, which awaits each attempt's answer once (and each
   * backoff): the steps between are synchronous.
   */
  private async runCall(
    fn: AttemptFn<R>,
    end: (run: CallRun<R>, last: Classification) => Envelope | Promise<Envelope>,
  ): Promise<Envelope> {
    const run = new CallRun(this, this.policy);
    let last: Classification;
    try {
      for (;;) {
        const context = run.nextContext();
        const started = this.start(fn, context);
        const classification = run.unsafeToRepeat(
          started instanceof Promise ? this.classifySettled(await started, context, run) : started,
        );
        const decision = run.settle(classification);
        if (decision.kind !== "retry") {
          last = classification;
          break;
        }
        await this.clock.sleep(decision.afterNs);
        run.slept();
      }
    } catch (error) {
      run.abandon();
      throw error;
    }
    return end(run, last);
  }

  /**
   * Starts one attempt: the classification of what `fn` threw, or what its answer settles to
   * against the attempt's time ({@link Adapter.race}).
   */
  private start(fn: AttemptFn<R>, context: AttemptContext): Classification | Promise<Settled<R> | undefined> {
    let pending: Promise<R>;
    try {
      pending = Promise.resolve(fn(context));
    } catch (error) {
      return this.classifyError(error);
    }
    return this.race(pending, context);
  }

  /** The classification of what an attempt settled to; `undefined` when its time ran out. */
  private classifySettled(settled: Settled<R> | undefined, context: AttemptContext, run: CallRun<R>): Classification {
    if (settled === undefined) {
      return run.timedOut(context);
    }
    return settled.ok ? this.classifier.classify(settled.value) : this.classifyError(settled.error);
  }

  /** What the attempt settled to, or `undefined` when its time ran out first (its signal aborted). */
  private race<T>(pending: Promise<T>, context: AttemptContext): Promise<Settled<T> | undefined> {
    // On the real clock (the usual case), its timer set directly: no promise, signal or abort
    // per attempt. A timeout under a millisecond takes the general path, whose order of
    // settling, when the time is up at once, lets a result already there win.
    if (context.timeoutNs >= NS_PER_MS && this.timers !== undefined) {
      return this.raceTimer(pending, context, this.timers);
    }
    return this.raceClock(pending, context);
  }

  /**
   * {@link Adapter.race} on the real clock's time: a timer of the adapter's queue when the
   * attempt has the whole attempt timeout (no Node timer of its own), else a timer of its own.
   */
  private raceTimer<T>(pending: Promise<T>, context: AttemptContext, timers: TimerQueue): Promise<Settled<T> | undefined> {
    return new Promise((resolve) => {
      let open = true;
      const expire = (): void => {
        if (open) {
          open = false;
          context.expire(timeUp(context.timeoutNs));
          resolve(undefined);
        }
      };
      const timer =
        context.timeoutNs === timers.ns ? timers.set(expire) : new SystemTimer(this.clock, context.timeoutNs, expire);
      pending.then(
        (value) => {
          if (open) {
            open = false;
            timer.cancel();
            resolve({ ok: true, value });
          }
        },
        (error: unknown) => {
          if (open) {
            open = false;
            timer.cancel();
            resolve({ ok: false, error });
          }
        },
      );
    });
  }

  /** {@link Adapter.race} on any clock, through its `sleep`. */
  private async raceClock<T>(pending: Promise<T>, context: AttemptContext): Promise<Settled<T> | undefined> {
    let settled: Settled<T> | undefined;
    const done = pending.then(
      (value) => {
        settled = { ok: true, value };
      },
      (error: unknown) => {
        settled = { ok: false, error };
      },
    );
    const timer = new AbortController();
    const timeUpAt = this.clock.sleep(context.timeoutNs, timer.signal).then(
      () => true,
      () => false,
    );
    const timedOut = await Promise.race([done.then(() => false), timeUpAt]);
    if (timedOut && settled === undefined) {
      context.expire(timeUp(context.timeoutNs));
      return undefined;
    }
    timer.abort(TIMER_CANCELLED);
    return settled;
  }

  private classifyError(error: unknown): Classification {
    const classification = this.classifier.classifyError?.(error);
    if (classification === undefined) {
      throw error;
    }
    return classification;
  }

  /** The following of the operation the call's answer accepted, if it accepted one. */
  private acceptedBy(run: CallRun<R>, last: Classification, reader: StatusReader<unknown>): Following<R> | undefined {
    const operation = last.outcome.class === "success" ? reader.accepted(last) : undefined;
    if (operation === undefined) {
      return undefined;
    }
    const accepted = run.elapsed;
    // An acceptance the classifier did not report as one (an operation resource) is seen as
    // accepted all the same, when the answer came.
    const lifecycle: Lifecycle = last.lifecycle ?? { state: "accepted", operation };
    run.saw({ atNs: run.lastEventNs(), lifecycle, evidence: last.evidence });
    const backoff = this.policy.backoffNs(1, this.jitter.next());
    const wait = Math.max(backoff, (last.pollAfterMs ?? 0) * NS_PER_MS);
    return new Following(run, reader, operation, accepted, wait, last.evidence, lifecycle.state);
  }

  private async follow<Q>(following: Following<R>, readStatus: ReadStatusFn<Q>): Promise<Envelope> {
    try {
      while (following.due()) {
        if (following.wait > 0) {
          await this.clock.sleep(following.wait);
        }
        const context = following.startRead();
        let pending: Promise<Q>;
        try {
          pending = Promise.resolve(readStatus(following.operation, context));
        } catch (error) {
          following.take(following.readError(error));
          continue;
        }
        const settled = await this.race(pending, context);
        following.take(
          settled === undefined
            ? following.timedOut(context)
            : settled.ok
              ? following.reader.read(following.operation, settled.value)
              : following.readError(settled.error),
        );
      }
      return following.finish();
    } catch (error) {
      following.call.abandon();
      throw error;
    }
  }
}
