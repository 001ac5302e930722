/**
 * The HTTP classifier: the rules of contract section 5 for tools reached over HTTP.
 *
 * What came back, and the outcome it is:
 *
 * - no response (connect error, reset, the client's timeout, malformed framing): access
 *   failure, transient;
 * - 5xx, 429, 408: access failure, transient, `Retry-After` read;
 * - 401, 403: access failure `auth`, permanent;
 * - 404: as declared: `confirmed_absent` is empty, `unreachable` an access failure;
 * - other 4xx: access failure `client_error`, permanent; 1xx, 3xx and other codes `protocol`;
 * - 202 whose body arrived whole: success with the lifecycle `accepted`, never completed;
 * - 2xx whose body was cut (size cap, broken stream, `Content-Length` mismatch, JSON ending
 *   early, the attempt's time running out while it arrived): partial;
 * - 204 or a blank body, `null` or a collection of no items: empty;
 * - 2xx whose body is not JSON: access failure `protocol`, transient; whose declared collection
 *   is missing or not a list: `protocol`, permanent;
 * - a declared total above the items returned: partial `declared_total`; a truncation marker,
 *   or `has_more` without a cursor: partial `truncation_marker`;
 * - any other 2xx: success.
 */

import { randomBytes } from "node:crypto";

import { debugDuration } from "../duration.js";
import {
  accessFailure,
  type AccessFailureOutcome,
  empty,
  type Evidence,
  type Extent,
  type Failure,
  type Operation,
  type Outcome,
  partial,
  type PartialOutcome,
  success,
  type Truncation,
} from "../envelope.js";
import {
  compact,
  decodeLossy,
  fromPlain,
  type JsonNode,
  JsonNumber,
  JsonParseError,
  jsonEqual,
  JsonPointer,
  jsonType,
  type JsonValue,
  parseJsonBytes,
  parseJsonPlain,
  toPlain,
} from "../json.js";
import { redactText, trimWhiteSpace } from "../redact.js";
import type { AccessFailureKind, PartialKind } from "../vocab.js";
import type { Classification, Classifier } from "./classification.js";
import { parseHttpDateNs } from "./httpdate.js";
import { REASONS } from "./reasons.js";

/** The most characters of a failing response's body that its failure message repeats. */
export const BODY_SNIPPET_CHARS = 200;

/** How the reading of a response body ended. */
export type BodyEnd =
  /** The whole body arrived. */
  | { readonly kind: "complete" }
  /** The client stopped reading at its size cap of `limit` bytes. */
  | { readonly kind: "size_cap"; readonly limit: number }
  /** The stream broke while the body was arriving; `error` is what the client reported. */
  | { readonly kind: "broken"; readonly error: string }
  /** The attempt's time (its timeout, or what was left of the deadline) ran out while it arrived. */
  | { readonly kind: "timed_out"; readonly afterNs: number };

/** The body arrived whole. */
export const BODY_COMPLETE: BodyEnd = Object.freeze({ kind: "complete" });

/** Response headers: name-value pairs in order (a name may repeat), or a record. */
export type HeadersInit = Iterable<readonly [string, string]> | Readonly<Record<string, string>>;

function headerPairs(headers: HeadersInit | undefined): readonly (readonly [string, string])[] {
  if (headers === undefined) {
    return [];
  }
  const pairs: Iterable<readonly [string, string]> =
    Symbol.iterator in headers ? headers : Object.entries(headers);
  return Array.from(pairs, ([name, value]) => [name.toLowerCase(), value] as const);
}

function checkedStatus(status: number): number {
  if (!Number.isInteger(status) || status < 100 || status > 999) {
    throw new RangeError(`an HTTP status is 100 to 999, got ${status}`);
  }
  return status;
}

/** When a response arrived: a `Date`, nanoseconds since the epoch, or `undefined` for now. */
export type ReceivedAt = Date | bigint | undefined;

function receivedAtNs(at: ReceivedAt): bigint {
  if (at === undefined) {
    return BigInt(Date.now()) * 1_000_000n;
  }
  return at instanceof Date ? BigInt(at.getTime()) * 1_000_000n : at;
}

/** Whether a header value holds only tab and the bytes 0x20 to 0x7E (section 5.3). */
function visible(value: string): boolean {
  return /^[\t\x20-\x7e]*$/.test(value);
}

const utf8 = new TextEncoder();

/** What {@link HttpResponse} is made of. */
export interface HttpResponseInit {
  /** The status line's code, 100 to 999. */
  readonly status: number;
  /** The headers in order. */
  readonly headers?: HeadersInit;
  /** The body bytes received; a text is taken as its UTF-8 bytes. */
  readonly body?: Uint8Array | string;
  /** How the body ended; whole by default. */
  readonly bodyEnd?: BodyEnd;
  /** When the response arrived (resolves an HTTP-date `Retry-After`); now by default. */
  readonly receivedAt?: ReceivedAt;
}

/** A response as received, with how its body ended. */
export class HttpResponse {
  /** The status line's code. */
  readonly status: number;
  /** The headers in order, names in lower case. */
  readonly headers: readonly (readonly [string, string])[];
  /** The body bytes received. */
  readonly body: Uint8Array;
  /** Whether the body arrived whole, and how it ended otherwise. */
  readonly bodyEnd: BodyEnd;
  /** When the response arrived, in nanoseconds since the epoch. */
  readonly receivedAtNs: bigint;

  constructor(init: HttpResponseInit) {
    this.status = checkedStatus(init.status);
    this.headers = headerPairs(init.headers);
    this.body = typeof init.body === "string" ? utf8.encode(init.body) : (init.body ?? new Uint8Array());
    this.bodyEnd = init.bodyEnd ?? BODY_COMPLETE;
    this.receivedAtNs = receivedAtNs(init.receivedAt);
  }

  /** The first value of the header `name` (any case), when it is readable text. */
  header(name: string): string | undefined {
    return firstHeader(this.headers, name);
  }
}

function firstHeader(headers: readonly (readonly [string, string])[], name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [key, value] of headers) {
    if (key === wanted) {
      return visible(value) ? value : undefined;
    }
  }
  return undefined;
}

/** What {@link HttpArrival} is made of. */
export interface HttpArrivalInit {
  /** The status line's code, 100 to 999. */
  readonly status: number;
  /** The headers in order. */
  readonly headers?: HeadersInit;
  /** When the status and headers arrived; now by default. */
  readonly receivedAt?: ReceivedAt;
}

/**
 * A response as it arrives: its status and headers, then its body as the bytes come in.
 *
 * A client records one on the attempt's context once the status and headers have arrived
 * (`attempt.receiving(arrival)`), adds the body with {@link HttpArrival.add} as it arrives, and
 * ends it with {@link HttpArrival.finish}. When the attempt's time runs out first, the adapter
 * classifies {@link HttpArrival.cut}: what had arrived by then (rule RETRY-ATTEMPT-TIMEOUT).
 */
export class HttpArrival {
  /** The status line's code. */
  readonly status: number;
  /** The headers in order, names in lower case. */
  readonly headers: readonly (readonly [string, string])[];
  /** When the status and headers arrived, in nanoseconds since the epoch. */
  readonly receivedAtNs: bigint;
  private chunks: Uint8Array[] = [];
  private received = 0;
  private end: BodyEnd | undefined;

  constructor(init: HttpArrivalInit) {
    this.status = checkedStatus(init.status);
    this.headers = headerPairs(init.headers);
    this.receivedAtNs = receivedAtNs(init.receivedAt);
  }

  /** How many body bytes have arrived. */
  get size(): number {
    return this.received;
  }

  /** How the body ended; `undefined` while it is still arriving. */
  get bodyEnd(): BodyEnd | undefined {
    return this.end;
  }

  /** The body bytes received so far. */
  get body(): Uint8Array {
    const body = new Uint8Array(this.received);
    let at = 0;
    for (const chunk of this.chunks) {
      body.set(chunk, at);
      at += chunk.length;
    }
    this.chunks = [body];
    return body.slice();
  }

  /** Adds body bytes that arrived (ignored once the body has ended). */
  add(chunk: Uint8Array | string): void {
    if (this.end !== undefined) {
      return;
    }
    const bytes = typeof chunk === "string" ? utf8.encode(chunk) : chunk.slice();
    this.chunks.push(bytes);
    this.received += bytes.length;
  }

  /** Ends the body (whole by default) and returns the response. */
  finish(end: BodyEnd = BODY_COMPLETE): HttpResponse {
    this.end ??= end;
    return this.response(this.end);
  }

  /**
   * The response as it stood when the attempt's time ran out, `afterNs` into the attempt: a
   * body that had ended keeps its end; one still arriving is cut there, with what it had.
   */
  cut(afterNs: number): HttpResponse {
    return this.response(this.end ?? { kind: "timed_out", afterNs });
  }

  private response(bodyEnd: BodyEnd): HttpResponse {
    return new HttpResponse({
      status: this.status,
      headers: this.headers,
      body: this.body,
      bodyEnd,
      receivedAt: this.receivedAtNs,
    });
  }
}

/** Why no response arrived (section 5.4). */
export type TransportErrorKind = "connect" | "reset" | "timeout" | "protocol";

/** The access failure kind and error type of each transport error kind. */
export const TRANSPORT: Readonly<Record<TransportErrorKind, readonly [AccessFailureKind, string]>> = {
  connect: ["connect", "connect_error"],
  reset: ["connect", "connection_reset"],
  timeout: ["timeout", "timeout"],
  protocol: ["protocol", "http_protocol_error"],
};

/**
 * No response arrived: the connection could not be made (`connect`), was reset or closed before
 * a response (`reset`), the client's own timeout fired before a status (`timeout`), or what came
 * back was not HTTP (`protocol`). An attempt may return it or throw it.
 */
export class TransportError extends Error {
  constructor(
    /** What happened. */
    readonly kind: TransportErrorKind,
    /** What the client reported. */
    message: string,
  ) {
    super(message);
    this.name = "TransportError";
  }
}

/** One HTTP attempt's raw result: a response, or no response at all. */
export type HttpExchange = HttpResponse | TransportError;

/** What a 404 means for a tool: the author's declaration, never a default. */
export type NotFound = "confirmed_absent" | "unreachable";

/** The declarations of an {@link HttpClassifier} (section 5.1). */
export interface HttpClassifierOptions {
  /** What a 404 means: a verified absence (`confirmed_absent`) or a wrong place (`unreachable`). */
  readonly notFound: NotFound;
  /** The JSON pointer of the collection; without it a top-level array is the collection. */
  readonly itemsAt?: string | undefined;
  /** The JSON pointer of the total the source declares. */
  readonly totalAt?: string | undefined;
  /** The header that declares the total (`X-Total-Count` by default); `null` to read none. */
  readonly totalHeader?: string | null | undefined;
  /** Pairs of a JSON pointer and a value that, found there, mark the answer as truncated. */
  readonly truncatedWhen?: readonly (readonly [string, JsonValue])[] | undefined;
  /** A flag pointer and a cursor pointer: truncated when the flag is true with no cursor. */
  readonly hasMoreAt?: readonly [string, string] | undefined;
  /** The JSON pointer of a 202's operation id. */
  readonly operationIdAt?: string | undefined;
  /** The header of the source's request id (`X-Request-Id` by default). */
  readonly requestIdHeader?: string | undefined;
  /** The scope recorded in every success and empty extent. */
  readonly scope?: string | undefined;
}

const U64_END = 2n ** 64n;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * An unsigned number as section 5.3 reads one (an optional `+`, then decimal digits, 0 to
 * 2^64−1), after trimming white space; otherwise `undefined`.
 */
export function parseHeaderNumber(text: string): bigint | undefined {
  const trimmed = trimWhiteSpace(text);
  if (!/^\+?[0-9]+$/.test(trimmed)) {
    return undefined;
  }
  const value = BigInt(trimmed);
  return value < U64_END ? value : undefined;
}

/**
 * A count as the envelope holds it. Counts above 2^53−1 lose precision in a JavaScript number
 * and are held there.
 */
function count(value: bigint): number {
  return Number(value < MAX_SAFE ? value : MAX_SAFE);
}

/** An operation id for an acceptance whose source named none: `candor-` and 32 hexadecimal digits. */
export function generatedOperationId(): string {
  return `candor-${randomBytes(16).toString("hex")}`;
}

/** The access failure kind of an HTTP status that is no success, and whether it is transient. */
export function statusFailure(code: number): readonly [AccessFailureKind, boolean] {
  if (code === 408) {
    return ["timeout", true];
  }
  if (code === 429) {
    return ["rate_limited", true];
  }
  if (code === 401 || code === 403) {
    return ["auth", false];
  }
  if (code >= 400 && code <= 499) {
    return ["client_error", false];
  }
  if (code >= 500 && code <= 599) {
    return ["server_error", true];
  }
  return ["protocol", false];
}

function protocolFailure(message: string, retryable: boolean): AccessFailureOutcome {
  return accessFailure({ kind: "protocol", retryable, message, error_type: "malformed_response" });
}

function bodyPartial(body: Uint8Array, kind: PartialKind, dropped: string): PartialOutcome {
  return partial(decodeLossy(body), { kind, covered: `the first ${body.length} bytes of the body`, dropped });
}

function coveredItems(returned: bigint, total: bigint | undefined): string {
  if (total === undefined) {
    return `${returned} item(s)`;
  }
  return returned === 0n ? `no items of ${total}` : `items 1-${returned} of ${total}`;
}

/**
 * A retryable status's `Retry-After` in milliseconds (rule HTTP-RETRY-AFTER-HEADER): a number of
 * seconds, or the time from the response's arrival to an HTTP-date (0 when it is not later).
 */
export function retryAfterMs(response: HttpResponse): number | undefined {
  const value = response.header("retry-after");
  if (value === undefined) {
    return undefined;
  }
  const seconds = parseHeaderNumber(value);
  if (seconds !== undefined) {
    const ms = seconds * 1000n;
    return count(ms < U64_END ? ms : U64_END - 1n);
  }
  const at = parseHttpDateNs(trimWhiteSpace(value));
  if (at === undefined) {
    return undefined;
  }
  const wait = at - response.receivedAtNs;
  return wait > 0n ? count(wait / 1_000_000n) : 0;
}

/** Whether a UTF-16 code unit is in Unicode category Cc: a C0 control, DEL or a C1 control. */
function isControl(code: number): boolean {
  return code <= 0x1f || (code >= 0x7f && code <= 0x9f);
}

/**
 * The body of a failing response as its message repeats it (section 5.5): its first
 * {@link BODY_SNIPPET_CHARS} characters (code points), each control character read as a space,
 * trimmed and redacted.
 */
export function bodySnippet(body: Uint8Array): string {
  const text = decodeLossy(body);
  let oneLine = "";
  // `text` up to `copied` is in `oneLine`.
  let copied = 0;
  let at = 0;
  for (let chars = 0; at < text.length && chars < BODY_SNIPPET_CHARS; chars += 1) {
    const code = text.charCodeAt(at);
    if (isControl(code)) {
      oneLine += `${text.slice(copied, at)} `;
      copied = at + 1;
    } else if (code >= 0xd800 && code <= 0xdbff && isLowSurrogate(text.charCodeAt(at + 1))) {
      // A surrogate pair is one character.
      at += 1;
    }
    at += 1;
  }
  oneLine += text.slice(copied, at);
  return redactText(trimWhiteSpace(oneLine));
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * Classifies HTTP exchanges by the rules of contract section 5, with the author's declarations
 * (section 5.1). Every declaration but `notFound` is optional.
 *
 * @example
 * new HttpClassifier({ notFound: "unreachable", itemsAt: "/items", totalAt: "/total" })
 */
export class HttpClassifier implements Classifier<HttpExchange> {
  /** What a 404 means. */
  readonly notFound: NotFound;
  /** The JSON pointer of the collection. */
  readonly itemsAt: string | undefined;
  /** The JSON pointer of the declared total. */
  readonly totalAt: string | undefined;
  /** The header of the declared total; `null` reads none. */
  readonly totalHeader: string | null;
  /** The truncation markers, in the order they are tried. */
  readonly truncatedWhen: readonly (readonly [string, JsonNode])[];
  /** The flag and cursor pointers of `has_more`. */
  readonly hasMoreAt: readonly [string, string] | undefined;
  /** The JSON pointer of a 202's operation id. */
  readonly operationIdAt: string | undefined;
  /** The header of the source's request id. */
  readonly requestIdHeader: string;
  /** The scope recorded in every success and empty extent. */
  readonly scope: string | undefined;
  /** The declared pointers, read once. */
  private readonly pointers: {
    readonly items: JsonPointer | undefined;
    readonly total: JsonPointer | undefined;
    readonly truncatedWhen: readonly (readonly [JsonPointer, JsonNode])[];
    readonly hasMore: readonly [JsonPointer, JsonPointer] | undefined;
    readonly operationId: JsonPointer | undefined;
  };
  /**
   * Whether a declaration reads numbers as they were written (a total is an integer, a marker
   * `1` is not `1.0`): the body is then parsed into nodes, else straight into plain values.
   */
  private readonly readsNumbers: boolean;

  constructor(options: HttpClassifierOptions) {
    const declared: unknown = options.notFound;
    if (declared !== "confirmed_absent" && declared !== "unreachable") {
      throw new TypeError(`notFound must be "confirmed_absent" or "unreachable", got ${JSON.stringify(declared)}`);
    }
    this.notFound = options.notFound;
    this.itemsAt = options.itemsAt;
    this.totalAt = options.totalAt;
    this.totalHeader = options.totalHeader === undefined ? "x-total-count" : options.totalHeader;
    this.truncatedWhen = (options.truncatedWhen ?? []).map(([at, value]) => [at, fromPlain(value)] as const);
    this.hasMoreAt = options.hasMoreAt;
    this.operationIdAt = options.operationIdAt;
    this.requestIdHeader = options.requestIdHeader ?? "x-request-id";
    this.scope = options.scope;
    const at = (path: string | undefined): JsonPointer | undefined => (path === undefined ? undefined : new JsonPointer(path));
    this.pointers = {
      items: at(this.itemsAt),
      total: at(this.totalAt),
      truncatedWhen: this.truncatedWhen.map(([path, value]) => [new JsonPointer(path), value] as const),
      hasMore: this.hasMoreAt === undefined ? undefined : [new JsonPointer(this.hasMoreAt[0]), new JsonPointer(this.hasMoreAt[1])],
      operationId: at(this.operationIdAt),
    };
    this.readsNumbers = this.totalAt !== undefined || this.truncatedWhen.length > 0;
  }

  /** Classifies one attempt's response or transport error. */
  classify(raw: HttpExchange): Classification {
    if (raw instanceof TransportError) {
      const [kind, errorType] = TRANSPORT[raw.kind];
      return {
        outcome: accessFailure({ kind, retryable: true, message: redactText(raw.message), error_type: errorType }),
      };
    }
    if (raw.status === 202 && raw.bodyEnd.kind === "complete") {
      let body: JsonNode = null;
      try {
        body = parseJsonBytes(raw.body);
      } catch (error) {
        if (!(error instanceof JsonParseError)) {
          throw error;
        }
      }
      return this.accepted(raw, body);
    }
    const requestId = raw.header(this.requestIdHeader);
    const evidence: Evidence | undefined = requestId === undefined ? undefined : { kind: "request_id", value: requestId };
    return { outcome: this.classifyResponse(raw), evidence };
  }

  /** Classifies a thrown {@link TransportError} as a returned one; anything else is no outcome. */
  classifyError(error: unknown): Classification | undefined {
    return error instanceof TransportError ? this.classify(error) : undefined;
  }

  /**
   * Classifies the response that had arrived when the attempt's time ran out: a 2xx whose body
   * was still arriving is a partial `mid_stream` with the bytes received (rule HTTP-BODY-CUT,
   * case 5); any other status is classified by its status.
   */
  classifyArrival(arrival: HttpArrival, afterNs: number): Classification {
    return this.classify(arrival.cut(afterNs));
  }

  private extent(items: bigint | undefined, declaredTotal: bigint | undefined): Extent {
    const extent: { items?: number; declared_total?: number; scope?: string } = {};
    if (items !== undefined) {
      extent.items = count(items);
    }
    if (declaredTotal !== undefined) {
      extent.declared_total = count(declaredTotal);
    }
    if (this.scope !== undefined) {
      extent.scope = this.scope;
    }
    return extent;
  }

  private classifyResponse(response: HttpResponse): Outcome {
    const code = response.status;
    if (code >= 200 && code <= 299) {
      return this.classifySuccess(response);
    }
    if (code === 404 && this.notFound === "confirmed_absent") {
      return empty(this.extent(0n, undefined));
    }
    const [kind, retryable] = statusFailure(code);
    const reason = REASONS.get(code) ?? "";
    const snippet = bodySnippet(response.body);
    const message = trimWhiteSpace(snippet === "" ? `HTTP ${code} ${reason}` : `HTTP ${code} ${reason}: ${snippet}`);
    const failure: { -readonly [K in keyof Failure]: Failure[K] } = {
      kind,
      retryable,
      message,
      status: code,
      error_type: String(code),
    };
    const wait = retryable ? retryAfterMs(response) : undefined;
    if (wait !== undefined) {
      failure.retry_after_ms = wait;
    }
    return accessFailure(failure);
  }

  private classifySuccess(response: HttpResponse): Outcome {
    const body = response.body;
    const end = response.bodyEnd;
    switch (end.kind) {
      case "complete": {
        const declared = declaredLengthOtherThan(response, body.length);
        if (declared !== undefined) {
          return bodyPartial(body, "mid_stream", `${declared} bytes declared by Content-Length`);
        }
        break;
      }
      case "size_cap":
        return bodyPartial(body, "size_cap", `everything past the ${end.limit}-byte size cap`);
      case "broken":
        return bodyPartial(body, "mid_stream", `the rest of the body (the stream broke: ${redactText(end.error)})`);
      case "timed_out":
        return bodyPartial(
          body,
          "mid_stream",
          `the rest of the body (the attempt's ${debugDuration(end.afterNs)} ran out while it was arriving)`,
        );
    }
    if (response.status === 204 || isBlank(body)) {
      return empty(this.extent(0n, undefined));
    }
    // The nodes, when a declaration needs them, and the payload.
    let node: JsonNode | undefined;
    let value: JsonValue;
    try {
      if (this.readsNumbers) {
        node = parseJsonBytes(body);
        value = toPlain(node);
      } else {
        value = parseJsonPlain(body);
      }
    } catch (error) {
      if (!(error instanceof JsonParseError)) {
        throw error;
      }
      if (error.eof) {
        return bodyPartial(body, "mid_stream", `the rest of the JSON document (${error.message})`);
      }
      return protocolFailure(`2xx body is not JSON: ${error.message}`, true);
    }
    return this.classifyBody(response, value, node);
  }

  /** `node` is the body's nodes when a declaration reads numbers as written ({@link HttpClassifier.readsNumbers}). */
  private classifyBody(response: HttpResponse, body: JsonValue, node: JsonNode | undefined): Outcome {
    let returned: bigint | undefined;
    const items = this.pointers.items;
    if (items !== undefined) {
      const found = items.inPlain(body);
      if (Array.isArray(found)) {
        returned = BigInt(found.length);
      } else if (found === null) {
        returned = 0n;
      } else if (found === undefined) {
        return protocolFailure(`declared collection ${items.path} is missing from the body`, false);
      } else {
        return protocolFailure(`declared collection ${items.path} is a ${jsonType(found)}, not a list`, false);
      }
    } else if (Array.isArray(body)) {
      returned = BigInt(body.length);
    } else if (body === null) {
      returned = 0n;
    }
    const total = this.declaredTotal(response, node);
    const payload = body;
    if (returned !== undefined && total !== undefined && total > returned) {
      return partial(payload, {
        kind: "declared_total",
        covered: coveredItems(returned, total),
        dropped: `${total - returned} item(s)`,
        returned: count(returned),
        expected: count(total),
      });
    }
    const marker = this.truncationMarker(body, node);
    if (marker !== undefined) {
      const truncation: { -readonly [K in keyof Truncation]: Truncation[K] } = {
        kind: "truncation_marker",
        covered: returned === undefined ? "the answer up to the truncation" : coveredItems(returned, total),
        dropped: `an unknown remainder (${marker})`,
      };
      if (returned !== undefined) {
        truncation.returned = count(returned);
      }
      if (total !== undefined) {
        truncation.expected = count(total);
      }
      return partial(payload, truncation);
    }
    if (returned === 0n) {
      return empty(this.extent(0n, total));
    }
    return success(payload, this.extent(returned, total));
  }

  private declaredTotal(response: HttpResponse, body: JsonNode | undefined): bigint | undefined {
    const at = this.pointers.total;
    if (at !== undefined && body !== undefined) {
      const found = at.in(body);
      if (found instanceof JsonNumber && found.integer !== undefined && found.integer >= 0n) {
        return found.integer;
      }
    }
    if (this.totalHeader !== null) {
      const value = response.header(this.totalHeader);
      if (value !== undefined) {
        return parseHeaderNumber(value);
      }
    }
    return undefined;
  }

  private truncationMarker(body: JsonValue, node: JsonNode | undefined): string | undefined {
    if (node !== undefined) {
      for (const [at, value] of this.pointers.truncatedWhen) {
        const found = at.in(node);
        if (found !== undefined && jsonEqual(found, value)) {
          return `${at.path} is ${compact(value)}`;
        }
      }
    }
    if (this.pointers.hasMore === undefined) {
      return undefined;
    }
    const [flag, cursor] = this.pointers.hasMore;
    const more = flag.inPlain(body) === true;
    const found = cursor.inPlain(body);
    const hasCursor = found !== undefined && found !== null && found !== "";
    return more && !hasCursor ? `${flag.path} is true with no ${cursor.path}` : undefined;
  }

  private accepted(response: HttpResponse, body: JsonNode): Classification {
    let fromBody: string | undefined;
    if (this.pointers.operationId !== undefined) {
      const found = this.pointers.operationId.in(body);
      if (found !== undefined) {
        fromBody = typeof found === "string" ? found : compact(found);
      }
    }
    const location = response.header("operation-location") ?? response.header("location");
    const named = fromBody ?? location ?? response.header(this.requestIdHeader);
    let operation: Operation;
    let evidence: Evidence | undefined;
    if (named === undefined) {
      // The source named no id: one made up here keeps this operation apart from every other,
      // and is no evidence of anything the source holds.
      operation = location === undefined
        ? { id: generatedOperationId(), generated: true }
        : { id: generatedOperationId(), status_url: location, generated: true };
    } else {
      operation = location === undefined ? { id: named } : { id: named, status_url: location };
      evidence = { kind: "job_id", value: named };
    }
    return {
      outcome: success(toPlain(body), this.extent(undefined, undefined)),
      evidence,
      lifecycle: { state: "accepted", operation },
      pollAfterMs: retryAfterMs(response),
    };
  }
}

function isBlank(body: Uint8Array): boolean {
  for (const byte of body) {
    if (!(byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0c || byte === 0x0d)) {
      return false;
    }
  }
  return true;
}

/** The `Content-Length` the response declares, when it is a number other than `length`. */
function declaredLengthOtherThan(response: HttpResponse, length: number): bigint | undefined {
  const value = response.header("content-length");
  // Mostly the length as a client writes it: no need to read the number.
  if (value === undefined || value === String(length)) {
    return undefined;
  }
  const declared = parseHeaderNumber(value);
  return declared === BigInt(length) ? undefined : declared;
}
