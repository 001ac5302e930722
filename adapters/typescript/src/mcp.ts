/**
 * MCP, with the MCP TypeScript SDK (`@modelcontextprotocol/sdk`): `@candor/adapter/mcp`.
 *
 * The client's side: {@link callTool} calls a tool on an MCP server (`Client.callTool`) through an
 * {@link Adapter}, and {@link McpToolClassifier} classifies what came back:
 *
 * | what came back | outcome |
 * |---|---|
 * | a result with `isError: true` | access failure `server_error`, permanent (the tool said it failed), error type `tool_error` |
 * | a JSON-RPC error (`McpError`) | access failure by code: timeout (-32001), connection closed (-32000) and internal error (-32603) transient; parse error `protocol`; invalid request, method or params `client_error`; any other `server_error`; all permanent; the error type is the code |
 * | a result the SDK refused (not a `CallToolResult`, or structured content that does not match the tool's declared output schema) | access failure `protocol`, permanent, `malformed_response` |
 * | no answer (the transport was closed, broke or timed out) | access failure `connect` or `timeout`, transient |
 * | a result whose collection is empty | `empty` only when the tool declares that empty means confirmed absence (`emptyMeansAbsent: true`); else `success` with zero items |
 * | any other result | `success` |
 *
 * The payload is the result's `structuredContent`, or its content blocks when it has none. Where
 * the collection sits is declared with `itemsAt` (a JSON pointer into the structured content);
 * without it, a structured content that is an array is the collection.
 *
 * An empty answer is not evidence of absence unless the tool says so: a search that returns
 * nothing may have searched nothing. Without the declaration, the envelope is a `success` whose
 * extent says `items: 0`, worded as a complete answer with 0 items, never as "nothing exists".
 *
 * ```ts
 * const search = new Adapter({ tool: "kb.search", target: "mcp://kb/search", classifier: new McpToolClassifier({ itemsAt: "/items" }) });
 * const envelope = await callTool(search, client, "search", { q: "cats" });
 * ```
 *
 * The server's side: {@link registerEnvelopeTool} declares a tool on the SDK's `McpServer` whose
 * handler makes a call through a Candor adapter and returns its {@link Envelope}; the tool
 * declares the envelope's JSON Schema as its `outputSchema` and answers as contract 10.5 says
 * ({@link callToolResult}): the envelope as `structuredContent`, the summary first in `content`,
 * and `isError: true` exactly for an access failure.
 *
 * The SDK (and `zod`, which it needs too) are optional peer dependencies of the package: only
 * this module uses them.
 */

import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { AnySchema, SchemaOutput, ShapeOutput, ZodRawShapeCompat } from "@modelcontextprotocol/sdk/server/zod-compat.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type {
  CallToolResult,
  ServerNotification,
  ServerRequest,
  ToolAnnotations,
} from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod/v4";

import type { Adapter } from "./adapter.js";
import type { Classification, Classifier } from "./classify/classification.js";
import { statusFailure, TRANSPORT } from "./classify/http.js";
import { accessFailure, empty, Envelope, type Extent, success } from "./envelope.js";
import { ENVELOPE_JSON_SCHEMA } from "./envelope-schema.js";
import { transportError } from "./fetch.js";
import { fromPlain, type JsonValue, jsonType, pointer } from "./json.js";
import { callToolResult, type EnvelopeToolResult } from "./mcp-result.js";
import { redactText } from "./redact.js";
import type { AccessFailureKind } from "./vocab.js";

export { callToolResult, envelopeOutputSchema, type EnvelopeToolResult, MCP_PROTOCOL_REVISION } from "./mcp-result.js";

/** One MCP attempt's raw result: the tool's result (errors arrive thrown). */
export type McpExchange = CallToolResult;

/** The most characters of a tool's error text repeated in a failure message. */
export const MESSAGE_CHARS = 200;

/** JSON-RPC error codes, as the MCP SDK throws them (its `ErrorCode`). */
export const McpErrorCode = {
  ConnectionClosed: -32000,
  RequestTimeout: -32001,
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
} as const;

const CODES: ReadonlyMap<number, readonly [AccessFailureKind, boolean]> = new Map([
  [McpErrorCode.ConnectionClosed, ["connect", true]],
  [McpErrorCode.RequestTimeout, ["timeout", true]],
  [McpErrorCode.InternalError, ["server_error", true]],
  [McpErrorCode.ParseError, ["protocol", false]],
  [McpErrorCode.InvalidRequest, ["client_error", false]],
  [McpErrorCode.MethodNotFound, ["client_error", false]],
  [McpErrorCode.InvalidParams, ["client_error", false]],
]);

/**
 * The starts of the messages of the errors with which the SDK refuses a tool's result: the
 * server's own check that it is a `CallToolResult`, and `Client.callTool`'s check of the structured
 * content against the output schema the tool declared. The answer came, and is malformed: a
 * `protocol` failure, not the caller's error (whose code, -32602, they share).
 */
const REFUSED_RESULT = [
  "Invalid tools/call result",
  "Structured content does not match the tool's output schema",
  "Failed to validate structured content",
];
const MISSING_STRUCTURED = /^Tool .* has an output schema but did not return structured content$/;

/** The transports' HTTP errors (`StreamableHTTPError`, `SseError`): the message starts so. */
const HTTP_TRANSPORT_ERRORS = ["Streamable HTTP error: ", "SSE error: "];

function failure(kind: AccessFailureKind, retryable: boolean, message: string, errorType: string): Classification {
  return {
    outcome: accessFailure({ kind, retryable, message: redactText(message.slice(0, MESSAGE_CHARS)), error_type: errorType }),
  };
}

/** The text blocks of a result, joined, white space collapsed. */
function textOf(result: CallToolResult): string {
  const texts = result.content.flatMap((block) => (block.type === "text" ? [block.text] : []));
  return texts.join(" ").split(/\s+/u).filter((word) => word !== "").join(" ");
}

/** A value that arrived as JSON, as JSON values (an in-process transport passes objects as they are). */
function asJson(value: unknown): JsonValue {
  const text = JSON.stringify(value) as string | undefined;
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

function errorField(error: unknown, field: string): unknown {
  return typeof error === "object" && error !== null && field in error ? (error as Record<string, unknown>)[field] : undefined;
}

/** An `McpError` (or one of its subclasses), by its shape: another copy of the SDK makes other classes. */
function mcpErrorCode(error: Error): number | undefined {
  const code = errorField(error, "code");
  return typeof code === "number" && Number.isInteger(code) && error.message.startsWith(`MCP error ${code}:`) ? code : undefined;
}

/** An answer to `tools/call` that is not a `CallToolResult`. */
export class MalformedToolResult extends Error {
  override readonly name = "MalformedToolResult";
}

/** What an {@link McpToolClassifier} is told about the tool. */
export interface McpToolClassifierOptions {
  /** The tool author's declaration that an empty collection is a verified absence. */
  readonly emptyMeansAbsent?: boolean | undefined;
  /** The JSON pointer of the collection in the structured content. */
  readonly itemsAt?: string | undefined;
  /** The scope examined, recorded in every success and empty extent. */
  readonly scope?: string | undefined;
}

/** Classifies MCP tool results, and the errors that `Client.callTool` throws. */
export class McpToolClassifier implements Classifier<CallToolResult> {
  /** Whether an empty collection is a verified absence. */
  readonly emptyMeansAbsent: boolean;
  /** The JSON pointer of the collection in the structured content, when declared. */
  readonly itemsAt: string | undefined;
  /** The scope recorded in every success and empty extent. */
  readonly scope: string | undefined;

  constructor(options: McpToolClassifierOptions = {}) {
    this.emptyMeansAbsent = options.emptyMeansAbsent ?? false;
    this.itemsAt = options.itemsAt;
    this.scope = options.scope;
  }

  /** Classifies one tool result. */
  classify(raw: CallToolResult): Classification {
    if (raw.isError === true) {
      const text = textOf(raw) || "the tool reported an error with no text";
      return failure("server_error", false, `tool error: ${text}`, "tool_error");
    }
    let structured: JsonValue | undefined;
    let payload: JsonValue;
    try {
      structured = raw.structuredContent === undefined ? undefined : asJson(raw.structuredContent);
      payload = structured ?? asJson(raw.content);
    } catch (error) {
      return failure("protocol", false, `the result is not JSON: ${String(error)}`, "malformed_response");
    }
    let items: number | undefined;
    if (this.itemsAt !== undefined) {
      const found = pointer(structured === undefined ? null : fromPlain(structured), this.itemsAt);
      if (found === undefined || !(found === null || Array.isArray(found))) {
        const what = found === undefined ? "missing from" : `a ${jsonType(found)} in`;
        return failure(
          "protocol",
          false,
          `declared collection ${this.itemsAt} is ${what} the structured content`,
          "malformed_response",
        );
      }
      items = found === null ? 0 : found.length;
    } else if (Array.isArray(structured)) {
      items = structured.length;
    }
    const extent: { items?: number; scope?: string } = {};
    if (items !== undefined) {
      extent.items = items;
    }
    if (this.scope !== undefined) {
      extent.scope = this.scope;
    }
    const done: Extent = extent;
    if (items === 0 && this.emptyMeansAbsent) {
      return { outcome: empty(done) };
    }
    return { outcome: success(payload, done) };
  }

  /**
   * Classifies a JSON-RPC error, a result the SDK refused, or a failure of the transport;
   * anything else (an `AbortError` among them: a cancellation) propagates.
   */
  classifyError(error: unknown): Classification | undefined {
    if (!(error instanceof Error) || error.name === "AbortError") {
      return undefined;
    }
    const code = mcpErrorCode(error);
    if (code !== undefined) {
      // The SDK prefixes the message with the code, and a server built on it sends the prefixed
      // message of the McpError it threw, which the client prefixes again: once is enough.
      const prefix = `MCP error ${code}: `;
      let raw = error.message;
      while (raw.startsWith(prefix)) {
        raw = raw.slice(prefix.length);
      }
      const message = prefix + raw;
      if (REFUSED_RESULT.some((start) => raw.startsWith(start)) || MISSING_STRUCTURED.test(raw)) {
        return failure("protocol", false, message, "malformed_response");
      }
      const [kind, retryable] = CODES.get(code) ?? ["server_error", false];
      return failure(kind, retryable, message, String(code));
    }
    if (error instanceof MalformedToolResult || error.name === "ZodError" || error.name === "$ZodError") {
      // The answer is not a CallToolResult: the SDK's parse of it failed.
      return failure("protocol", false, `the result is not a CallToolResult: ${error.message}`, "malformed_response");
    }
    if (error.name === "TimeoutError") {
      return failure("timeout", true, error.message || "timed out", "timeout");
    }
    const status = errorField(error, "code");
    if (HTTP_TRANSPORT_ERRORS.some((start) => error.message.startsWith(start)) && typeof status === "number") {
      if (Number.isInteger(status) && status >= 100 && status <= 599) {
        const [kind, retryable] = statusFailure(status);
        return failure(kind, retryable, error.message, String(status));
      }
      return failure("connect", true, error.message, "connect_error");
    }
    if (error.message === "Not connected") {
      return failure("connect", true, "the MCP transport is not connected (it was closed)", "connect_error");
    }
    const transport = transportError(error);
    if (transport !== undefined) {
      const [kind, errorType] = TRANSPORT[transport.kind];
      return failure(kind, true, transport.message, errorType);
    }
    return undefined;
  }
}

function isCallToolResult(result: unknown): result is CallToolResult {
  return typeof result === "object" && result !== null && Array.isArray(errorField(result, "content"));
}

/**
 * Calls the tool `name` on an MCP server through `adapter`, which is built with an
 * {@link McpToolClassifier}, and returns its envelope.
 *
 * Each attempt is one `client.callTool`, given the attempt's time as the SDK's request `timeout`
 * and the attempt's `AbortSignal` (which aborts when that time runs out; the SDK then sends the
 * server `notifications/cancelled`).
 */
export async function callTool(
  adapter: Adapter<CallToolResult>,
  client: Pick<Client, "callTool">,
  name: string,
  args?: Record<string, unknown>,
): Promise<Envelope> {
  return adapter.call(async (attempt) => {
    const result: unknown = await client.callTool(
      args === undefined ? { name } : { name, arguments: args },
      undefined,
      { timeout: attempt.timeoutMs, signal: attempt.signal },
    );
    if (!isCallToolResult(result)) {
      throw new MalformedToolResult("the answer to tools/call has no content: it is not a CallToolResult");
    }
    return result;
  });
}

/** What an envelope tool's handler is given: the SDK's request context. */
export type EnvelopeToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** An envelope tool's handler: it makes a call through a Candor adapter and returns its envelope. */
export type EnvelopeToolHandler<Args extends undefined | ZodRawShapeCompat | AnySchema> = Args extends ZodRawShapeCompat
  ? (args: ShapeOutput<Args>, extra: EnvelopeToolExtra) => Envelope | Promise<Envelope>
  : Args extends AnySchema
    ? (args: SchemaOutput<Args>, extra: EnvelopeToolExtra) => Envelope | Promise<Envelope>
    : (extra: EnvelopeToolExtra) => Envelope | Promise<Envelope>;

/** How an envelope tool is declared: as any `McpServer` tool, less its output schema. */
export interface EnvelopeToolConfig<Args extends undefined | ZodRawShapeCompat | AnySchema> {
  readonly title?: string;
  readonly description?: string;
  /** The tool's parameters, a zod object or shape, as for `McpServer.registerTool`. */
  readonly inputSchema?: Args;
  readonly annotations?: ToolAnnotations;
  readonly _meta?: Record<string, unknown>;
}

/**
 * The envelope's schema as the SDK's `McpServer` takes an output schema (a zod schema): any
 * object, carrying the envelope's JSON Schema as its metadata, which is what zod's JSON Schema
 * conversion writes, so that the tool declares exactly `spec/v1/envelope.v1.schema.json`.
 */
function envelopeZodSchema(): z.ZodObject {
  return z.looseObject({}).meta(structuredClone(ENVELOPE_JSON_SCHEMA) as Record<string, unknown>);
}

/** The `CallToolResult` for an envelope (contract 10.5), as the SDK's type. */
export function toolResult(envelope: Envelope): CallToolResult & EnvelopeToolResult {
  return callToolResult(envelope);
}

/**
 * Declares on `server` the tool `name`, whose handler makes a call through a Candor adapter and
 * returns its {@link Envelope}, and returns the SDK's handle of the tool.
 *
 * The tool declares the envelope's JSON Schema as its `outputSchema`, and answers each call with
 * {@link toolResult} of the envelope: `structuredContent` is the envelope's JSON, `content` is the
 * summary then the envelope's JSON as text, and `isError` is `true` exactly for an access
 * failure, so that a client and its model read a failure, never an empty result. A handler that
 * throws, or returns anything but an envelope, is a tool error (`isError: true`, no structured
 * content), as the SDK makes one.
 */
export function registerEnvelopeTool<Args extends undefined | ZodRawShapeCompat | AnySchema = undefined>(
  server: McpServer,
  name: string,
  config: EnvelopeToolConfig<Args>,
  handler: EnvelopeToolHandler<Args>,
): RegisteredTool {
  const run = handler as (...args: unknown[]) => unknown;
  const callback = async (...args: unknown[]): Promise<CallToolResult> => {
    const envelope = await run(...args);
    if (!(envelope instanceof Envelope)) {
      throw new TypeError(`the handler of the tool ${name} returned ${envelope === null ? "null" : typeof envelope}, not an Envelope`);
    }
    return toolResult(envelope);
  };
  return server.registerTool(
    name,
    { ...config, outputSchema: envelopeZodSchema() },
    callback as Parameters<typeof server.registerTool<z.ZodObject, Args>>[2],
  );
}
