//! The adapter's telemetry: one `tool.outcome` span event per AccessFailure attempt and per
//! Partial, on a `tool.call` span; one increment of `tool.outcomes` per call; a `tracing`
//! mirror of each event for local logs.
//!
//! Each event is recorded when it happens (contract rule `TELEMETRY-MOMENT`): a failed attempt
//! that will be retried, and each state of an operation the call sees, are added to the call's
//! span at once (the span starts at the call's first event) and emitted as log records (see
//! [`set_logger_provider`]), which reach the pipeline while the call still runs. The call's end
//! adds the terminal event and ends the span. A Success or an Empty costs one counter increment
//! and no span, unless the author asked for every call to be traced.

mod log;

pub use log::set_logger_provider;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use candor_schema::names::{self, attr};
use candor_schema::{
    Attempt, Envelope, Evidence, FailureKind, Lifecycle, LifecycleState, OutcomeClass, RetryAction,
    Truncation,
};
use opentelemetry::global::{self, BoxedSpan, BoxedTracer};
use opentelemetry::logs::LoggerProvider;
use opentelemetry::metrics::{Counter, Meter, MeterProvider, ObservableCounter};
use opentelemetry::trace::{Span as _, SpanBuilder, SpanKind, Status, Tracer as _, TracerProvider};
use opentelemetry::{Context, InstrumentationScope, KeyValue, Value};

use log::LogSink;

/// The counter of failure spans that the host's sampler dropped (the host did not install
/// [`crate::KeepToolFailures`]); the events are still in the local log mirror.
pub const UNRECORDED_SPANS_COUNTER: &str = "candor.adapter.unrecorded_spans";

/// The `tracing` target of the local mirror of each `tool.outcome` event.
pub const MIRROR_TARGET: &str = "candor_adapter::outcome";

/// The instrumentation scope the adapter reports under.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// Where the adapter's spans and counters go.
///
/// `tool.outcomes` is an observable counter over five atomics, the four classes and the
/// acceptances: a call costs one atomic increment, and the SDK reads the totals when it
/// collects. An adapter is meant to be built once
/// per tool and shared (it is `Sync`); each build registers one more callback with the meter.
pub(crate) struct Telemetry {
    tracer: BoxedTracer,
    /// Calls by final class, in [`CLASSES`] order, then the calls whose answer was an
    /// acceptance ([`ACCEPTED`]).
    counts: Arc<[AtomicU64; 5]>,
    /// Keeps the `tool.outcomes` registration alive as long as the adapter.
    _outcomes: ObservableCounter<u64>,
    unrecorded: Counter<u64>,
    /// The counter's attribute set for each slot of `counts`, built once.
    class_attributes: [Vec<KeyValue>; 5],
    /// `tool.name`, `tool.target` and, when known, `tool.authority`.
    identity: Vec<KeyValue>,
    trace_every_call: bool,
    /// Where the log-based form of events goes, when a logger provider was set.
    logs: Option<LogSink>,
    /// `tool.provenance.*` of every event: the adapter's, the same for each call.
    provenance: Vec<KeyValue>,
    tool: Arc<str>,
    target: Arc<str>,
}

/// Where the adapter should send telemetry; the global providers unless told otherwise.
#[derive(Default)]
pub(crate) struct TelemetryConfig {
    pub tracer: Option<BoxedTracer>,
    pub meter: Option<Meter>,
    pub trace_every_call: bool,
    pub logs: Option<LogSink>,
}

impl TelemetryConfig {
    pub(crate) fn tracer_provider<P>(&mut self, provider: &P)
    where
        P: TracerProvider,
        P::Tracer: Send + Sync + 'static,
        <P::Tracer as opentelemetry::trace::Tracer>::Span: Send + Sync + 'static,
    {
        self.tracer = Some(BoxedTracer::new(Box::new(
            provider.tracer_with_scope(scope()),
        )));
    }

    pub(crate) fn meter_provider(&mut self, provider: &dyn MeterProvider) {
        self.meter = Some(provider.meter_with_scope(scope()));
    }

    pub(crate) fn logger_provider<P>(&mut self, provider: &P)
    where
        P: LoggerProvider,
        P::Logger: Send + Sync + 'static,
    {
        self.logs = Some(log::sink(provider));
    }
}

impl Telemetry {
    pub(crate) fn new(
        config: TelemetryConfig,
        tool: &Arc<str>,
        target: &Arc<str>,
        authority: Option<String>,
        source_system: &Arc<str>,
        actor: Option<&Arc<str>>,
    ) -> Self {
        let tracer = config
            .tracer
            .unwrap_or_else(|| global::tracer_with_scope(scope()));
        let meter = config
            .meter
            .unwrap_or_else(|| global::meter_with_scope(scope()));
        let unrecorded = meter
            .u64_counter(UNRECORDED_SPANS_COUNTER)
            .with_description("Failure spans the host's sampler dropped")
            .build();
        let name = KeyValue::new(attr::TOOL_NAME, Value::String(tool.clone().into()));
        let target_name = target.clone();
        let target = KeyValue::new(attr::TOOL_TARGET, Value::String(target.clone().into()));
        let [success, empty, partial, access_failure] = CLASSES.map(|class| {
            vec![
                name.clone(),
                target.clone(),
                KeyValue::new(attr::OUTCOME_CLASS, class.as_str()),
            ]
        });
        let accepted = vec![
            name.clone(),
            target.clone(),
            KeyValue::new(attr::LIFECYCLE_STATE, LifecycleState::Accepted.as_str()),
        ];
        let class_attributes = [success, empty, partial, access_failure, accepted];
        let counts: Arc<[AtomicU64; 5]> = Arc::default();
        let observed = (counts.clone(), class_attributes.clone());
        let outcomes = meter
            .u64_observable_counter(names::OUTCOMES_COUNTER)
            .with_unit(names::OUTCOMES_COUNTER_UNIT)
            .with_description("Tool calls by final outcome class")
            .with_callback(move |observer| {
                let (counts, attributes) = &observed;
                for (slot, (count, attributes)) in counts.iter().zip(attributes).enumerate() {
                    let count = count.load(Ordering::Relaxed);
                    // The classes from the start, zeros included; acceptances once there is one.
                    if slot != ACCEPTED || count > 0 {
                        observer.observe(count, attributes);
                    }
                }
            })
            .build();
        let mut identity = vec![name, target];
        if let Some(authority) = authority {
            identity.push(KeyValue::new(attr::AUTHORITY, authority));
        }
        Self {
            tracer,
            counts,
            _outcomes: outcomes,
            unrecorded,
            class_attributes,
            identity,
            trace_every_call: config.trace_every_call,
            logs: config.logs.or_else(log::global),
            provenance: provenance_attributes(source_system, actor),
            tool: tool.clone(),
            target: target_name,
        }
    }

    /// Records, at the moment it ends, an attempt that failed and will be retried: its event on
    /// the call's span (started now if this is the call's first event) and as a log record.
    pub(crate) fn retried(&self, trace: &mut CallTrace, attempt: &Attempt, max_attempts: u32) {
        let attributes = self.event_attributes(attempt, max_attempts, None, None);
        let span = self.live_span(trace, attempt.failure_kind, None);
        self.emit(span, names::OUTCOME_EVENT, event_time(attempt), attributes);
        mirror(&self.tool, &self.target, attempt);
    }

    /// Records, at the moment it was seen, a state of the operation the call accepted or
    /// follows (rule `TELEMETRY-LIFECYCLE`).
    pub(crate) fn transition(&self, trace: &mut CallTrace, transition: &Transition) {
        let attributes = self.lifecycle_attributes(transition);
        let state = transition.lifecycle.state();
        let span = self.live_span(trace, None, Some(state));
        self.emit(span, names::LIFECYCLE_EVENT, transition.at, attributes);
    }

    /// The call's span, started now at the call's start time when this is the call's first
    /// event, with the event's failure kind or state among its first attributes (what a
    /// sampler keeps it by).
    fn live_span<'c>(
        &self,
        trace: &'c mut CallTrace,
        failure_kind: Option<FailureKind>,
        state: Option<LifecycleState>,
    ) -> &'c mut BoxedSpan {
        let started = trace.started;
        &mut trace
            .live
            .get_or_insert_with(|| {
                let mut attributes = self.identity.clone();
                if let Some(kind) = failure_kind {
                    attributes.push(KeyValue::new(attr::FAILURE_KIND, kind.as_str()));
                }
                if let Some(state) = state {
                    attributes.push(KeyValue::new(attr::LIFECYCLE_STATE, state.as_str()));
                }
                Live {
                    span: self.start_span(started, attributes),
                    failure_kind,
                    state,
                }
            })
            .span
    }

    fn start_span(&self, started: SystemTime, attributes: Vec<KeyValue>) -> BoxedSpan {
        let builder = SpanBuilder {
            name: Cow::Borrowed(names::TOOL_CALL_SPAN),
            span_kind: Some(SpanKind::Client),
            start_time: Some(started),
            attributes: Some(attributes),
            ..SpanBuilder::default()
        };
        self.tracer.build_with_context(builder, &parent_context())
    }

    /// Adds one event to the span and emits its log-based form in the span's context (none
    /// when the span has no valid context: no tracer provider is installed).
    fn emit(
        &self,
        span: &mut BoxedSpan,
        name: &'static str,
        at: SystemTime,
        attributes: Vec<KeyValue>,
    ) {
        if let Some(logs) = &self.logs {
            let context = span.span_context();
            if context.is_valid() {
                logs(name, at, context, &attributes);
            }
        }
        span.add_event_with_timestamp(name, at, attributes);
    }

    /// Records a finished call: the counter always; the terminal event on the span and the
    /// span's end when something went wrong (or every call was asked for). The events recorded
    /// while the call ran are on the span already.
    pub(crate) fn record<P>(&self, envelope: &Envelope<P>, max_attempts: u32, trace: CallTrace) {
        let class = envelope.class();
        let slot = if class == OutcomeClass::Success
            && envelope
                .lifecycle()
                .is_some_and(|lifecycle| !lifecycle.state().is_terminal())
        {
            // Work accepted is not work done: never a success (rule `TELEMETRY-COUNTER`).
            ACCEPTED
        } else {
            class_index(class)
        };
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        let terminal = envelope
            .attempts()
            .last()
            .filter(|attempt| is_eventful(attempt.class) && is_terminal(attempt));
        if trace.live.is_some() || terminal.is_some() || self.trace_every_call {
            self.end_span(envelope, max_attempts, trace, terminal);
        }
    }

    fn end_span<P>(
        &self,
        envelope: &Envelope<P>,
        max_attempts: u32,
        trace: CallTrace,
        terminal: Option<&Attempt>,
    ) {
        let class = envelope.class();
        let failure_kind = envelope
            .attempts()
            .iter()
            .rev()
            .find_map(|attempt| attempt.failure_kind);
        let state = envelope.lifecycle().map(Lifecycle::state);
        let outcome = KeyValue::new(attr::OUTCOME_CLASS, class.as_str());
        let mut live = match trace.live {
            Some(mut live) => {
                // The attributes the span started with stay; the call's end adds the rest.
                live.span.set_attribute(outcome);
                if let Some(kind) = failure_kind.filter(|kind| Some(*kind) != live.failure_kind) {
                    live.span
                        .set_attribute(KeyValue::new(attr::FAILURE_KIND, kind.as_str()));
                }
                if let Some(state) = state.filter(|state| Some(*state) != live.state) {
                    live.span
                        .set_attribute(KeyValue::new(attr::LIFECYCLE_STATE, state.as_str()));
                }
                live
            }
            None => {
                let mut attributes = self.identity.clone();
                attributes.push(outcome);
                if let Some(kind) = failure_kind {
                    attributes.push(KeyValue::new(attr::FAILURE_KIND, kind.as_str()));
                }
                if let Some(state) = state {
                    attributes.push(KeyValue::new(attr::LIFECYCLE_STATE, state.as_str()));
                }
                Live {
                    span: self.start_span(trace.started, attributes),
                    failure_kind,
                    state,
                }
            }
        };
        if let Some(attempt) = terminal {
            let (truncation, evidence) = match envelope.outcome() {
                candor_schema::Outcome::Partial { truncation, .. } => {
                    (Some(truncation), envelope.evidence())
                }
                _ => (None, envelope.evidence()),
            };
            let attributes = self.event_attributes(attempt, max_attempts, truncation, evidence);
            mirror(&self.tool, &self.target, attempt);
            // The terminal event happens at the call's end: on the span, which ends now.
            live.span.add_event_with_timestamp(
                names::OUTCOME_EVENT,
                event_time(attempt),
                attributes,
            );
        }
        if !live.span.is_recording() {
            self.unrecorded
                .add(1, &self.class_attributes[class_index(class)]);
            tracing::warn!(
                target: MIRROR_TARGET,
                parent: None,
                tool = envelope.tool(),
                "the host's sampler dropped a tool failure or operation span; install \
                 KeepToolFailures"
            );
        }
        if let candor_schema::Outcome::AccessFailure { failure } = envelope.outcome() {
            live.span.set_status(Status::error(failure.message.clone()));
        }
        live.span
            .end_with_timestamp(envelope.provenance().finished_at.system_time());
    }

    /// The attributes of one `tool.lifecycle` event (rule `TELEMETRY-LIFECYCLE`).
    fn lifecycle_attributes(&self, transition: &Transition) -> Vec<KeyValue> {
        let lifecycle = &transition.lifecycle;
        let mut attributes = self.identity.clone();
        attributes.push(KeyValue::new(
            attr::OPERATION_ID,
            lifecycle.operation().id.clone(),
        ));
        attributes.push(KeyValue::new(
            attr::LIFECYCLE_STATE,
            lifecycle.state().as_str(),
        ));
        let evidence = match lifecycle {
            Lifecycle::Failed { reason, .. } => {
                attributes.push(KeyValue::new(attr::LIFECYCLE_REASON, reason.clone()));
                None
            }
            Lifecycle::Partial { covered, .. } => {
                attributes.push(KeyValue::new(attr::COVERAGE, covered.clone()));
                None
            }
            Lifecycle::Completed { verified_by, .. } => Some(verified_by),
            Lifecycle::Accepted { .. } => transition.evidence.as_ref(),
            Lifecycle::Queued { .. } | Lifecycle::Running { .. } | Lifecycle::Cancelled { .. } => {
                None
            }
        };
        if let Some(evidence) = evidence {
            attributes.push(KeyValue::new(attr::EVIDENCE_KIND, evidence.kind.as_str()));
            attributes.push(KeyValue::new(attr::EVIDENCE_VALUE, evidence.value.clone()));
        }
        if let Some(resource) = lifecycle.resource() {
            attributes.push(KeyValue::new(attr::RESOURCE_ID, resource.id.clone()));
            if let Some(version) = &resource.version {
                attributes.push(KeyValue::new(attr::RESOURCE_VERSION, version.clone()));
            }
        }
        attributes.extend(self.provenance.iter().cloned());
        attributes
    }

    /// The attributes of one `tool.outcome` event (rule `TELEMETRY-EVENT`): `truncation` on a
    /// Partial, `evidence` on the event that ends the call.
    fn event_attributes(
        &self,
        attempt: &Attempt,
        max_attempts: u32,
        truncation: Option<&Truncation>,
        evidence: Option<&Evidence>,
    ) -> Vec<KeyValue> {
        let mut attributes = self.identity.clone();
        attributes.push(KeyValue::new(attr::OUTCOME_CLASS, attempt.class.as_str()));
        if let Some(kind) = attempt.failure_kind {
            attributes.push(KeyValue::new(attr::FAILURE_KIND, kind.as_str()));
        }
        if let Some(action) = attempt.retry_action {
            attributes.push(KeyValue::new(attr::RETRY_ACTION, action.as_str()));
        }
        attributes.push(KeyValue::new(
            attr::RETRY_ATTEMPT,
            i64::from(attempt.number),
        ));
        attributes.push(KeyValue::new(
            attr::RETRY_MAX_ATTEMPTS,
            i64::from(max_attempts),
        ));
        if attempt.retry_action == Some(RetryAction::Retry) {
            let backoff = attempt.backoff_ms.unwrap_or(0);
            attributes.push(KeyValue::new(
                attr::RETRY_BACKOFF_MS,
                i64::try_from(backoff).unwrap_or(i64::MAX),
            ));
        }
        if let Some(status) = attempt.status {
            attributes.push(KeyValue::new(attr::HTTP_STATUS_CODE, i64::from(status)));
        }
        if let Some(error_type) = &attempt.error_type {
            attributes.push(KeyValue::new(attr::ERROR_TYPE, error_type.clone()));
        }
        if attempt.class == OutcomeClass::Partial
            && let Some(truncation) = truncation
        {
            if let Some(returned) = truncation.returned {
                let returned = i64::try_from(returned).unwrap_or(i64::MAX);
                attributes.push(KeyValue::new(attr::PARTIAL_RETURNED, returned));
            }
            if let Some(expected) = truncation.expected {
                let expected = i64::try_from(expected).unwrap_or(i64::MAX);
                attributes.push(KeyValue::new(attr::PARTIAL_EXPECTED, expected));
            }
            attributes.push(KeyValue::new(attr::COVERAGE, truncation.covered.clone()));
            attributes.push(KeyValue::new(attr::DROPPED, truncation.dropped.clone()));
        }
        if let Some(evidence) = evidence {
            attributes.push(KeyValue::new(attr::EVIDENCE_KIND, evidence.kind.as_str()));
            attributes.push(KeyValue::new(attr::EVIDENCE_VALUE, evidence.value.clone()));
        }
        attributes.extend(self.provenance.iter().cloned());
        attributes
    }
}

/// A call's span while the call runs: none until the call's first event (rule
/// `TELEMETRY-MOMENT`).
pub(crate) struct CallTrace {
    /// The call's start: the span's start time.
    started: SystemTime,
    live: Option<Live>,
}

impl CallTrace {
    /// The trace of a call that started at `started`.
    pub(crate) fn new(started: SystemTime) -> Self {
        Self {
            started,
            live: None,
        }
    }
}

/// A started `tool.call` span and the marks it started with.
struct Live {
    span: BoxedSpan,
    /// The `tool.failure.kind` the span carries.
    failure_kind: Option<FailureKind>,
    /// The `tool.lifecycle.state` the span started with.
    state: Option<LifecycleState>,
}

/// An attempt's event time: its start plus its whole milliseconds (rule `TELEMETRY-EVENT`).
pub(crate) fn event_time(attempt: &Attempt) -> SystemTime {
    attempt.started_at.system_time() + Duration::from_millis(attempt.duration_ms)
}

/// `tool.provenance.*` of every event (rules `TELEMETRY-EVENT`, `TELEMETRY-LIFECYCLE`): the
/// source system, the actor when set, and the adapter.
fn provenance_attributes(source_system: &Arc<str>, actor: Option<&Arc<str>>) -> Vec<KeyValue> {
    let mut attributes = vec![KeyValue::new(
        attr::PROVENANCE_SOURCE_SYSTEM,
        Value::String(source_system.clone().into()),
    )];
    if let Some(actor) = actor {
        attributes.push(KeyValue::new(
            attr::PROVENANCE_ACTOR,
            Value::String(actor.clone().into()),
        ));
    }
    attributes.push(KeyValue::new(
        attr::PROVENANCE_ADAPTER,
        crate::ADAPTER_VERSION,
    ));
    attributes
}

fn is_eventful(class: OutcomeClass) -> bool {
    matches!(class, OutcomeClass::AccessFailure | OutcomeClass::Partial)
}

/// Whether the call's last attempt ends it with an event (rule `TELEMETRY-TERMINAL-EVENT`): an
/// action that ends the call (`exhausted`, `permanent` or `accept_partial`, not `retry`).
fn is_terminal(last: &Attempt) -> bool {
    last.retry_action.is_some_and(RetryAction::ends_call)
}

/// A state of an asynchronous operation that a call saw, and when.
#[derive(Debug, Clone)]
pub(crate) struct Transition {
    /// When the state was seen.
    pub at: SystemTime,
    /// The state, with the operation.
    pub lifecycle: Lifecycle,
    /// For an acceptance, its evidence (the operation's id).
    pub evidence: Option<Evidence>,
}

/// The classes in the order of [`Telemetry::class_attributes`].
const CLASSES: [OutcomeClass; 4] = [
    OutcomeClass::Success,
    OutcomeClass::Empty,
    OutcomeClass::Partial,
    OutcomeClass::AccessFailure,
];

/// The slot of [`Telemetry::counts`] that counts calls whose answer was an acceptance.
const ACCEPTED: usize = 4;

fn class_index(class: OutcomeClass) -> usize {
    match class {
        OutcomeClass::Success => 0,
        OutcomeClass::Empty => 1,
        OutcomeClass::Partial => 2,
        OutcomeClass::AccessFailure => 3,
    }
}

/// The context the `tool.call` span is a child of: the current `tracing` span's OpenTelemetry
/// context when the host uses `tracing` (feature `tracing-context`), else the current
/// OpenTelemetry context.
fn parent_context() -> Context {
    #[cfg(feature = "tracing-context")]
    {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let current = tracing::Span::current();
        if !current.is_none() {
            let context = current.context();
            if context.span().span_context().is_valid() {
                return context;
            }
        }
    }
    Context::current()
}

/// Logs one `tool.outcome` event through `tracing` for local logs.
///
/// The event is a root event (`parent: None`): a host that bridges `tracing` into OpenTelemetry
/// must not receive it as a second span event next to the real one.
fn mirror(tool: &str, tool_target: &str, attempt: &Attempt) {
    let class = attempt.class.as_str();
    let kind = attempt.failure_kind.map(|kind| kind.as_str()).unwrap_or("");
    let action = attempt.retry_action.map(|a| a.as_str()).unwrap_or("");
    let status = attempt.status.unwrap_or(0);
    let number = attempt.number;
    // The same fields at either level; `$macro` is `tracing::info` or `tracing::warn`.
    macro_rules! log_attempt {
        ($macro:ident, $($rest:tt)+) => {
            tracing::$macro!(
                target: MIRROR_TARGET,
                parent: None,
                tool,
                tool_target,
                class,
                kind,
                action,
                attempt = number,
                status,
                $($rest)+
            )
        };
    }
    if attempt.retry_action == Some(RetryAction::Retry) {
        let backoff_ms = attempt.backoff_ms.unwrap_or(0);
        log_attempt!(info, backoff_ms, "tool attempt failed; retrying");
    } else {
        log_attempt!(warn, "tool call ended without a complete answer");
    }
}
