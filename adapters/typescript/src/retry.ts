/**
 * The retry policy (contract section 6): a pure decision from the attempt's number, the elapsed
 * time, the outcome and a jitter draw to what happens next.
 *
 * A success, an empty and a partial end the call; a permanent access failure is never retried;
 * a transient one is retried with exponential backoff and full jitter while the budget lasts;
 * `Retry-After` is a floor under the wait, honoured up to a cap; a budget that runs out ends the
 * call as an access failure marked `exhausted`, never as anything else.
 */

import { NS_PER_MS, NS_PER_SECOND, nsOfMs } from "./duration.js";
import type { Outcome } from "./envelope.js";
import type { RetryAction } from "./vocab.js";

/** What the policy decided after an attempt. */
export type Decision =
  /** The call is over with this attempt's success, empty or accepted partial. */
  | { readonly kind: "done" }
  /** Another attempt follows after `afterNs` nanoseconds. */
  | { readonly kind: "retry"; readonly afterNs: number }
  /** The call is over with this attempt's access failure. */
  | { readonly kind: "give_up"; readonly action: "exhausted" | "permanent" };

const DONE: Decision = Object.freeze({ kind: "done" });
const EXHAUSTED: Decision = Object.freeze({ kind: "give_up", action: "exhausted" });
const PERMANENT: Decision = Object.freeze({ kind: "give_up", action: "permanent" });

/** The retry action an attempt records for a decision: `undefined` for a success or an empty. */
export function actionOf(decision: Decision, outcome: Outcome): RetryAction | undefined {
  switch (decision.kind) {
    case "done":
      return outcome.class === "partial" ? "accept_partial" : undefined;
    case "retry":
      return "retry";
    case "give_up":
      return decision.action;
  }
}

/** The settings of a {@link RetryPolicy}, in milliseconds; each has the contract's default. */
export interface RetryPolicyOptions {
  /** Attempts in all, the first included; at least 1. Default 3. */
  readonly maxAttempts?: number;
  /** The ceiling of the first wait; above 0 and at most `maxBackoffMs`. Default 100 ms. */
  readonly initialBackoffMs?: number;
  /** The largest ceiling. Default 5 s. */
  readonly maxBackoffMs?: number;
  /** No retry starts once this much time has elapsed. Default 30 s. */
  readonly maxElapsedMs?: number;
  /** The longest `Retry-After` honoured; a longer one ends the call. Default 30 s. */
  readonly retryAfterCapMs?: number;
}

/** Why a setting was refused (contract 10.1): the message names the setting and the value. */
export class InvalidSetting extends RangeError {
  constructor(
    /** The setting's name. */
    readonly setting: string,
    /** The value given. */
    readonly value: unknown,
    why: string,
  ) {
    super(`${setting} ${why}, got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
    this.name = "InvalidSetting";
  }
}

function durationMs(setting: string, value: number, positive: boolean): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || (positive && value === 0)) {
    throw new InvalidSetting(setting, value, positive ? "must be a duration above 0 ms" : "must be a duration of 0 ms or more");
  }
  return nsOfMs(value);
}

/**
 * Rounds `value` × 10^9 to the nearest integer (ties to even), computing the product exactly
 * from the double's binary digits.
 */
function roundNanos(value: number): number {
  if (value === 0 || !Number.isFinite(value)) {
    return 0;
  }
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  const bits = view.getBigUint64(0);
  const exponentBits = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & ((1n << 52n) - 1n);
  let exponent: number;
  if (exponentBits === 0) {
    exponent = -1074;
  } else {
    mantissa |= 1n << 52n;
    exponent = exponentBits - 1075;
  }
  const scaled = mantissa * 1_000_000_000n;
  if (exponent >= 0) {
    return Number(scaled << BigInt(exponent));
  }
  const shift = BigInt(-exponent);
  const quotient = scaled >> shift;
  const remainder = scaled - (quotient << shift);
  const half = 1n << (shift - 1n);
  const rounded = remainder > half || (remainder === half && (quotient & 1n) === 1n) ? quotient + 1n : quotient;
  return Number(rounded);
}

/** `ns` scaled by `factor` in double precision, in seconds, rounded to the nearest nanosecond. */
function scaleNs(ns: number, factor: number): number {
  const seconds = Math.floor(ns / NS_PER_SECOND);
  const nanos = ns - seconds * NS_PER_SECOND;
  return roundNanos(factor * (seconds + nanos / 1e9));
}

/**
 * How a call retries transient access failures (contract 6.1).
 *
 * Waits use full jitter: a uniform draw from zero up to the ceiling, which starts at
 * `initialBackoffMs` and doubles each retry up to `maxBackoffMs`. A `Retry-After` is a floor
 * under the draw, never shortened: when it is longer than the cap, or than the time left, the
 * call ends `exhausted` rather than asking the source again early.
 *
 * @throws {@link InvalidSetting} when `maxAttempts` is not a whole number of at least 1, or
 *   `initialBackoffMs` is 0 or longer than `maxBackoffMs`.
 */
export class RetryPolicy {
  /** Attempts in all, the first included. */
  readonly maxAttempts: number;
  /** The ceiling of the first wait, in nanoseconds. */
  readonly initialBackoffNs: number;
  /** The largest ceiling, in nanoseconds. */
  readonly maxBackoffNs: number;
  /** No retry starts once this much time has elapsed, in nanoseconds. */
  readonly maxElapsedNs: number;
  /** The longest `Retry-After` honoured, in nanoseconds. */
  readonly retryAfterCapNs: number;

  constructor(options: RetryPolicyOptions = {}) {
    const maxAttempts = options.maxAttempts ?? 3;
    if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 0xffff_ffff) {
      throw new InvalidSetting("maxAttempts", maxAttempts, "must be a whole number of at least 1");
    }
    this.maxAttempts = maxAttempts;
    this.initialBackoffNs = durationMs("initialBackoffMs", options.initialBackoffMs ?? 100, true);
    this.maxBackoffNs = durationMs("maxBackoffMs", options.maxBackoffMs ?? 5_000, true);
    if (this.initialBackoffNs > this.maxBackoffNs) {
      throw new InvalidSetting(
        "initialBackoffMs",
        options.initialBackoffMs,
        `must be at most maxBackoffMs (${options.maxBackoffMs ?? 5_000})`,
      );
    }
    this.maxElapsedNs = durationMs("maxElapsedMs", options.maxElapsedMs ?? 30_000, false);
    this.retryAfterCapNs = durationMs("retryAfterCapMs", options.retryAfterCapMs ?? 30_000, false);
  }

  /** A policy that makes exactly one attempt. */
  static noRetry(): RetryPolicy {
    return new RetryPolicy({ maxAttempts: 1 });
  }

  /** The ceiling of the wait after attempt `attempt` (from 1), before jitter, in nanoseconds. */
  ceilingNs(attempt: number): number {
    const doublings = Math.min(Math.max(attempt - 1, 0), 31);
    return Math.min(this.initialBackoffNs * 2 ** doublings, this.maxBackoffNs);
  }

  /**
   * The wait after attempt `attempt`, before any `Retry-After`: the ceiling times the draw, held
   * within [0, 1] (a NaN draws 0), in double precision and seconds, rounded to the nanosecond.
   */
  backoffNs(attempt: number, jitter: number): number {
    const fraction = Number.isNaN(jitter) ? 0 : Math.min(Math.max(jitter, 0), 1);
    return scaleNs(this.ceilingNs(attempt), fraction);
  }

  /**
   * Decides what follows attempt `attempt` (from 1), `elapsedNs` after the call started (rule
   * RETRY-TRANSIENT, steps 1 to 5; the deadline's step 6 is the adapter's).
   */
  decide(attempt: number, elapsedNs: number, outcome: Outcome, jitter: number): Decision {
    if (outcome.class !== "access_failure") {
      return DONE;
    }
    const failure = outcome.failure;
    if (!failure.retryable) {
      return PERMANENT;
    }
    if (attempt >= this.maxAttempts) {
      return EXHAUSTED;
    }
    let wait = this.backoffNs(attempt, jitter);
    if (failure.retry_after_ms !== undefined) {
      const retryAfter = failure.retry_after_ms * NS_PER_MS;
      if (retryAfter > this.retryAfterCapNs) {
        return EXHAUSTED;
      }
      wait = Math.max(wait, retryAfter);
    }
    if (elapsedNs + wait >= this.maxElapsedNs) {
      return EXHAUSTED;
    }
    return { kind: "retry", afterNs: wait };
  }
}

/** A source of jitter draws in [0, 1), shared by concurrent calls. */
export interface Jitter {
  /** The next draw. */
  next(): number;
}

/** Draws from `Math.random` (the default). */
export class RandomJitter implements Jitter {
  /** A uniform draw in [0, 1). */
  next(): number {
    return Math.random();
  }
}

const LARGEST_BELOW_ONE = 1 - Number.EPSILON / 2;

/** Every draw is the same fraction, held within [0, 1) (a NaN draws 0); the vectors use it. */
export class FixedJitter implements Jitter {
  /** The fraction every draw returns. */
  readonly fraction: number;

  constructor(fraction: number) {
    this.fraction = Number.isNaN(fraction) ? 0 : Math.min(Math.max(fraction, 0), LARGEST_BELOW_ONE);
  }

  /** The fixed fraction. */
  next(): number {
    return this.fraction;
  }
}

const U64 = (1n << 64n) - 1n;

/** Draws fixed by a seed: SplitMix64, the same sequence as the Rust and Python adapters'. */
export class SeededJitter implements Jitter {
  private state: bigint;

  constructor(seed: number | bigint) {
    this.state = BigInt(seed) & U64;
  }

  /** The next draw, uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & U64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & U64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & U64;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  }
}
