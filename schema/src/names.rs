//! Wire names shared by adapters, the collector and every reader.
//!
//! These constants are the only place in the workspace where the names are spelled; a test in
//! `schema/tests/wire_names.rs` fails when a string literal elsewhere repeats one of them.

/// The span that wraps one adapter call, with its attempts as events.
pub const TOOL_CALL_SPAN: &str = "tool.call";

/// The span event emitted once per AccessFailure attempt and once per Partial.
pub const OUTCOME_EVENT: &str = "tool.outcome";

/// The monotonic counter that counts every call by final class.
pub const OUTCOMES_COUNTER: &str = "tool.outcomes";

/// The unit of [`OUTCOMES_COUNTER`].
pub const OUTCOMES_COUNTER_UNIT: &str = "{call}";

/// The gauge an adapter instance sends with its counters in every metric export: the seconds
/// until its next export, and 0 in its final export at shutdown (the contract's section 10.6).
/// Readers tell an instance that stopped exporting from one that shut down by it.
pub const EXPORT_INTERVAL_GAUGE: &str = "candor.adapter.export_interval";

/// The unit of [`EXPORT_INTERVAL_GAUGE`].
pub const EXPORT_INTERVAL_GAUGE_UNIT: &str = "s";

/// Attribute keys of the `tool.outcome` span event and the `tool.outcomes` counter.
pub mod attr {
    /// `access_failure` or `partial` on events; any class on the counter.
    pub const OUTCOME_CLASS: &str = "tool.outcome.class";
    /// The logical tool name.
    pub const TOOL_NAME: &str = "tool.name";
    /// The endpoint or resource reached for, with credentials redacted.
    pub const TOOL_TARGET: &str = "tool.target";
    /// A member of [`crate::FailureKind`].
    pub const FAILURE_KIND: &str = "tool.failure.kind";
    /// A member of [`crate::RetryAction`].
    pub const RETRY_ACTION: &str = "tool.retry.action";
    /// The 1-based attempt number.
    pub const RETRY_ATTEMPT: &str = "tool.retry.attempt";
    /// The most attempts the policy allows.
    pub const RETRY_MAX_ATTEMPTS: &str = "tool.retry.max_attempts";
    /// The wait before the next attempt, when the action is `retry`.
    pub const RETRY_BACKOFF_MS: &str = "tool.retry.backoff_ms";
    /// The HTTP status, when there was one.
    pub const HTTP_STATUS_CODE: &str = "http.response.status_code";
    /// A short, stable error identifier, when there was an error.
    pub const ERROR_TYPE: &str = "error.type";
    /// How many items a Partial returned, when known.
    pub const PARTIAL_RETURNED: &str = "tool.partial.returned";
    /// How many items a Partial should have returned, when known.
    pub const PARTIAL_EXPECTED: &str = "tool.partial.expected";
    /// What the answer covered, when known.
    pub const COVERAGE: &str = "tool.coverage";
    /// What the answer dropped, when known.
    pub const DROPPED: &str = "tool.dropped";
    /// The principal or scope the call ran under (never a secret), when known.
    pub const AUTHORITY: &str = "tool.authority";
}

/// Resource attributes every adapter process carries.
pub mod resource {
    /// The service that hosts the adapter.
    pub const SERVICE_NAME: &str = "service.name";
    /// The instance of that service.
    pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
}

/// Kafka topics of the pipeline.
pub mod topic {
    /// One record per `tool.outcome` event, keyed by target.
    pub const OUTCOME_EVENTS: &str = "candor.outcome-events.v1";
    /// One record per `tool.outcomes` data point.
    pub const OUTCOME_COUNTS: &str = "candor.outcome-counts.v1";
    /// Input the collector refused, with the reason.
    pub const REJECTED: &str = "candor.rejected.v1";
    /// Liveness records of the pipeline's own processes.
    pub const HEARTBEATS: &str = "candor.heartbeats.v1";
}

/// Delta Lake tables the compactor writes under its table root, one per topic.
pub mod table {
    /// From `candor.outcome-events.v1`.
    pub const OUTCOME_EVENTS: &str = "outcome_events";
    /// From `candor.outcome-counts.v1`.
    pub const OUTCOME_COUNTS: &str = "outcome_counts";
    /// From `candor.rejected.v1`, plus records the compactor could not decode.
    pub const REJECTED: &str = "rejected";
    /// From `candor.heartbeats.v1`.
    pub const HEARTBEATS: &str = "heartbeats";
}

/// Every wire name above, for checks that no other place spells them. The table names are not in
/// it: `rejected` is also an ordinary word of other vocabularies (a request status), and a table
/// name is mostly spelled inside SQL text, where the check could not see it anyway.
pub const ALL: &[&str] = &[
    TOOL_CALL_SPAN,
    OUTCOME_EVENT,
    OUTCOMES_COUNTER,
    EXPORT_INTERVAL_GAUGE,
    attr::OUTCOME_CLASS,
    attr::TOOL_NAME,
    attr::TOOL_TARGET,
    attr::FAILURE_KIND,
    attr::RETRY_ACTION,
    attr::RETRY_ATTEMPT,
    attr::RETRY_MAX_ATTEMPTS,
    attr::RETRY_BACKOFF_MS,
    attr::HTTP_STATUS_CODE,
    attr::ERROR_TYPE,
    attr::PARTIAL_RETURNED,
    attr::PARTIAL_EXPECTED,
    attr::COVERAGE,
    attr::DROPPED,
    attr::AUTHORITY,
    resource::SERVICE_NAME,
    resource::SERVICE_INSTANCE_ID,
    topic::OUTCOME_EVENTS,
    topic::OUTCOME_COUNTS,
    topic::REJECTED,
    topic::HEARTBEATS,
];
