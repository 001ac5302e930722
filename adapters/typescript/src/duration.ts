/**
 * Durations inside the adapter are whole nanoseconds held in a `number` (exact up to 2^53 ns,
 * about 104 days); settings are given in milliseconds.
 */

/** Nanoseconds in a millisecond. */
export const NS_PER_MS = 1_000_000;
/** Nanoseconds in a second. */
export const NS_PER_SECOND = 1_000_000_000;

/** `ms` milliseconds in whole nanoseconds, rounded to the nearest. */
export function nsOfMs(ms: number): number {
  return Math.round(ms * NS_PER_MS);
}

/** `ns` in whole milliseconds, rounded down (never below 0). */
export function wholeMs(ns: number): number {
  return Math.floor(Math.max(ns, 0) / NS_PER_MS);
}

function decimal(whole: number, fraction: number, digits: number): string {
  const tail = String(fraction).padStart(digits, "0").replace(/0+$/, "");
  return tail === "" ? String(whole) : `${whole}.${tail}`;
}

/** A duration as the Rust adapter's messages write it: `10s`, `1.5s`, `250ms`, `12µs`, `7ns`. */
export function debugDuration(ns: number): string {
  const whole = Math.max(Math.floor(ns), 0);
  const seconds = Math.floor(whole / NS_PER_SECOND);
  const nanos = whole % NS_PER_SECOND;
  if (seconds > 0) {
    return `${decimal(seconds, nanos, 9)}s`;
  }
  if (nanos >= 1_000_000) {
    return `${decimal(Math.floor(nanos / 1_000_000), nanos % 1_000_000, 6)}ms`;
  }
  if (nanos >= 1_000) {
    return `${decimal(Math.floor(nanos / 1_000), nanos % 1_000, 3)}µs`;
  }
  return `${nanos}ns`;
}
