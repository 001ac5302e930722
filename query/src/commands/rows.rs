//! The rows the questions answer with, one struct per kind, each field named and typed.
//!
//! The commands build these; [`crate::answer::Row`] gives each kind its columns and JSON values
//! where an answer is shown ([`crate::answer::Rows::of`]).

use std::time::Duration;

use candor_records::proto::Sampling;
use candor_schema::LifecycleState;

use crate::rates::{ClassCounts, Denominator};
use crate::reconcile::SeriesKey;
use crate::window::Micros;

use super::OpenStatus;

/// One row of `candor rates`: a group's calls, terminal failure events and silent-failure rate in
/// one bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct RatesRow {
    /// The group: a target, tool, service or convention, as the question grouped by
    /// ([`super::GroupBy`]).
    pub group: String,
    /// Where the group's calls came from: `adapter`, `genai`, `mcp` or `http`; `all` when the
    /// question merged the sources.
    pub source: String,
    /// The bucket's start.
    pub bucket_start: Micros,
    /// The bucket's end.
    pub bucket_end: Micros,
    /// Calls per class; `None` when the group has failure events but no call counts (the
    /// denominator is missing).
    pub counts: Option<ClassCounts>,
    /// (access_failure + partial) / calls, when there were calls.
    pub silent_failure_rate: Option<f64>,
    /// What the rate is; `None` without a rate.
    pub rate_bound: Option<RateBound>,
    /// What the group's derived counts said of their spans' sampling; `None` when none said
    /// anything (an adapter's counts, or spans of a known sampling).
    pub sampling: Option<Sampling>,
    /// Whether the rate has a denominator.
    pub denominator: Denominator,
    /// The terminal failure events stored for the group in the bucket.
    pub failure_events: u64,
}

/// What a silent-failure rate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateBound {
    /// The rate of the calls counted.
    Exact,
    /// A lower bound: some calls are unverified (derived calls without error, any of which may
    /// have been partial).
    LowerBound,
}

impl RateBound {
    /// The spelling in answers.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::LowerBound => "lower_bound",
        }
    }
}

/// One row of `candor spikes`: a target whose AccessFailure rate rose in the window, or one with
/// many terminal AccessFailure events but no call counts, whose rate is unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct SpikeRow {
    /// The target.
    pub target: String,
    /// Where its calls came from: `adapter`, `genai`, `mcp` or `http`; `all` when the question
    /// merged the sources.
    pub source: String,
    /// AccessFailure calls in the window; for a target without call counts, its terminal
    /// AccessFailure events.
    pub window_access_failures: u64,
    /// The calls and rates; `None` for a target without call counts.
    pub rates: Option<SpikeRates>,
}

/// The calls and rates of a [`SpikeRow`] whose target has call counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeRates {
    /// All calls in the window.
    pub window_calls: u64,
    /// AccessFailure rate in the window.
    pub window_rate: f64,
    /// AccessFailure calls in the baseline.
    pub baseline_access_failures: u64,
    /// All calls in the baseline.
    pub baseline_calls: u64,
    /// AccessFailure rate in the baseline; `None` when the baseline had no calls.
    pub baseline_rate: Option<f64>,
    /// Window rate / baseline rate; `None` when the baseline rate is zero or unknown (a new
    /// failure).
    pub factor: Option<f64>,
}

/// One failure event of `candor incident` and `candor trace`, as stored: its fields are the
/// columns of [`super::EVENT_COLUMNS`], of the same names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// When the event happened: the stored UTC timestamp in RFC 3339, as DataFusion displays it
    /// (and `candor sql` shows it).
    pub event_time: String,
    /// The sender's `service.name`.
    pub service_name: String,
    /// The sender's `service.instance.id`; empty when it has none.
    pub service_instance_id: String,
    /// `tool.name`.
    pub tool_name: String,
    /// `tool.target`.
    pub tool_target: String,
    /// The system that answered, on an adapter's event.
    pub source_system: Option<String>,
    /// Where the outcome came from (`adapter`, `genai`, `mcp`, `http`); `None` on events written
    /// before sources were told apart, all of which are an adapter's.
    pub source: Option<String>,
    /// The convention a derived call was recognised by.
    pub convention: Option<String>,
    /// The adapter's implementation and version, on an adapter's event.
    pub adapter: Option<String>,
    /// Who the call acted for, when the adapter was told.
    pub actor: Option<String>,
    /// `access_failure` or `partial`.
    pub outcome_class: String,
    /// `tool.failure.kind`.
    pub failure_kind: String,
    /// `tool.retry.action`.
    pub retry_action: String,
    /// `tool.retry.attempt`, from 1.
    pub retry_attempt: i64,
    /// `tool.retry.max_attempts`.
    pub retry_max_attempts: i64,
    /// `http.response.status_code`, when there was a response.
    pub http_status_code: Option<i64>,
    /// `error.type`.
    pub error_type: Option<String>,
    /// What the failure said.
    pub error_message: Option<String>,
    /// `exception.type` of a derived call's `exception` event.
    pub exception_type: Option<String>,
    /// `rpc.response.status_code` of a derived call's span, as sent.
    pub rpc_status_code: Option<String>,
    /// `tool.coverage`.
    pub coverage: Option<String>,
    /// `tool.dropped`.
    pub dropped: Option<String>,
    /// The kind of the evidence of the call's outcome.
    pub evidence_kind: Option<String>,
    /// The evidence itself.
    pub evidence_value: Option<String>,
    /// The tool call's `gen_ai.tool.call.id`.
    pub tool_call_id: Option<String>,
    /// The span's trace id.
    pub trace_id: String,
    /// The span's id.
    pub span_id: String,
    /// The event's id.
    pub event_id: String,
}

/// One open operation of `candor operations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRow {
    /// `service_name`.
    pub service: String,
    /// The adapter instance that sent its latest event.
    pub instance: String,
    /// `tool_name`.
    pub tool: String,
    /// `tool_target`.
    pub target: String,
    /// `operation_id`.
    pub operation_id: String,
    /// The state of its latest event.
    pub state: LifecycleState,
    /// The time of its first event in the window.
    pub first_seen: Micros,
    /// The time of its latest event.
    pub last_seen: Micros,
    /// How long it has been open, from `first_seen` to the window's end (or now), in whole
    /// seconds.
    pub age: Duration,
    /// The actor of its latest event that names one.
    pub actor: Option<String>,
    /// The source system of its latest event.
    pub source_system: String,
    /// What is known of it.
    pub status: OpenStatus,
}

/// One row of `candor reconcile`: a window of a counter series where the gap between the calls
/// counted and the terminal events stored appeared or grew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileRow {
    /// The series.
    pub series: SeriesKey,
    /// The window's start.
    pub window_start: Micros,
    /// The window's end.
    pub window_end: Micros,
    /// The counter's increase over the window; `None` for a series with events but no counter
    /// point at all.
    pub counted: Option<u64>,
    /// The terminal events stored in the window.
    pub events: u64,
    /// Events that went missing in the window: counted calls whose terminal event is not
    /// stored.
    pub missing: u64,
    /// Events that appeared uncounted in the window.
    pub extra: u64,
}
