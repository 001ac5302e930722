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

/** When `performance.now()` counts from, in milliseconds since the epoch: fixed for the process. */
const TIME_ORIGIN_MS = performance.timeOrigin;

/** The real clock: `performance.now()`, the wall clock read through it, and real timers. */
export class SystemClock implements Clock {
  /** Monotonic now, from `performance.now()`. */
  monotonicNs(): number {
    return Math.round(performance.now() * NS_PER_MS);
  }

  /** Wall-clock now, to the microsecond. */
  wallNs(): bigint {
    return wallNsAt(performance.now());
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

/** The wall-clock time of a `performance.now()` reading, to the microsecond. */
function wallNsAt(now: number): bigint {
  return BigInt(Math.round((TIME_ORIGIN_MS + now) * 1000)) * 1000n;
}

/** A clock's monotonic and wall-clock now, read together. */
export interface Now {
  readonly monotonicNs: number;
  readonly wallNs: bigint;
}

/**
 * Monotonic and wall-clock now: on a clock that reads both as {@link SystemClock} does (its own
 * `monotonicNs` and `wallNs`), from one reading of `performance.now()`, which both are made of.
 */
export function nowOf(clock: Clock): Now {
  if (clock.monotonicNs === SystemClock.prototype.monotonicNs && clock.wallNs === SystemClock.prototype.wallNs) {
    const now = performance.now();
    return { monotonicNs: Math.round(now * NS_PER_MS), wallNs: wallNsAt(now) };
  }
  return { monotonicNs: clock.monotonicNs(), wallNs: clock.wallNs() };
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

/** A timer of a {@link TimerQueue}: a link of its list. */
export class QueuedTimer {
  /** The timer before it in the queue. */
  previous: QueuedTimer | undefined;
  /** The timer after it in the queue. */
  next: QueuedTimer | undefined;

  constructor(
    private readonly queue: TimerQueue,
    /** When it is due, in the clock's monotonic nanoseconds. */
    readonly until: number,
    /** What it calls when it is due. */
    readonly fire: () => void,
  ) {}

  /** Cancels it, if it has not fired: it is then never called. */
  cancel(): void {
    this.queue.cancel(this);
  }
}

/**
 * Timers of one length on {@link SystemClock}'s time, served by one Node timer: the attempt
 * timers of one adapter. Internal to the adapter.
 *
 * Timers of the same length end in the order they were set, so they are kept in a list in that
 * order, and the Node timer is set for the first. Setting one links it at the end, cancelling one
 * unlinks it: no Node timer is made or cleared per attempt. When the Node timer fires, the timers
 * due fire, and it is set again for the first one left. It holds the process open only while a
 * timer is set (as one `setTimeout` per attempt did).
 */
export class TimerQueue {
  private first: QueuedTimer | undefined;
  private last: QueuedTimer | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Whether the Node timer holds the process open (is ref'd). */
  private holding = false;

  constructor(
    private readonly clock: Clock,
    /** The timers' length, in nanoseconds. */
    readonly ns: number,
  ) {}

  /**
   * Calls `fire` once `ns` nanoseconds of the clock's monotonic time have passed (never sooner),
   * unless the timer returned is cancelled first.
   */
  set(fire: () => void): QueuedTimer {
    const timer = new QueuedTimer(this, this.clock.monotonicNs() + this.ns, fire);
    timer.previous = this.last;
    if (this.last === undefined) {
      this.first = timer;
    } else {
      this.last.next = timer;
    }
    this.last = timer;
    if (this.timer === undefined) {
      // No Node timer: the queue was empty, and this timer is the first.
      this.arm(this.ns);
    } else if (!this.holding) {
      this.timer.ref();
      this.holding = true;
    }
    return timer;
  }

  /** Cancels a timer of this queue, if it has not fired: it is then never called. */
  cancel(timer: QueuedTimer): void {
    if (timer.previous === undefined && timer !== this.first) {
      // Fired or cancelled already: linked nowhere.
      return;
    }
    this.unlink(timer);
    if (this.first === undefined && this.holding) {
      // Left set, for the next timer, without holding the process open.
      this.timer?.unref();
      this.holding = false;
    }
  }

  private unlink(timer: QueuedTimer): void {
    if (timer.previous === undefined) {
      this.first = timer.next;
    } else {
      timer.previous.next = timer.next;
    }
    if (timer.next === undefined) {
      this.last = timer.previous;
    } else {
      timer.next.previous = timer.previous;
    }
    timer.previous = undefined;
    timer.next = undefined;
  }

  private arm(ns: number): void {
    this.timer = setTimeout(this.expire, Math.min(Math.ceil(ns / NS_PER_MS), MAX_TIMER_MS));
    this.holding = true;
  }

  /** Fires the timers due, then sets the Node timer for the first left. */
  private readonly expire = (): void => {
    const now = this.clock.monotonicNs();
    // A timer set meanwhile (by a listener of an attempt's abort) is linked at the end, and, as
    // `this.timer` is still the one that fired, arms nothing: it is armed for below.
    for (let first = this.first; first !== undefined && first.until <= now; first = this.first) {
      this.unlink(first);
      first.fire();
    }
    this.timer = undefined;
    this.holding = false;
    if (this.first !== undefined) {
      this.arm(this.first.until - now);
    }
  };
}
