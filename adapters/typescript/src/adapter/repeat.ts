/**
 * Whether a call may be sent again after an attempt that may have been applied (the contract's
 * rule RETRY-UNSAFE).
 *
 * A call that may have been applied is not sent again unless it is safe to repeat: its method is
 * idempotent, the author declares it `idempotent`, or the adapter gives every attempt the call's
 * idempotency key. A failure known not to have been processed (no connection made, a 408, 429 or
 * 503) is retried whatever the method.
 */

import type { Failure } from "../envelope.js";

/** The methods that RFC 9110 (section 9.2.2) defines as idempotent. */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);
/** The statuses that say the source did not process the request (rule RETRY-UNSAFE). */
const NOT_PROCESSED_STATUSES: ReadonlySet<number> = new Set([408, 429, 503]);
/** What precedes the message of a failure made permanent by rule RETRY-UNSAFE. */
export const NOT_SENT_AGAIN = "the request may have been applied, so it was not sent again: ";

/**
 * Whether the source may have processed the request that failed (rule RETRY-UNSAFE): only a
 * connection never made and a 408, 429 or 503 say that it did not.
 */
export function mayHaveBeenApplied(failure: Failure): boolean {
  if (failure.status === undefined) {
    return failure.error_type !== "connect_error";
  }
  return !NOT_PROCESSED_STATUSES.has(failure.status);
}
