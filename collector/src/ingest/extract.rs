//! Extraction: from OTLP requests to typed records, with every refusal named.
//!
//! Pure functions. Every `tool.outcome` span event becomes an [`OutcomeEventRef`] (an
//! `OutcomeEvent` record whose texts are still borrowed from the request) or a [`Rejection`];
//! every data point of `tool.outcomes` becomes an [`OutcomeCount`] (carrying the export's
//! `candor.adapter.export_interval`, when it has one) or a [`Rejection`]. Nothing
//! is dropped without one or the other, and what is neither (other spans, other metrics) is
//! counted as ignored.
//!
//! Events are the hot path (one request may carry thousands), so an event is checked and
//! identified without copying its texts or encoding it again: its strings stay borrowed until
//! the view's `encode` writes the record's bytes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use candor_records::proto::{OperationEvent, OutcomeCount};
use candor_schema::names;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use sha2::{Digest, Sha256};

use super::event::hex;
pub use super::event::{EventText, OutcomeEventRef};
// The one closed set of reasons, which the compactor writes too, kept at this path for the
// collector's code: the collector refuses only for the reasons whose `written_by` names
// `RejectedSource::Collector`.
pub use candor_records::rejection::RejectReason;
use candor_records::rejection::{Refusal, refuse};

mod attributes;
mod collect;
pub mod derived;
pub mod failure_type;
mod identity;
mod lifecycle;
mod outcome;
mod points;
mod redaction;
mod rejections;

use collect::{EventCollector, Offered};
use derived::{Candidate, Derivation, DerivedStats, SpanKey};
pub use identity::UNKNOWN_SERVICE;
pub(crate) use identity::{Service, service_of};
use outcome::EventInput;
pub use points::extract_metrics;
use redaction::scrub_borrowed;
pub use redaction::{redact_bytes, redact_count, redact_event, redact_operation};
use rejections::Rejecting as _;
pub use rejections::{Rejection, Signal, count_by_reason, rejected_count, summarize};

/// Bounds on what one request may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest attribute value, in bytes.
    pub max_value_bytes: usize,
    /// The most attributes one event or data point may have.
    pub max_attributes_per_event: usize,
    /// The most `tool.outcome` events one request may carry.
    pub max_events_per_request: usize,
    /// The longest copy of an offending input kept with its rejection.
    pub max_rejected_copy_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_value_bytes: candor_schema::registry::MAX_VALUE_BYTES,
            max_attributes_per_event: candor_schema::registry::MAX_ATTRIBUTES,
            max_events_per_request: 10_000,
            max_rejected_copy_bytes: 4096,
        }
    }
}

/// Where and when a request was received.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The collector's id, stamped on every record.
    pub collector_id: &'a str,
    /// When the request arrived, Unix nanoseconds.
    pub time_unix_nano: u64,
    /// The bounds to apply.
    pub limits: &'a Limits,
    /// How calls are derived from standard spans.
    pub derivation: &'a Derivation,
}

/// What a trace or logs export request held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventsExtract<'a> {
    /// One record per valid `tool.outcome` event, and one per failed call derived from a
    /// standard span.
    pub events: Vec<OutcomeEventRef<'a>>,
    /// The count points of the calls derived from standard spans.
    pub counts: Vec<OutcomeCount>,
    /// One record per valid `tool.lifecycle` event.
    pub operations: Vec<OperationEvent>,
    /// One per refused `tool.outcome` event or derived span.
    pub rejections: Vec<Rejection>,
    /// Spans that carried no `tool.outcome` event and are no call of a derived source, or log
    /// records that are not a `tool.outcome` event.
    pub ignored: u64,
    /// What derivation made of the request's standard spans.
    pub derived: DerivedStats,
    /// The derived calls counted, for the join across requests to remember once Kafka holds
    /// the request ([`derived::Derivation::remember`]).
    pub remember: derived::Remember,
    /// `tool.outcome` events seen, valid or not.
    pub outcome_events_seen: u64,
    /// `tool.lifecycle` events seen, valid or not.
    pub lifecycle_events_seen: u64,
    /// Values a credential was removed from (in records and in rejections' copies).
    pub redacted: u64,
}

/// What a trace export request held.
pub type TracesExtract<'a> = EventsExtract<'a>;

/// What a logs export request held.
pub type LogsExtract<'a> = EventsExtract<'a>;

/// What a metrics export request held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsExtract {
    /// One record per valid `tool.outcomes` data point.
    pub counts: Vec<OutcomeCount>,
    /// One per refused data point (or per metric, when its type is wrong).
    pub rejections: Vec<Rejection>,
    /// Metrics other than `tool.outcomes`.
    pub ignored_metrics: u64,
    /// `tool.outcomes` data points seen, valid or not.
    pub points_seen: u64,
    /// Values a credential was removed from (in records and in rejections' copies).
    pub redacted: u64,
}

/// Extracts the `tool.outcome` events of a trace export request, and the calls of the standard
/// spans it carries ([`derived`]).
pub fn extract_traces<'a>(
    request: &'a ExportTraceServiceRequest,
    received: &Received<'a>,
) -> TracesExtract<'a> {
    let mut events = EventCollector::new(Signal::Traces, received);
    let mut services = Vec::with_capacity(request.resource_spans.len());
    let mut candidates: Vec<Candidate<'a>> = Vec::new();
    let mut adapter_spans = Vec::new();
    for resource_spans in &request.resource_spans {
        let service = service_of(resource_spans.resource.as_ref());
        for scope_spans in &resource_spans.scope_spans {
            let scope = scope_spans.scope.as_ref().map_or("", |s| s.name.as_str());
            for span in &scope_spans.spans {
                let mut carried = false;
                for event in &span.events {
                    let kind = match event.name.as_str() {
                        names::OUTCOME_EVENT => Offered::Outcome,
                        names::LIFECYCLE_EVENT => Offered::Lifecycle,
                        _ => continue,
                    };
                    carried = true;
                    let input = EventInput::span_event(span, event);
                    events.offer(kind, &service, input, event);
                }
                if carried || span.name == names::TOOL_CALL_SPAN {
                    // An adapter's call: its own events and counter declare it.
                    adapter_spans.push((span.trace_id.as_slice(), span.span_id.as_slice()));
                    if !carried {
                        events.out.ignored += 1;
                    }
                } else if let Some(convention) = received.derivation.recognise(span, scope) {
                    candidates.push(Candidate {
                        service: services.len(),
                        span,
                        convention,
                        source: received
                            .derivation
                            .config()
                            .conventions
                            .get(convention)
                            .layer,
                    });
                } else {
                    events.out.ignored += 1;
                }
            }
        }
        services.push(service);
    }
    if !candidates.is_empty() {
        let all_spans = || {
            request
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .flat_map(|s| &s.spans)
                .collect()
        };
        // Failed calls' events share the request's limit with an adapter's events.
        let room = received
            .limits
            .max_events_per_request
            .saturating_sub(events.out.events.len() + events.out.operations.len());
        let derived = derived::derive(
            &candidates,
            &adapter_spans,
            all_spans,
            &services,
            received,
            received.derivation,
            room,
        );
        if let Some((service, span)) = derived.first_over_limit {
            let detail = format!(
                "{} failed call(s) of standard spans past the limit of {} events per request: \
                 counted, without an event each",
                derived.stats.events_over_limit, received.limits.max_events_per_request
            );
            let refusal = refuse(RejectReason::TooManyEvents, detail);
            events
                .out
                .reject(
                    refusal,
                    Signal::Traces,
                    &services[service],
                    span,
                    received.limits,
                )
                .count = derived.stats.events_over_limit;
        }
        for (refusal, service, span) in derived.refusals {
            events.out.reject(
                refusal,
                Signal::Traces,
                &services[service],
                span,
                received.limits,
            );
        }
        if !derived.adapter_call_ids.is_empty() {
            let ids: BTreeMap<SpanKey<'_>, &str> = derived.adapter_call_ids.into_iter().collect();
            for event in &mut events.out.events {
                let key = (event.trace_id.as_bytes(), event.span_id.as_bytes());
                if let Some(id) = ids.get(&key) {
                    // The event's other texts were redacted when it was offered; only the id is
                    // new (a second pass would count their redactions again).
                    let mut id = bounded(id, received.limits.max_value_bytes);
                    scrub_borrowed(&mut id, false, &mut events.out.redacted);
                    event.tool_call_id = Some(id.into());
                }
            }
        }
        for mut event in derived.events {
            events.out.redacted += redact_event(&mut event);
            events.out.events.push(event);
        }
        for mut count in derived.counts {
            events.out.redacted += redact_count(&mut count);
            events.out.counts.push(count);
        }
        events.out.derived = derived.stats;
        events.out.remember = derived.remember;
    }
    events.finish()
}

/// Extracts the `tool.outcome` events of a logs export request: the log records whose event name
/// is `tool.outcome` (the log-based form of the event, OTEP 4430), each checked exactly as the
/// span event is and given the id the same event would have as a span event. Every other log
/// record is ignored and counted.
pub fn extract_logs<'a>(
    request: &'a ExportLogsServiceRequest,
    received: &Received<'a>,
) -> LogsExtract<'a> {
    let mut events = EventCollector::new(Signal::Logs, received);
    for resource_logs in &request.resource_logs {
        let service = service_of(resource_logs.resource.as_ref());
        for scope_logs in &resource_logs.scope_logs {
            for record in &scope_logs.log_records {
                let kind = match record.event_name.as_str() {
                    names::OUTCOME_EVENT => Offered::Outcome,
                    names::LIFECYCLE_EVENT => Offered::Lifecycle,
                    _ => {
                        events.out.ignored += 1;
                        continue;
                    }
                };
                events.offer(kind, &service, EventInput::log_record(record), record);
            }
        }
    }
    events.finish()
}

/// A 128-bit hex id from the SHA-256 of the parts, each length-prefixed so that no two
/// different part lists hash alike.
fn content_id(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hex(&hasher.finalize()[..16])
}

/// At most `max` bytes of `text`, cut at a character boundary, marked when cut.
fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "extract/derived_tests.rs"]
mod derived_tests;
