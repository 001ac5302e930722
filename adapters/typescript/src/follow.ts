/**
 * Following an asynchronous operation: reading its status until it ends (contract 10.8).
 *
 * A tool that answers "accepted" (an HTTP 202, or a long-running operation resource) has not
 * done the work yet. An adapter with a status reader follows such an operation with
 * `adapter.callAndFollow` or, later, `adapter.resume`: it reads the status under the retry
 * policy's backoff, honours the source's `Retry-After`, stops at the operation deadline, and ends
 * the call in a terminal state:
 *
 * | the operation                       | the envelope's outcome           | lifecycle      |
 * |-------------------------------------|----------------------------------|----------------|
 * | completed, with evidence            | success with the result          | `completed`    |
 * | finished with part done             | partial `operation_partial`      | `partial`      |
 * | failed                              | access failure `tool_error`      | `failed`       |
 * | cancelled                           | access failure `cancelled`       | `cancelled`    |
 * | not ended at the operation deadline | access failure `deadline`        | the last state |
 * | status unreadable                   | that read's access failure       | the last state |
 *
 * An operation is never started again: starting work twice is not a retry.
 *
 * {@link StatusUrl} and {@link LongRunning} read the two common HTTP protocols; {@link FnStatus}
 * takes the author's own status read, which is also where an independent check of completion
 * goes (reading the resource back and comparing its version, say).
 */

import type { Classification } from "./classify/classification.js";
import {
  HttpClassifier,
  type HttpExchange,
  type HttpResponse,
  TransportError,
  bodySnippet,
  retryAfterMs,
} from "./classify/http.js";
import type { Evidence, Failure, Lifecycle, Operation, Resource } from "./envelope.js";
import {
  compact,
  type JsonNode,
  JsonNumber,
  JsonParseError,
  type JsonValue,
  parseJsonBytes,
  pointer,
  toPlain,
} from "./json.js";
import { redactText, redactUrl } from "./redact.js";
import { isTerminalState } from "./vocab.js";

/** What one read of an operation's status said about it; never `accepted`, the start's answer. */
export type OperationStatus =
  /** Accepted and waiting to run. */
  | { readonly state: "queued" }
  /** Running, with its progress in percent when the source reports it. */
  | { readonly state: "running"; readonly percent_complete?: number }
  /** Finished, with evidence of completion from a read independent of the acceptance. */
  | {
      readonly state: "completed";
      readonly result: JsonValue;
      readonly verified_by: Evidence;
      readonly resource?: Resource;
    }
  /** Finished with part of the work done: `covered` was done, `dropped` was not. */
  | {
      readonly state: "partial";
      readonly result: JsonValue;
      readonly covered: string;
      readonly dropped: string;
      readonly resource?: Resource;
    }
  /** Stopped by an error. */
  | { readonly state: "failed"; readonly reason: string }
  /** Stopped on request before it finished. */
  | { readonly state: "cancelled" };

/** Builds {@link OperationStatus} values. */
export const operationStatus = {
  /** Accepted and waiting to run. */
  queued(): OperationStatus {
    return { state: "queued" };
  },
  /** Running, with its progress in percent when known. */
  running(percentComplete?: number): OperationStatus {
    return percentComplete === undefined ? { state: "running" } : { state: "running", percent_complete: percentComplete };
  },
  /** Finished, verified by `verifiedBy`; `resource` is what it produced or changed, when named. */
  completed(result: JsonValue, verifiedBy: Evidence, resource?: Resource): OperationStatus {
    return resource === undefined
      ? { state: "completed", result, verified_by: verifiedBy }
      : { state: "completed", result, verified_by: verifiedBy, resource };
  },
  /** Finished with part done. */
  partial(result: JsonValue, covered: string, dropped: string, resource?: Resource): OperationStatus {
    return resource === undefined
      ? { state: "partial", result, covered, dropped }
      : { state: "partial", result, covered, dropped, resource };
  },
  /** Stopped by an error. */
  failed(reason: string): OperationStatus {
    return { state: "failed", reason };
  },
  /** Stopped on request. */
  cancelled(): OperationStatus {
    return { state: "cancelled" };
  },
};

/** Whether an operation in this status has ended. */
export function isEnded(status: OperationStatus): boolean {
  return isTerminalState(status.state);
}

/** The lifecycle of `operation` that a status stands for. */
export function lifecycleOf(status: OperationStatus, operation: Operation): Lifecycle {
  switch (status.state) {
    case "queued":
    case "cancelled":
      return { state: status.state, operation };
    case "running":
      return status.percent_complete === undefined
        ? { state: "running", operation }
        : { state: "running", operation, percent_complete: status.percent_complete };
    case "completed":
      return status.resource === undefined
        ? { state: "completed", operation, verified_by: status.verified_by }
        : { state: "completed", operation, verified_by: status.verified_by, resource: status.resource };
    case "partial":
      return status.resource === undefined
        ? { state: "partial", operation, covered: status.covered }
        : { state: "partial", operation, covered: status.covered, resource: status.resource };
    case "failed":
      return { state: "failed", operation, reason: status.reason };
  }
}

/** The result of one status read: the status, or the access failure of a read that failed. */
export interface StatusRead {
  /** What the source said, or why it could not be read. */
  readonly status: OperationStatus | Failure;
  /** How long the source asked to wait before the next read (`Retry-After`), in milliseconds. */
  readonly retryAfterMs?: number | undefined;
}

/** Whether a read's status is a failure rather than a state. */
export function isFailure(status: OperationStatus | Failure): status is Failure {
  return !("state" in status);
}

/**
 * Reads the raw result `Q` of one status request into a {@link StatusRead}.
 *
 * `read` must be total and deterministic. `accepted`, `refuse` and `readError` have defaults
 * that a protocol may override.
 */
// Q names the raw result of a status request, which an adapter's reads must return.
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters
export abstract class StatusReader<Q> {
  /** Reads one status request's raw result. */
  abstract read(operation: Operation, raw: Q): StatusRead;

  /**
   * The operation a start answer accepted, when it names one to follow: by default its
   * lifecycle's operation while that has not ended.
   */
  accepted(start: Classification): Operation | undefined {
    const lifecycle = start.lifecycle;
    return lifecycle === undefined || isTerminalState(lifecycle.state) ? undefined : lifecycle.operation;
  }

  /** Why this reader cannot follow `operation`, when it cannot; the call then ends with it. */
  refuse(_operation: Operation): Failure | undefined {
    return undefined;
  }

  /** What a status request that threw `error` read, or `undefined` to let it propagate. */
  readError(_operation: Operation, _error: unknown): StatusRead | undefined {
    return undefined;
  }
}

/** Whether a mapping's result is a whole read: its `status` is a state or a failure, not a number. */
function isStatusRead(result: OperationStatus | Failure | StatusRead): result is StatusRead {
  return "status" in result && typeof result.status === "object";
}

/**
 * A status reader made of the author's own mapping. The mapping takes the operation and one
 * status request's raw result and returns an {@link OperationStatus}, a {@link Failure} (the
 * status could not be read; its `retry_after_ms` is honoured) or a whole {@link StatusRead}. A
 * `completed` status needs its evidence: the author's own check, for example the resource read
 * back with the version the operation was to leave.
 */
export class FnStatus<Q> extends StatusReader<Q> {
  constructor(private readonly mapping: (operation: Operation, raw: Q) => OperationStatus | Failure | StatusRead) {
    super();
  }

  /** Applies the mapping. */
  read(operation: Operation, raw: Q): StatusRead {
    const result = this.mapping(operation, raw);
    if (isStatusRead(result)) {
      return result;
    }
    return isFailure(result) ? { status: result, retryAfterMs: result.retry_after_ms } : { status: result };
  }
}

const UNREACHABLE = new HttpClassifier({ notFound: "unreachable" });

function protocolFailure(message: string): Failure {
  return { kind: "protocol", retryable: false, message, error_type: "malformed_response" };
}

function describeEnd(response: HttpResponse): string {
  const end = response.bodyEnd;
  switch (end.kind) {
    case "size_cap":
      return `cut at the ${end.limit}-byte size cap`;
    case "broken":
      return `the stream broke: ${redactText(end.error)}`;
    case "timed_out":
      return "the read's time ran out while it arrived";
    case "complete":
      return "whole";
  }
}

/** The failure of a read that answered nothing about the operation (section 5 classifies it). */
function unreadable(raw: HttpExchange): StatusRead {
  if (!(raw instanceof TransportError) && raw.status < 400) {
    return { status: protocolFailure(`the status URL answered ${raw.status}, which says nothing about the operation`) };
  }
  const outcome = UNREACHABLE.classify(raw).outcome;
  if (outcome.class !== "access_failure") {
    return { status: protocolFailure("the status read was not a failure") };
  }
  return { status: outcome.failure, retryAfterMs: outcome.failure.retry_after_ms };
}

/** The response of a read, or the read's failure when nothing usable came back. */
function answered(raw: HttpExchange): HttpResponse | StatusRead {
  if (raw instanceof TransportError) {
    return unreadable(raw);
  }
  if (raw.bodyEnd.kind !== "complete") {
    return {
      status: {
        kind: "protocol",
        retryable: true,
        message: `the status response's body was cut (${describeEnd(raw)}); its state cannot be read`,
        status: raw.status,
        error_type: "malformed_response",
      },
    };
  }
  return raw;
}

/**
 * A status reader of HTTP exchanges: an exchange without a whole answer (a transport error,
 * returned or thrown, or a cut body) is a failed read, and a whole answer is the protocol's
 * to read ({@link HttpStatusReader.readAnswer}).
 */
export abstract class HttpStatusReader extends StatusReader<HttpExchange> {
  /** Reads a thrown {@link TransportError} as a returned one; anything else propagates. */
  override readError(operation: Operation, error: unknown): StatusRead | undefined {
    return error instanceof TransportError ? this.read(operation, error) : undefined;
  }

  /** Reads one status request's exchange. */
  read(operation: Operation, raw: HttpExchange): StatusRead {
    const response = answered(raw);
    return "bodyEnd" in response ? this.readAnswer(operation, response) : response;
  }

  /** Reads one whole answer. */
  protected abstract readAnswer(operation: Operation, response: HttpResponse): StatusRead;
}

function jsonBody(response: HttpResponse): JsonNode | Failure {
  try {
    return parseJsonBytes(response.body);
  } catch (error) {
    if (!(error instanceof JsonParseError)) {
      throw error;
    }
    return {
      kind: "protocol",
      retryable: true,
      message: `the status response is not JSON (${error.message}): ${bodySnippet(response.body)}`,
      status: response.status,
      error_type: "malformed_response",
    };
  }
}

function lenientJson(body: Uint8Array): JsonNode {
  try {
    return parseJsonBytes(body);
  } catch {
    return null;
  }
}

function isFailureNode(value: JsonNode | Failure): value is Failure {
  return value !== null && typeof value === "object" && !(value instanceof Map) && !Array.isArray(value) && !(value instanceof JsonNumber);
}

/** A progress in percent: a number from 0 to 100, cut to a whole number. */
function percent(value: JsonNode | undefined): number | undefined {
  if (!(value instanceof JsonNumber) || value.value < 0 || value.value > 100) {
    return undefined;
  }
  return Math.trunc(value.value);
}

/** A JSON value as compact text, cut to 200 characters. */
function compactText(value: JsonNode): string {
  return Array.from(compact(value)).slice(0, 200).join("");
}

function textOf(value: JsonNode): string {
  return typeof value === "string" ? value : compactText(value);
}

/** Why an operation failed: its error's `message`, else its `code`, else the error itself. */
function errorReason(error: JsonNode | undefined): string {
  if (error === undefined) {
    return "the operation reported failure without an error";
  }
  const fields = error instanceof Map ? error : new Map<string, JsonNode>();
  const message = fields.get("message");
  let reason: string;
  if (typeof message === "string" && message !== "") {
    reason = message;
  } else if (fields.has("code")) {
    reason = `error code ${textOf(fields.get("code") ?? null)}`;
  } else {
    reason = compactText(error);
  }
  return redactText(reason);
}

function statusUrlOf(operation: Operation): string {
  return redactUrl(operation.status_url ?? operation.id);
}

function completedByQuery(operation: Operation, result: JsonNode, resource: Resource | undefined): OperationStatus {
  return operationStatus.completed(toPlain(result), { kind: "query", value: statusUrlOf(operation) }, resource);
}

const STATUS_WORDS = new Map<string, OperationStatus["state"]>([
  ...["notstarted", "queued", "pending", "accepted"].map((w) => [w, "queued"] as const),
  ...["running", "inprogress", "started"].map((w) => [w, "running"] as const),
  ...["succeeded", "completed", "done"].map((w) => [w, "completed"] as const),
  ...["partiallysucceeded", "partial"].map((w) => [w, "partial"] as const),
  ...["failed", "error"].map((w) => [w, "failed"] as const),
  ...["canceled", "cancelled"].map((w) => [w, "cancelled"] as const),
]);

/** A status value without case, `_`, `-` or spaces. */
function normalised(state: string): string {
  return state.replace(/[_\- ]/g, "").toLowerCase();
}

/** Where a status body says what, as JSON pointers; each has Azure's default. */
export interface StatusUrlOptions {
  /** The operation's state (default `/status`). */
  readonly statusAt?: string;
  /** The progress in percent (default `/percentComplete`). */
  readonly percentAt?: string;
  /** What a partial operation did (default `/covered`). */
  readonly coveredAt?: string;
  /** The resource a completed or partial operation names (default `/resourceLocation`). */
  readonly resourceAt?: string;
}

/**
 * Reads the status resource of Azure's asynchronous request-reply: a 202 names it
 * (`Operation-Location`, else `Location`), and a read of it says:
 *
 * - 202: running (`Retry-After` honoured, `percentComplete` read);
 * - 303 with `Location`: completed; the location is the result, the `query` evidence and the
 *   resource;
 * - 2xx with a `status` field, read without regard to case, `_`, `-` or spaces: `notstarted`,
 *   `queued`, `pending`, `accepted` are queued; `running`, `inprogress`, `started` running;
 *   `succeeded`, `completed`, `done` completed, with the status URL as `query` evidence;
 *   `partiallysucceeded`, `partial` partial; `failed`, `error` failed (`error.message`, else
 *   `error.code`, as the reason); `canceled`, `cancelled` cancelled; any other value is a
 *   protocol failure, never a completion;
 * - 2xx without a `status` field: completed; the status URL answered with the resource itself,
 *   its `ETag` the resource's version;
 * - any other answer, or none: a failed read, classified by section 5.
 */
export class StatusUrl extends HttpStatusReader {
  private readonly statusAt: string;
  private readonly percentAt: string;
  private readonly coveredAt: string;
  private readonly resourceAt: string;

  constructor(options: StatusUrlOptions = {}) {
    super();
    this.statusAt = options.statusAt ?? "/status";
    this.percentAt = options.percentAt ?? "/percentComplete";
    this.coveredAt = options.coveredAt ?? "/covered";
    this.resourceAt = options.resourceAt ?? "/resourceLocation";
  }

  /** An operation accepted without a status URL cannot be followed by one. */
  override refuse(operation: Operation): Failure | undefined {
    if (operation.status_url !== undefined) {
      return undefined;
    }
    return {
      kind: "protocol",
      retryable: false,
      message:
        `operation ${redactText(operation.id)} was accepted without a status URL (no Operation-Location ` +
        "or Location header): it cannot be followed",
      error_type: "no_status_url",
    };
  }

  /** Reads one whole answer of the status URL. */
  protected readAnswer(operation: Operation, response: HttpResponse): StatusRead {
    const wait = retryAfterMs(response);
    if (response.status === 202) {
      return { status: operationStatus.running(percent(pointer(lenientJson(response.body), this.percentAt))), retryAfterMs: wait };
    }
    if (response.status === 303) {
      return { status: seeOther(response), retryAfterMs: wait };
    }
    if (response.status < 200 || response.status > 299) {
      return unreadable(response);
    }
    const body = jsonBody(response);
    if (isFailureNode(body)) {
      return { status: body, retryAfterMs: wait };
    }
    return { status: this.readBody(operation, body, response.header("etag")), retryAfterMs: wait };
  }

  private readBody(operation: Operation, body: JsonNode, etag: string | undefined): OperationStatus | Failure {
    const state = pointer(body, this.statusAt);
    if (state === undefined) {
      // The status URL answered with the resource itself.
      const id = statusUrlOf(operation);
      return completedByQuery(operation, body, etag === undefined ? { id } : { id, version: etag });
    }
    if (typeof state !== "string") {
      return protocolFailure(`the status field ${this.statusAt} is not a string: ${compactText(state)}`);
    }
    switch (STATUS_WORDS.get(normalised(state))) {
      case "queued":
        return operationStatus.queued();
      case "running":
        return operationStatus.running(percent(pointer(body, this.percentAt)));
      case "completed":
        return completedByQuery(operation, body, this.namedResource(body));
      case "partial": {
        const covered = pointer(body, this.coveredAt);
        return operationStatus.partial(
          toPlain(body),
          covered === undefined ? "part of the operation's work" : textOf(covered),
          "the rest of the operation's work",
          this.namedResource(body),
        );
      }
      case "failed":
        return operationStatus.failed(errorReason(pointer(body, "/error")));
      case "cancelled":
        return operationStatus.cancelled();
      case undefined:
        return protocolFailure(`the status ${JSON.stringify(redactText(state))} is not one this reader knows`);
    }
  }

  private namedResource(body: JsonNode): Resource | undefined {
    const location = pointer(body, this.resourceAt);
    return typeof location === "string" ? { id: redactUrl(location) } : undefined;
  }
}

/** A 303: the operation completed, and its result is at the `Location`. */
function seeOther(response: HttpResponse): OperationStatus | Failure {
  const location = response.header("location");
  if (location === undefined) {
    return protocolFailure("the status URL answered 303 without a Location");
  }
  const redacted = redactUrl(location);
  return operationStatus.completed(redacted, { kind: "query", value: redacted }, { id: redacted });
}

/**
 * Reads a long-running operation resource (Google AIP-151), which the start request returns
 * with a `name` and `done`: `done` absent or false is running (`metadata.progressPercent` its
 * progress); `done` with `error` is cancelled when its `code` is 1 (`CANCELLED`), else failed with
 * its message; `done` with `response` is completed, with the result `response` and the
 * operation's name as `job_id` evidence, the resource being the response's `name` with its `etag`
 * as the version. `done` with neither is a protocol failure: a completion with nothing to show.
 */
export class LongRunning extends HttpStatusReader {
  /**
   * The operation a start answer names: its lifecycle's while it has not ended, else an answer
   * that is an operation resource (an object with a string `name` and a `done` field), also when
   * it is already done; the first read then reports the end.
   */
  override accepted(start: Classification): Operation | undefined {
    if (start.lifecycle !== undefined) {
      return super.accepted(start);
    }
    const outcome = start.outcome;
    if (outcome.class !== "success") {
      return undefined;
    }
    const payload = outcome.payload;
    if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
      return undefined;
    }
    const name = payload["name"];
    return typeof name === "string" && "done" in payload ? { id: name } : undefined;
  }

  /** Reads one whole answer of the operation resource. */
  protected readAnswer(operation: Operation, response: HttpResponse): StatusRead {
    if (response.status < 200 || response.status > 299) {
      return unreadable(response);
    }
    const wait = retryAfterMs(response);
    const body = jsonBody(response);
    if (isFailureNode(body)) {
      return { status: body, retryAfterMs: wait };
    }
    return { status: longRunningStatus(operation, body), retryAfterMs: wait };
  }
}

function longRunningStatus(operation: Operation, body: JsonNode): OperationStatus | Failure {
  const fields = body instanceof Map ? body : new Map<string, JsonNode>();
  if (fields.get("done") !== true) {
    return operationStatus.running(percent(pointer(body, "/metadata/progressPercent")));
  }
  const error = fields.get("error");
  if (error !== undefined) {
    const code = error instanceof Map ? error.get("code") : undefined;
    if (code instanceof JsonNumber && code.integer === 1n) {
      return operationStatus.cancelled();
    }
    return operationStatus.failed(errorReason(error));
  }
  const response = fields.get("response");
  if (response !== undefined) {
    return operationStatus.completed(toPlain(response), { kind: "job_id", value: operation.id }, longRunningResource(response));
  }
  return protocolFailure(
    `operation ${redactText(operation.id)} says done with neither a response nor an error: its completion cannot be verified`,
  );
}

/** The resource a `response` names: its `name` (AIP-122), with its `etag` (AIP-154). */
function longRunningResource(response: JsonNode): Resource | undefined {
  if (!(response instanceof Map)) {
    return undefined;
  }
  const name = response.get("name");
  const etag = response.get("etag");
  if (typeof name !== "string") {
    return undefined;
  }
  const id = redactText(name);
  return typeof etag === "string" ? { id, version: etag } : { id };
}
