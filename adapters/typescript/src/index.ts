/**
 * Candor's TypeScript adapter.
 *
 * Wraps a tool or API call, classifies what came back into exactly one of `success`, `empty`,
 * `partial` and `access_failure`, owns the retry policy, returns a typed {@link Envelope} and
 * emits OpenTelemetry signals, as the contract `spec/v1/contract.md` says.
 *
 * @packageDocumentation
 */

export * from "./envelope.js";
export * from "./json.js";
export * from "./names.js";
export * from "./redact.js";
export * from "./timestamps.js";
export * from "./version.js";
export * from "./vocab.js";
export { InvalidEnvelope, type EnvelopeRule, parseEnvelope, readEnvelope } from "./wire.js";
export {
  Adapter,
  type AdapterOptions,
  AttemptContext,
  type AttemptFn,
  hostOf,
  type ReadStatusFn,
} from "./adapter.js";
export { type Classification, type Classifier, FnClassifier } from "./classify/classification.js";
export {
  BODY_COMPLETE,
  BODY_SNIPPET_CHARS,
  type BodyEnd,
  bodySnippet,
  generatedOperationId,
  type HeadersInit,
  HttpArrival,
  type HttpArrivalInit,
  HttpClassifier,
  type HttpClassifierOptions,
  type HttpExchange,
  HttpResponse,
  type HttpResponseInit,
  type NotFound,
  parseHeaderNumber,
  type ReceivedAt,
  retryAfterMs,
  TransportError,
  type TransportErrorKind,
} from "./classify/http.js";
export { parseHttpDateNs } from "./classify/httpdate.js";
export { type Clock, SystemClock } from "./clock.js";
export { debugDuration, NS_PER_MS, NS_PER_SECOND } from "./duration.js";
export {
  FnStatus,
  HttpStatusReader,
  isEnded,
  isFailure,
  lifecycleOf,
  LongRunning,
  type OperationStatus,
  operationStatus,
  type StatusRead,
  StatusReader,
  StatusUrl,
  type StatusUrlOptions,
} from "./follow.js";
export {
  actionOf,
  type Decision,
  FixedJitter,
  InvalidSetting,
  type Jitter,
  RandomJitter,
  RetryPolicy,
  type RetryPolicyOptions,
  SeededJitter,
} from "./retry.js";
export { isToolFailure, KeepToolFailures } from "./sampling.js";
export { ExportHeartbeat, hrTime, setLoggerProvider } from "./telemetry.js";
export {
  DEFAULT_MAX_BODY_BYTES,
  describeError,
  fetchCall,
  fetchCallAndFollow,
  fetchExchange,
  type FetchOptions,
  fetchResume,
  type FollowOptions,
  IDEMPOTENCY_KEY_HEADER,
  transportError,
} from "./fetch.js";
export { matchOutcome, type ModelView, modelText, modelView, type OutcomeArms } from "./consumer.js";
export { ENVELOPE_JSON_SCHEMA } from "./envelope-schema.js";
export { callToolResult, envelopeOutputSchema, type EnvelopeToolResult, MCP_PROTOCOL_REVISION } from "./mcp-result.js";
