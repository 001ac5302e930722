/**
 * The envelope as an MCP tool result (contract 10.5, protocol revision 2025-06-18).
 *
 * A tool that returns envelopes declares {@link envelopeOutputSchema} as its `outputSchema` and
 * answers with {@link callToolResult}: `structuredContent` is the envelope, `content` carries the
 * summary (whose words follow the class) and, for clients that predate structured content, the
 * envelope serialised as text, and `isError` is true exactly for an access failure.
 *
 * This module needs no MCP SDK; `@candor/adapter/mcp` registers such a tool on the SDK's
 * `McpServer`.
 */

import type { Envelope, EnvelopeJson } from "./envelope.js";
import { ENVELOPE_JSON_SCHEMA } from "./envelope-schema.js";
import type { JsonObject } from "./json.js";

/** The MCP protocol revision whose `CallToolResult` shape {@link callToolResult} renders. */
export const MCP_PROTOCOL_REVISION = "2025-06-18";

/** An MCP `CallToolResult` that carries an envelope, as JSON values. */
export interface EnvelopeToolResult {
  /** The summary, then the envelope's JSON as one text. */
  readonly content: [{ type: "text"; text: string }, { type: "text"; text: string }];
  /** The envelope's JSON. */
  readonly structuredContent: EnvelopeJson;
  /** `true` exactly when the envelope's class is `access_failure`. */
  readonly isError: boolean;
  /** The SDK's result type is open to more members. */
  readonly [key: string]: unknown;
}

/** Renders an envelope as an MCP `CallToolResult` (contract 10.5). */
export function callToolResult(envelope: Envelope): EnvelopeToolResult {
  const json = envelope.toJSON();
  return {
    content: [
      { type: "text", text: envelope.summary() },
      { type: "text", text: JSON.stringify(json) },
    ],
    structuredContent: json,
    isError: envelope.outcome.class === "access_failure",
  };
}

/**
 * The envelope's JSON Schema (`spec/v1/envelope.v1.schema.json`, draft 2020-12), to declare as
 * the tool's `outputSchema`: a fresh copy each time.
 */
export function envelopeOutputSchema(): JsonObject {
  return structuredClone(ENVELOPE_JSON_SCHEMA);
}
