/**
 * A fake clock for tests of code that uses the adapter: time moves only when a test moves it or
 * something sleeps, and sleeps complete as soon as nothing else can run.
 */

import type { Clock } from "./clock.js";
import { parseTimestamp } from "./timestamps.js";

interface Sleeper {
  readonly due: number;
  readonly ns: number;
  readonly order: number;
  readonly resolve: () => void;
}

/**
 * A clock on virtual time. A sleep is due at the time it was asked plus its length; once nothing
 * else is left to run (every promise settled), the earliest sleep due completes and time moves
 * to when it was due. Time also moves by {@link FakeClock.advance}. Every completed sleep is
 * recorded in {@link FakeClock.slept}; an aborted one completes never and records nothing.
 */
export class FakeClock implements Clock {
  /** Every completed sleep, in nanoseconds, in the order they completed. */
  readonly slept: number[] = [];
  private readonly originNs: bigint;
  private offset = 0;
  private sleepers: Sleeper[] = [];
  private order = 0;
  private scheduled = false;

  /** @param start - the wall-clock start: an RFC 3339 text, a `Date`, or nanoseconds since the epoch. */
  constructor(start: string | Date | bigint = 1_800_000_000_000_000_000n) {
    if (typeof start === "string") {
      this.originNs = parseTimestamp(start);
    } else if (start instanceof Date) {
      this.originNs = BigInt(start.getTime()) * 1_000_000n;
    } else {
      this.originNs = start;
    }
  }

  /** How far time has moved, in nanoseconds. */
  get elapsedNs(): number {
    return this.offset;
  }

  /** Moves time forward by `ns` without a sleep. */
  advance(ns: number): void {
    this.offset += ns;
  }

  /** Nanoseconds since the clock was made. */
  monotonicNs(): number {
    return this.offset;
  }

  /** The wall-clock start plus how far time has moved. */
  wallNs(): bigint {
    return this.originNs + BigInt(this.offset);
  }

  /** Completes when virtual time reaches now plus `ns`. */
  sleep(ns: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(signal.reason as Error);
        return;
      }
      const sleeper: Sleeper = { due: this.offset + ns, ns, order: this.order++, resolve };
      this.sleepers.push(sleeper);
      signal?.addEventListener(
        "abort",
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          reject(signal.reason as Error);
        },
        { once: true },
      );
      this.schedule();
    });
  }

  private schedule(): void {
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.fire();
      });
    }
  }

  private fire(): void {
    this.scheduled = false;
    const next = this.sleepers.reduce<Sleeper | undefined>(
      (best, s) => (best === undefined || s.due < best.due || (s.due === best.due && s.order < best.order) ? s : best),
      undefined,
    );
    if (next === undefined) {
      return;
    }
    this.sleepers = this.sleepers.filter((s) => s !== next);
    this.offset = Math.max(this.offset, next.due);
    this.slept.push(next.ns);
    next.resolve();
    if (this.sleepers.length > 0) {
      this.schedule();
    }
  }
}
