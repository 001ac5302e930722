/**
 * Wire names shared with every other Candor component: the span, the events, the instruments and
 * the attribute keys (`spec/v1/registry.md`). Everything this package emits reads them from here.
 */

/** The span that wraps one call, with its attempts and the states of its operation as events. */
export const TOOL_CALL_SPAN = "tool.call";
/** The span event of an attempt that was an access failure or a partial. */
export const OUTCOME_EVENT = "tool.outcome";
/** The span event of a state of an asynchronous operation that a call saw. */
export const LIFECYCLE_EVENT = "tool.lifecycle";
/** The monotonic counter of calls by final class. */
export const OUTCOMES_COUNTER = "tool.outcomes";
/** The unit of {@link OUTCOMES_COUNTER}. */
export const OUTCOMES_COUNTER_UNIT = "{call}";
/** The counter of `tool.call` spans that were not recording (the host's sampler dropped them). */
export const UNRECORDED_SPANS_COUNTER = "candor.adapter.unrecorded_spans";
/** The unit of {@link UNRECORDED_SPANS_COUNTER}. */
export const UNRECORDED_SPANS_COUNTER_UNIT = "{span}";
/** The gauge of the seconds until the instance's next metric export, 0 in its last (contract 10.6). */
export const EXPORT_INTERVAL_GAUGE = "candor.adapter.export_interval";
/** The unit of {@link EXPORT_INTERVAL_GAUGE}. */
export const EXPORT_INTERVAL_GAUGE_UNIT = "s";

/** Attribute keys of the span, its events and the counters. */
export const attr = {
  /** The logical tool name. */
  TOOL_NAME: "tool.name",
  /** The target, credentials redacted. */
  TOOL_TARGET: "tool.target",
  /** An outcome class: the attempt's on an event, the call's final one on the span and counter. */
  OUTCOME_CLASS: "tool.outcome.class",
  /** A failure kind. */
  FAILURE_KIND: "tool.failure.kind",
  /** A retry action. */
  RETRY_ACTION: "tool.retry.action",
  /** The attempt's number, from 1. */
  RETRY_ATTEMPT: "tool.retry.attempt",
  /** The most attempts the policy allows. */
  RETRY_MAX_ATTEMPTS: "tool.retry.max_attempts",
  /** The wait before the next attempt, when the action is `retry`. */
  RETRY_BACKOFF_MS: "tool.retry.backoff_ms",
  /** The HTTP status, when the attempt has one. */
  HTTP_STATUS_CODE: "http.response.status_code",
  /** A short, stable error identifier. */
  ERROR_TYPE: "error.type",
  /** How many items a partial returned. */
  PARTIAL_RETURNED: "tool.partial.returned",
  /** How many items the source had, on a partial. */
  PARTIAL_EXPECTED: "tool.partial.expected",
  /** What the answer covered. */
  COVERAGE: "tool.coverage",
  /** What the answer dropped. */
  DROPPED: "tool.dropped",
  /** The principal or scope the call ran under; never a secret. */
  AUTHORITY: "tool.authority",
  /** The kind of the evidence. */
  EVIDENCE_KIND: "tool.evidence.kind",
  /** The evidence itself. */
  EVIDENCE_VALUE: "tool.evidence.value",
  /** A lifecycle state. */
  LIFECYCLE_STATE: "tool.lifecycle.state",
  /** Why an operation failed. */
  LIFECYCLE_REASON: "tool.lifecycle.reason",
  /** The operation's id. */
  OPERATION_ID: "tool.operation.id",
  /** The resource an operation produced or changed. */
  RESOURCE_ID: "tool.resource.id",
  /** That resource's version. */
  RESOURCE_VERSION: "tool.resource.version",
  /** The envelope's `provenance.source_system`. */
  PROVENANCE_SOURCE_SYSTEM: "tool.provenance.source_system",
  /** The envelope's `provenance.actor`. */
  PROVENANCE_ACTOR: "tool.provenance.actor",
  /** The envelope's `provenance.adapter`. */
  PROVENANCE_ADAPTER: "tool.provenance.adapter",
} as const;
