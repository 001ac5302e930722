/**
 * One attempt: what it is told about itself, and what the call and the following both use to
 * run one.
 *
 * {@link AttemptContext} is what every attempt and status read is given. Beside it are the
 * pieces that the call (`call.ts`) and the following (`following.ts`) share: the race of an
 * attempt against its time ({@link AttemptTimers}), the failure of an attempt that gave no answer
 * in time, and the wall-clock times an envelope holds.
 */

import type { HttpArrival } from "../classify/http.js";
import { type Clock, sleepsAsSystemClock, SystemTimer, TimerQueue } from "../clock.js";
import { debugDuration, NS_PER_MS } from "../duration.js";
import type { Failure } from "../envelope.js";
import { intoSecond } from "../seconds.js";
import { formatTimestamp } from "../timestamps.js";

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

/** One attempt: it makes one request and returns, or resolves to, its raw result. */
export type AttemptFn<R> = (attempt: AttemptContext) => R | Promise<R>;

/** A wall-clock time as the envelope holds it: cut to the microsecond, and its text. */
export function stamp(wallNs: bigint): { ns: bigint; text: string } {
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
export function noAnswer(afterNs: number, cutByDeadline: boolean): Failure {
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

/** What an attempt's answer settled to: its value, or what it threw. */
export type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** The reason an attempt's signal aborts with when its time runs out. */
function timeUp(afterNs: number): Error {
  const error = new Error(`the attempt's ${debugDuration(afterNs)} ran out`);
  error.name = "TimeoutError";
  return error;
}

/** The reason an attempt's timer (a sleep) is cancelled with when the attempt answers first. */
const TIMER_CANCELLED = new DOMException("This operation was aborted", "AbortError");

/**
 * Races attempts against their time on one adapter's clock: what an attempt settled to, or
 * `undefined` when its time ran out first (its signal aborted then).
 */
export class AttemptTimers {
  /** The attempt timers on the real clock, of the attempt timeout; `undefined` on another clock. */
  private readonly timers: TimerQueue | undefined;

  constructor(
    /** The clock the attempts' times run on. */
    readonly clock: Clock,
    /** How long one attempt may take, in nanoseconds: the length of the real clock's queued timers. */
    attemptTimeoutNs: number,
  ) {
    this.timers = sleepsAsSystemClock(clock) ? new TimerQueue(clock, attemptTimeoutNs) : undefined;
  }

  /** What the attempt settled to, or `undefined` when its time ran out first (its signal aborted). */
  race<T>(pending: Promise<T>, context: AttemptContext): Promise<Settled<T> | undefined> {
    // On the real clock (the usual case), its timer set directly: no promise, signal or abort
    // per attempt. A timeout under a millisecond takes the general path, whose order of
    // settling, when the time is up at once, lets a result already there win.
    if (context.timeoutNs >= NS_PER_MS && this.timers !== undefined) {
      return this.raceTimer(pending, context, this.timers);
    }
    return this.raceClock(pending, context);
  }

  /**
   * {@link AttemptTimers.race} on the real clock's time: a timer of the adapter's queue when the
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

  /** {@link AttemptTimers.race} on any clock, through its `sleep`. */
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
}
