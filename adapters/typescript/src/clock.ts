/**
 * Time as the adapter sees it, injected so that retry and timeout logic can be tested: a
 * monotonic clock for durations, a wall clock for timestamps, and sleeping.
 */

import { NS_PER_MS } from "./duration.js";

/** A source of time. Durations are whole nanoseconds; wall-clock times nanoseconds since the epoch. */
export interface Clock {
  /** Monotonic now, for deadlines and durations. */
  monotonicNs(): number;
  /** Wall-clock now, in nanoseconds since the Unix epoch. */
  wallNs(): bigint;
  /**
   * Completes after `ns` nanoseconds; rejects with the signal's reason when `signal` aborts
   * first.
   */
  sleep(ns: number, signal?: AbortSignal): Promise<void>;
}

/** The longest delay one `setTimeout` takes (about 24.8 days); longer sleeps are made of several. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The real clock: `performance.now()`, the wall clock read through it, and real timers. */
export class SystemClock implements Clock {
  /** Monotonic now, from `performance.now()`. */
  monotonicNs(): number {
    return Math.round(performance.now() * NS_PER_MS);
  }

  /** Wall-clock now, to the microsecond. */
  wallNs(): bigint {
    return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n;
  }

  /** A real sleep, never shorter than asked, that an abort ends early. */
  sleep(ns: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(signal.reason as Error);
        return;
      }
      const until = this.monotonicNs() + ns;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason as Error);
      };
      const arm = (): void => {
        const left = until - this.monotonicNs();
        if (left <= 0) {
          signal?.removeEventListener("abort", onAbort);
          resolve();
          return;
        }
        timer = setTimeout(arm, Math.min(Math.ceil(left / NS_PER_MS), MAX_TIMER_MS));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      arm();
    });
  }
}

/**
 * Whether `clock` sleeps as {@link SystemClock} does (its `sleep` is SystemClock's own), so that
 * the adapter may set the same timer directly, without a promise or an abort signal.
 */
export function sleepsAsSystemClock(clock: Clock): boolean {
  return clock.sleep === SystemClock.prototype.sleep;
}

/**
 * The timer of {@link SystemClock.sleep} without its promise and signal: calls `fire` once
 * `ns` nanoseconds of `clock`'s monotonic time have passed (never sooner), unless `cancel` is
 * called first. Internal to the adapter (the attempt timer of a call on the real clock).
 */
export class SystemTimer {
  private timer: NodeJS.Timeout | undefined;
  private readonly until: number;

  constructor(
    private readonly clock: Clock,
    ns: number,
    private readonly fire: () => void,
  ) {
    this.until = clock.monotonicNs() + ns;
    this.arm();
  }

  private readonly arm = (): void => {
    const left = this.until - this.clock.monotonicNs();
    if (left <= 0) {
      this.timer = undefined;
      this.fire();
      return;
    }
    this.timer = setTimeout(this.arm, Math.min(Math.ceil(left / NS_PER_MS), MAX_TIMER_MS));
  };

  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
