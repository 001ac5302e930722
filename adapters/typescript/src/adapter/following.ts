/**
 * Following an operation that a call accepted to its end (contract 10.8): its status read until
 * it ends, the reads fail past the retry policy, or the operation deadline runs out; the ending
 * becomes the call's last classification and one more attempt.
 *
 * {@link acceptedBy} starts the following of the operation a call's answer accepted;
 * {@link Following} holds the reads of one following, and {@link follow} makes them, each after
 * the retry policy's backoff, and ends the call.
 */

import type { Classification } from "../classify/classification.js";
import { debugDuration, NS_PER_MS, wholeMs } from "../duration.js";
import type { Envelope, Evidence, Failure, Lifecycle, Operation } from "../envelope.js";
import { isEnded, isFailure, lifecycleOf, type OperationStatus, type StatusRead, type StatusReader } from "../follow.js";
import { redactText } from "../redact.js";
import type { LifecycleState, RetryAction } from "../vocab.js";
import { AttemptContext, noAnswer, stamp } from "./attempt.js";
import type { CallRun } from "./call.js";
import type { AdapterSettings } from "./settings.js";

/** One status read of a following: it reads the operation's status once. */
export type ReadStatusFn<Q> = (operation: Operation, attempt: AttemptContext) => Q | Promise<Q>;

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
export class Following<R> {
  readonly adapter: AdapterSettings<R>;
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

/** The following of the operation the call's answer accepted, if it accepted one. */
export function acceptedBy<R>(run: CallRun<R>, last: Classification, reader: StatusReader<unknown>): Following<R> | undefined {
  const operation = last.outcome.class === "success" ? reader.accepted(last) : undefined;
  if (operation === undefined) {
    return undefined;
  }
  const accepted = run.elapsed;
  // An acceptance the classifier did not report as one (an operation resource) is seen as
  // accepted all the same, when the answer came.
  const lifecycle: Lifecycle = last.lifecycle ?? { state: "accepted", operation };
  run.saw({ atNs: run.lastEventNs(), lifecycle, evidence: last.evidence });
  const backoff = run.policy.backoffNs(1, run.adapter.jitter.next());
  const wait = Math.max(backoff, (last.pollAfterMs ?? 0) * NS_PER_MS);
  return new Following(run, reader, operation, accepted, wait, last.evidence, lifecycle.state);
}

/**
 * Makes the status reads of a following, each after its wait, until it ends, and returns the
 * call's envelope.
 */
export async function follow<R, Q>(following: Following<R>, readStatus: ReadStatusFn<Q>): Promise<Envelope> {
  try {
    while (following.due()) {
      if (following.wait > 0) {
        await following.call.clock.sleep(following.wait);
      }
      const context = following.startRead();
      let pending: Promise<Q>;
      try {
        pending = Promise.resolve(readStatus(following.operation, context));
      } catch (error) {
        following.take(following.readError(error));
        continue;
      }
      const settled = await following.call.timers.race(pending, context);
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
