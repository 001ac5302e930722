/**
 * Requests made with the global `fetch` whose results feed the {@link HttpClassifier} directly.
 *
 * {@link fetchExchange} makes one attempt: it sends the request with the attempt's signal (which
 * aborts when the attempt's time runs out) and the call's idempotency key, records the response
 * on the attempt's context as it arrives, reads the body up to a size cap and against the
 * attempt's time, and returns an {@link HttpExchange} instead of throwing: a response whose body
 * ended whole, at the cap, broken mid-stream, or cut when the attempt's time ran out, or a
 * {@link TransportError} when no response arrived. {@link fetchCall} makes a whole call through an
 * adapter, and {@link fetchCallAndFollow} and {@link fetchResume} follow what it accepted.
 *
 * @example
 * const search = new Adapter({
 *   tool: "search",
 *   target: "https://search.example/v1/items",
 *   classifier: new HttpClassifier({ notFound: "unreachable", itemsAt: "/items" }),
 * });
 * const envelope = await fetchCall(search, "https://search.example/v1/items?q=cats");
 */

import type { Adapter, AttemptContext } from "./adapter.js";
import { type BodyEnd, HttpArrival, type HttpExchange, TransportError, type TransportErrorKind } from "./classify/http.js";
import type { Envelope, Operation } from "./envelope.js";
import { InvalidSetting } from "./retry.js";
import { show } from "./vocab.js";

/** The header that carries a call's idempotency key (the IETF HTTPAPI draft). */
export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";

/** The default cap on a response body: 8 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;

/** How requests are made. */
export interface FetchOptions {
  /** The cap on a response body, in bytes; reading stops there (a 2xx is then partial `size_cap`). */
  readonly maxBodyBytes?: number | undefined;
  /** The `fetch` to use; the global one by default. */
  readonly fetch?: typeof globalThis.fetch | undefined;
}

/** The error codes Node's fetch (undici) reports, by the transport error they stand for. */
const CODES: readonly [TransportErrorKind, readonly string[]][] = [
  ["timeout", ["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "ETIMEDOUT"]],
  ["reset", ["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "UND_ERR_CLOSED", "ECONNABORTED"]],
  [
    "connect",
    ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENETDOWN", "UND_ERR_CONNECT"],
  ],
];

function codeOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null || !("code" in error)) {
    return undefined;
  }
  const code = error.code;
  return typeof code === "string" ? code : undefined;
}

/** The error and its causes, one after another: what the client reported. */
export function describeError(error: unknown): string {
  const parts: string[] = [];
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current !== undefined && current !== null && !seen.has(current)) {
    seen.add(current);
    const text = current instanceof Error ? current.message || current.name : show(current);
    if (text !== "" && !parts.includes(text)) {
      parts.push(text);
    }
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(": ");
}

/**
 * The transport error a `fetch` failure stands for, or `undefined` when the error is no failure
 * of the transport (an invalid URL or request, a bug in the calling code), which then propagates.
 *
 * A refused or unresolvable connection is `connect`; a connection reset or closed before a
 * response `reset`; the client's own timeouts `timeout`; a response that is not HTTP (a parser
 * error, `HPE_*`) `protocol`.
 */
export function transportError(error: unknown): TransportError | undefined {
  if (error instanceof TransportError) {
    return error;
  }
  const chain: unknown[] = [];
  for (let current: unknown = error; current instanceof Error && chain.length < 8; current = current.cause) {
    chain.push(current);
  }
  const isFetchFailure = chain.some((e) => e instanceof TypeError && e.message === "fetch failed");
  const codes = chain.map(codeOf).filter((code): code is string => code !== undefined);
  const message = describeError(error);
  if (codes.some((code) => code.startsWith("HPE_") || code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH")) {
    return new TransportError("protocol", message);
  }
  for (const [kind, known] of CODES) {
    if (codes.some((code) => known.includes(code))) {
      return new TransportError(kind, message);
    }
  }
  if (chain.some((e) => e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError"))) {
    return new TransportError("timeout", message);
  }
  return isFetchFailure ? new TransportError("connect", message) : undefined;
}

/** The response headers as received, less `Content-Length` when the body was decoded. */
function receivedHeaders(response: Response): [string, string][] {
  const encoded = response.headers.has("content-encoding");
  return Array.from(response.headers).filter(([name]) => !(encoded && name === "content-length"));
}

/** The request's headers, with the call's idempotency key when it has one and the caller set none. */
function requestHeaders(init: RequestInit | undefined, attempt: AttemptContext | undefined): Headers {
  const headers = new Headers(init?.headers);
  if (attempt?.idempotencyKey !== undefined && !headers.has(IDEMPOTENCY_KEY_HEADER)) {
    headers.set(IDEMPOTENCY_KEY_HEADER, attempt.idempotencyKey);
  }
  return headers;
}

function maxBodyBytes(options: FetchOptions): number {
  const cap = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(cap) || cap < 0) {
    throw new InvalidSetting("maxBodyBytes", cap, "must be a whole number of bytes");
  }
  return cap;
}

async function readBody(
  response: Response,
  arrival: HttpArrival,
  cap: number,
  attempt: AttemptContext | undefined,
): Promise<BodyEnd | undefined> {
  const body = response.body;
  if (body === null) {
    return undefined;
  }
  const reader = body.getReader();
  const ranOut = (): BodyEnd => ({ kind: "timed_out", afterNs: attempt?.timeoutNs ?? 0 });
  try {
    for (;;) {
      const read = await reader.read();
      const value: unknown = read.value;
      if (attempt?.signal.aborted === true) {
        // What arrives after the attempt's time is too late: the body is what came before.
        return ranOut();
      }
      if (read.done) {
        return undefined;
      }
      if (!(value instanceof Uint8Array)) {
        return { kind: "broken", error: `the body stream gave ${typeof value}, not bytes` };
      }
      const room = cap - arrival.size;
      if (value.length > room) {
        arrival.add(value.subarray(0, room));
        await reader.cancel().catch(() => undefined);
        return { kind: "size_cap", limit: cap };
      }
      arrival.add(value);
    }
  } catch (error) {
    if (attempt?.signal.aborted === true) {
      return ranOut();
    }
    return { kind: "broken", error: describeError(error) };
  } finally {
    reader.releaseLock();
  }
}

/**
 * Makes one attempt with `fetch` and returns its raw result for the {@link HttpClassifier}.
 *
 * With an attempt context, the request carries the attempt's signal (combined with
 * `init.signal`) and the call's idempotency key, the response is recorded on the context as it
 * arrives, and the body is read until the attempt's time runs out. Redirects are not followed
 * unless `init.redirect` says so: a 3xx is the answer (a status URL's 303 is read as such).
 *
 * @throws what `fetch` throws that is no failure of the transport, and the abort of
 *   `init.signal` (the caller cancelled).
 */
export async function fetchExchange(
  input: string | URL,
  init: RequestInit | undefined,
  attempt: AttemptContext | undefined,
  options: FetchOptions = {},
): Promise<HttpExchange> {
  const cap = maxBodyBytes(options);
  const fetchFn = options.fetch ?? globalThis.fetch;
  const signals = [attempt?.signal, init?.signal ?? undefined].filter((s): s is AbortSignal => s !== undefined);
  const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);
  let response: Response;
  try {
    response = await fetchFn(input, {
      ...init,
      headers: requestHeaders(init, attempt),
      redirect: init?.redirect ?? "manual",
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (error) {
    if (init?.signal?.aborted === true) {
      throw error;
    }
    if (attempt?.signal.aborted === true) {
      return new TransportError("timeout", `no status within the attempt's ${describeError(attempt.signal.reason)}`);
    }
    const failure = transportError(error);
    if (failure === undefined) {
      throw error;
    }
    return failure;
  }
  const arrival = new HttpArrival({
    status: response.status,
    headers: receivedHeaders(response),
    receivedAt: BigInt(Date.now()) * 1_000_000n,
  });
  attempt?.receiving(arrival);
  const end = await readBody(response, arrival, cap, attempt);
  if (end?.kind === "broken" && init?.signal?.aborted === true) {
    throw init.signal.reason;
  }
  return arrival.finish(end);
}

function checkMethod(adapter: Adapter<HttpExchange>, init: RequestInit | undefined): void {
  const method = (init?.method ?? "GET").toUpperCase();
  if (method !== adapter.method) {
    throw new InvalidSetting(
      "method",
      method,
      `is not the adapter's ${adapter.method}: build the adapter with method "${method}", so that a request ` +
        "that may have been applied is not sent again",
    );
  }
}

/**
 * Makes one call through `adapter` with `fetch`: every attempt sends the same request.
 *
 * @throws InvalidSetting when the request's method is not the adapter's: whether a failed
 *   request may be sent again follows from the adapter's method.
 */
export async function fetchCall(
  adapter: Adapter<HttpExchange>,
  input: string | URL,
  init?: RequestInit,
  options: FetchOptions = {},
): Promise<Envelope> {
  checkMethod(adapter, init);
  return adapter.call((attempt) => fetchExchange(input, init, attempt, options));
}

/** How a following reads an operation's status. */
export interface FollowOptions extends FetchOptions {
  /** Where the operation's status is read: by default its `status_url`, else its id. */
  readonly statusUrl?: ((operation: Operation) => string) | undefined;
  /** The status reads' request (a GET by default), e.g. to send credentials. */
  readonly statusInit?: RequestInit | undefined;
}

function readStatusWith(options: FollowOptions): (operation: Operation, attempt: AttemptContext) => Promise<HttpExchange> {
  const where = options.statusUrl ?? ((operation: Operation) => operation.status_url ?? operation.id);
  return (operation, attempt) => fetchExchange(where(operation), { method: "GET", ...options.statusInit }, attempt, options);
}

/**
 * Makes one call through `adapter` with `fetch` and follows the operation its answer accepted to
 * its end, reading the status with GET requests (see `Adapter.callAndFollow`).
 */
export async function fetchCallAndFollow(
  adapter: Adapter<HttpExchange>,
  input: string | URL,
  init?: RequestInit,
  options: FollowOptions = {},
): Promise<Envelope> {
  checkMethod(adapter, init);
  return adapter.callAndFollow((attempt) => fetchExchange(input, init, attempt, options), readStatusWith(options));
}

/** Follows an operation that an earlier call accepted, reading its status with `fetch`. */
export async function fetchResume(
  adapter: Adapter<HttpExchange>,
  operation: Operation,
  options: FollowOptions = {},
): Promise<Envelope> {
  return adapter.resume(operation, readStatusWith(options));
}
