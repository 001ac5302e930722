//! The adapter's telemetry: one `tool.outcome` span event per AccessFailure attempt and per
//! Partial, on a `tool.call` span; one increment of `tool.outcomes` per call; a `tracing`
//! mirror of each event for local logs.
//!
//! Everything is derived from the finished [`Envelope`], after the call, with the real
//! timestamps: a Success or an Empty costs one counter increment and no span, unless the author
//! asked for every call to be traced.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use candor_schema::names::{self, attr};
use candor_schema::{
    Envelope, Evidence, Lifecycle, LifecycleState, OutcomeClass, Provenance, RetryAction,
};
use opentelemetry::global::{self, BoxedTracer};
use opentelemetry::metrics::{Counter, Meter, MeterProvider, ObservableCounter};
use opentelemetry::trace::{
    Event, Span as _, SpanBuilder, SpanKind, Status, Tracer as _, TracerProvider,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue, Value};

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
}

/// Where the adapter should send telemetry; the global providers unless told otherwise.
#[derive(Default)]
pub(crate) struct TelemetryConfig {
    pub tracer: Option<BoxedTracer>,
    pub meter: Option<Meter>,
    pub trace_every_call: bool,
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
}

impl Telemetry {
    pub(crate) fn new(
        config: TelemetryConfig,
        tool: &Arc<str>,
        target: &Arc<str>,
        authority: Option<String>,
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
        }
    }

    /// Records a finished call: the counter always, the span and events when something went
    /// wrong (or every call was asked for).
    pub(crate) fn record<P>(
        &self,
        envelope: &Envelope<P>,
        max_attempts: u32,
        transitions: &[Transition],
    ) {
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
        let eventful = envelope
            .attempts()
            .iter()
            .any(|attempt| is_eventful(attempt.class));
        if eventful || self.trace_every_call || !transitions.is_empty() {
            self.emit_span(envelope, max_attempts, transitions);
        }
    }

    fn emit_span<P>(&self, envelope: &Envelope<P>, max_attempts: u32, transitions: &[Transition]) {
        let class = envelope.class();
        let provenance = envelope.provenance();
        // Both kinds of event in time order; at the same moment the operation's state comes
        // before the attempt's event, so that the call's terminal event stays its last. An
        // attempt's event is at its start plus its whole milliseconds, so a state seen within
        // the last attempt's final millisecond is placed at that attempt's end, not after it.
        let end = envelope.attempts().last().map(|attempt| {
            attempt.started_at.system_time() + Duration::from_millis(attempt.duration_ms)
        });
        let mut events: Vec<(SystemTime, Event)> = transitions
            .iter()
            .map(|transition| {
                let at = end.map_or(transition.at, |end| transition.at.min(end));
                let attributes = self.lifecycle_attributes(provenance, transition);
                (at, Event::new(names::LIFECYCLE_EVENT, at, attributes, 0))
            })
            .collect();
        for attempt in envelope.attempts().iter().filter(|a| is_eventful(a.class)) {
            let attributes = self.event_attributes(envelope, attempt, max_attempts);
            mirror(envelope, attempt);
            let at = attempt.started_at.system_time() + Duration::from_millis(attempt.duration_ms);
            events.push((at, Event::new(names::OUTCOME_EVENT, at, attributes, 0)));
        }
        // Stable: the transitions, pushed first, stay first among events of the same moment.
        events.sort_by_key(|(at, _)| *at);
        let events = events.into_iter().map(|(_, event)| event).collect();
        let mut attributes = self.identity.clone();
        attributes.push(KeyValue::new(attr::OUTCOME_CLASS, class.as_str()));
        // The kind of the last failed attempt marks the span as a failure span for samplers
        // (see `KeepToolFailures`), even when a retry later succeeded.
        if let Some(kind) = envelope
            .attempts()
            .iter()
            .rev()
            .find_map(|a| a.failure_kind)
        {
            attributes.push(KeyValue::new(attr::FAILURE_KIND, kind.as_str()));
        }
        // The operation's last state marks the span as an operation's for samplers.
        if let Some(lifecycle) = envelope.lifecycle() {
            attributes.push(KeyValue::new(
                attr::LIFECYCLE_STATE,
                lifecycle.state().as_str(),
            ));
        }
        let builder = SpanBuilder {
            name: Cow::Borrowed(names::TOOL_CALL_SPAN),
            span_kind: Some(SpanKind::Client),
            start_time: Some(provenance.started_at.system_time()),
            attributes: Some(attributes),
            events: Some(events),
            links: None,
        };
        let mut span = self.tracer.build_with_context(builder, &parent_context());
        if !span.is_recording() {
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
            span.set_status(Status::error(failure.message.clone()));
        }
        span.end_with_timestamp(provenance.finished_at.system_time());
    }

    /// The attributes of one `tool.lifecycle` event (rule `TELEMETRY-LIFECYCLE`).
    fn lifecycle_attributes(
        &self,
        provenance: &Provenance,
        transition: &Transition,
    ) -> Vec<KeyValue> {
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
        attributes.push(KeyValue::new(
            attr::PROVENANCE_SOURCE_SYSTEM,
            Value::String(provenance.source_system.clone().into()),
        ));
        if let Some(actor) = &provenance.actor {
            attributes.push(KeyValue::new(
                attr::PROVENANCE_ACTOR,
                Value::String(actor.clone().into()),
            ));
        }
        attributes.push(KeyValue::new(
            attr::PROVENANCE_ADAPTER,
            provenance.adapter.clone(),
        ));
        attributes
    }

    fn event_attributes<P>(
        &self,
        envelope: &Envelope<P>,
        attempt: &candor_schema::Attempt,
        max_attempts: u32,
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
            && let candor_schema::Outcome::Partial { truncation, .. } = envelope.outcome()
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
        if is_terminal(envelope, attempt)
            && let Some(evidence) = envelope.evidence()
        {
            attributes.push(KeyValue::new(attr::EVIDENCE_KIND, evidence.kind.as_str()));
            attributes.push(KeyValue::new(attr::EVIDENCE_VALUE, evidence.value.clone()));
        }
        attributes
    }
}

fn is_eventful(class: OutcomeClass) -> bool {
    matches!(class, OutcomeClass::AccessFailure | OutcomeClass::Partial)
}

/// Whether `attempt`'s event is the call's terminal event: the envelope's last attempt, with an
/// action that ends the call (`exhausted`, `permanent` or `accept_partial`, not `retry`).
fn is_terminal<P>(envelope: &Envelope<P>, attempt: &candor_schema::Attempt) -> bool {
    attempt
        .retry_action
        .is_some_and(|action| action != RetryAction::Retry)
        && envelope
            .attempts()
            .last()
            .is_some_and(|last| last.number == attempt.number)
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
fn mirror<P>(envelope: &Envelope<P>, attempt: &candor_schema::Attempt) {
    let class = attempt.class.as_str();
    let kind = attempt.failure_kind.map(|kind| kind.as_str()).unwrap_or("");
    let action = attempt.retry_action.map(|a| a.as_str()).unwrap_or("");
    let status = attempt.status.unwrap_or(0);
    if attempt.retry_action == Some(RetryAction::Retry) {
        tracing::info!(
            target: MIRROR_TARGET,
            parent: None,
            tool = envelope.tool(),
            tool_target = envelope.target(),
            class,
            kind,
            action,
            attempt = attempt.number,
            status,
            backoff_ms = attempt.backoff_ms.unwrap_or(0),
            "tool attempt failed; retrying"
        );
    } else {
        tracing::warn!(
            target: MIRROR_TARGET,
            parent: None,
            tool = envelope.tool(),
            tool_target = envelope.target(),
            class,
            kind,
            action,
            attempt = attempt.number,
            status,
            "tool call ended without a complete answer"
        );
    }
}
