//! Wire names shared by adapters, the collector and every reader.
//!
//! These constants are the only place in the workspace where the names are spelled; a test in
//! `schema/tests/wire_names.rs` fails when a string literal elsewhere repeats one of them.

/// The span that wraps one adapter call, with its attempts as events.
pub const TOOL_CALL_SPAN: &str = "tool.call";

/// The span event emitted once per AccessFailure attempt and once per Partial.
pub const OUTCOME_EVENT: &str = "tool.outcome";

/// The span event emitted once per state of an asynchronous operation that a call saw: its
/// acceptance, each change read while following it, and its end (the contract's rule
/// `TELEMETRY-LIFECYCLE`).
pub const LIFECYCLE_EVENT: &str = "tool.lifecycle";

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

/// Attribute keys of the `tool.outcome` and `tool.lifecycle` span events, the `tool.call` span
/// and the `tool.outcomes` counter.
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
    /// On `tool.outcomes`, for a call whose answer accepted an operation that has not ended:
    /// `accepted`, counted without a class (the contract's rule `TELEMETRY-COUNTER`). On a
    /// `tool.lifecycle` event, the operation's state; on the `tool.call` span, its last state.
    pub const LIFECYCLE_STATE: &str = "tool.lifecycle.state";
    /// On a `tool.lifecycle` event, the asynchronous operation's id.
    pub const OPERATION_ID: &str = "tool.operation.id";
    /// On a `tool.lifecycle` event of a failed operation, why it failed.
    pub const LIFECYCLE_REASON: &str = "tool.lifecycle.reason";
    /// On a `tool.lifecycle` event of a completed or partial operation, the id of the resource
    /// its end named (the lifecycle's `resource.id`).
    pub const RESOURCE_ID: &str = "tool.resource.id";
    /// With [`RESOURCE_ID`], the resource's version when the source said (`resource.version`).
    pub const RESOURCE_VERSION: &str = "tool.resource.version";
    /// On `tool.outcome` and `tool.lifecycle` events, the envelope's
    /// `provenance.source_system`.
    pub const PROVENANCE_SOURCE_SYSTEM: &str = "tool.provenance.source_system";
    /// On `tool.outcome` and `tool.lifecycle` events, the envelope's `provenance.actor`, when
    /// it has one.
    pub const PROVENANCE_ACTOR: &str = "tool.provenance.actor";
    /// On `tool.outcome` and `tool.lifecycle` events, the envelope's `provenance.adapter`: the
    /// implementation and its version.
    pub const PROVENANCE_ADAPTER: &str = "tool.provenance.adapter";
    /// On the event that ends a call, the kind of its envelope's evidence: a member of
    /// [`crate::EvidenceKind`].
    pub const EVIDENCE_KIND: &str = "tool.evidence.kind";
    /// On the event that ends a call, its envelope's evidence itself (a request id, a receipt,
    /// ...).
    pub const EVIDENCE_VALUE: &str = "tool.evidence.value";
}

/// Resource attributes every adapter process carries.
pub mod resource {
    /// The service that hosts the adapter.
    pub const SERVICE_NAME: &str = "service.name";
    /// The instance of that service.
    pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
    /// OpenTelemetry's host name: with [`PROCESS_PID`], a sender's instance when it names none.
    pub const HOST_NAME: &str = "host.name";
    /// OpenTelemetry's process id: with [`HOST_NAME`], a sender's instance when it names none.
    pub const PROCESS_PID: &str = "process.pid";
}

/// OpenTelemetry's standard span attributes and values the collector derives outcomes from, for
/// the calls that standard GenAI, MCP and HTTP client instrumentation traces (the contract's
/// section 10.7). They are OpenTelemetry's names, not Candor's; they are spelled here so that
/// the collector, its tests and its configuration's defaults share one spelling.
pub mod semconv {
    /// The GenAI operation: `execute_tool` on a tool call's span.
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The value of [`GEN_AI_OPERATION_NAME`] on a tool call.
    pub const EXECUTE_TOOL: &str = "execute_tool";
    /// The tool's name, on GenAI and MCP spans.
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    /// One tool call's id, shared by the GenAI and MCP spans of that call.
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// The MCP method: `tools/call` on a tool call's span.
    pub const MCP_METHOD_NAME: &str = "mcp.method.name";
    /// The value of [`MCP_METHOD_NAME`] on a tool call.
    pub const MCP_TOOLS_CALL: &str = "tools/call";
    /// A non-standard spelling of the tool's name some MCP instrumentations use.
    pub const MCP_TOOL_NAME: &str = "mcp.tool.name";
    /// A JSON-RPC error code, on an MCP span whose response was an error.
    pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
    /// The HTTP method (stable name).
    pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
    /// The HTTP method (the name older instrumentations still emit by default).
    pub const HTTP_METHOD: &str = "http.method";
    /// The HTTP status (the name older instrumentations emit; the stable one is
    /// [`super::attr::HTTP_STATUS_CODE`]).
    pub const HTTP_STATUS_CODE_OLD: &str = "http.status_code";
    /// How often the request was sent again.
    pub const HTTP_REQUEST_RESEND_COUNT: &str = "http.request.resend_count";
    /// The request's full URL (stable name).
    pub const URL_FULL: &str = "url.full";
    /// The request's full URL (older name).
    pub const HTTP_URL: &str = "http.url";
    /// The URL's scheme.
    pub const URL_SCHEME: &str = "url.scheme";
    /// The low-cardinality route of the URL, e.g. `/users/{id}`.
    pub const URL_TEMPLATE: &str = "url.template";
    /// The server's host name or address.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// The server's port.
    pub const SERVER_PORT: &str = "server.port";
    /// The transport, e.g. `pipe` for an MCP server on standard input and output.
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    /// The span event that records an exception.
    pub const EXCEPTION_EVENT: &str = "exception";
    /// The exception's type, on [`EXCEPTION_EVENT`].
    pub const EXCEPTION_TYPE: &str = "exception.type";
    /// The exception's message, on [`EXCEPTION_EVENT`].
    pub const EXCEPTION_MESSAGE: &str = "exception.message";
    /// The `X-Request-Id` response header, as HTTP client instrumentations record a captured
    /// header (an array of its values).
    pub const HTTP_RESPONSE_HEADER_X_REQUEST_ID: &str = "http.response.header.x-request-id";
    /// The same header as instrumentations that follow older conventions name it, with `-`
    /// written `_` (Python's httpx instrumentation among them).
    pub const HTTP_RESPONSE_HEADER_X_REQUEST_ID_OLD: &str = "http.response.header.x_request_id";

    /// The names above that no other vocabulary spells as an ordinary word, for the check that
    /// no other place spells them.
    pub const ALL: &[&str] = &[
        GEN_AI_OPERATION_NAME,
        GEN_AI_TOOL_NAME,
        GEN_AI_TOOL_CALL_ID,
        MCP_METHOD_NAME,
        MCP_TOOL_NAME,
        RPC_RESPONSE_STATUS_CODE,
        HTTP_REQUEST_METHOD,
        HTTP_STATUS_CODE_OLD,
        HTTP_REQUEST_RESEND_COUNT,
        URL_TEMPLATE,
        NETWORK_TRANSPORT,
        EXCEPTION_TYPE,
        EXCEPTION_MESSAGE,
        HTTP_RESPONSE_HEADER_X_REQUEST_ID,
        HTTP_RESPONSE_HEADER_X_REQUEST_ID_OLD,
    ];
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
    /// One record per `tool.lifecycle` event, keyed by operation id (one operation's states in
    /// order on one partition).
    pub const OPERATION_EVENTS: &str = "candor.operation-events.v1";
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
    /// From `candor.operation-events.v1`.
    pub const OPERATION_EVENTS: &str = "operation_events";
}

/// Every wire name above, for checks that no other place spells them. The table names are not in
/// it: `rejected` is also an ordinary word of other vocabularies (a request status), and a table
/// name is mostly spelled inside SQL text, where the check could not see it anyway.
pub const ALL: &[&str] = &[
    TOOL_CALL_SPAN,
    OUTCOME_EVENT,
    LIFECYCLE_EVENT,
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
    attr::EVIDENCE_KIND,
    attr::EVIDENCE_VALUE,
    attr::LIFECYCLE_STATE,
    attr::OPERATION_ID,
    attr::LIFECYCLE_REASON,
    attr::RESOURCE_ID,
    attr::RESOURCE_VERSION,
    attr::PROVENANCE_SOURCE_SYSTEM,
    attr::PROVENANCE_ACTOR,
    attr::PROVENANCE_ADAPTER,
    resource::SERVICE_NAME,
    resource::SERVICE_INSTANCE_ID,
    topic::OUTCOME_EVENTS,
    topic::OUTCOME_COUNTS,
    topic::REJECTED,
    topic::HEARTBEATS,
    topic::OPERATION_EVENTS,
];
