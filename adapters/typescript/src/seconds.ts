/**
 * Times in nanoseconds since the epoch split at their second, mostly without a BigInt division:
 * the adapter's times fall, call after call, in the same second, whose bounds are held here.
 * Internal to the package (the envelope's timestamps and OpenTelemetry's `[seconds, nanos]`).
 */

const NS_PER_SECOND = 1_000_000_000n;

/** The second held: the last one a time at or after the epoch fell in, from its start to its end. */
let startNs = 0n;
let endNs = 0n;
let second = 0;

/**
 * How far into its second `ns` is, in nanoseconds (0 to 999,999,999), holding that second for
 * {@link heldSecond}; `undefined` for a time before the epoch, whose second is not held.
 */
export function intoSecond(ns: bigint): number | undefined {
  if (ns < startNs || ns >= endNs) {
    if (ns < 0n) {
      return undefined;
    }
    const seconds = ns / NS_PER_SECOND;
    startNs = seconds * NS_PER_SECOND;
    endNs = startNs + NS_PER_SECOND;
    second = Number(seconds);
  }
  return Number(ns - startNs);
}

/** The second held, in seconds since the epoch: that of the last time {@link intoSecond} split. */
export function heldSecond(): number {
  return second;
}
