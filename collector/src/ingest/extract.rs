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
//! [`OutcomeEventRef::encode`] writes the record's bytes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use candor_records::proto::{
    OperationEvent, OutcomeCount, RECORD_SCHEMA_VERSION, Rejected, Temporality,
};
use candor_schema::names::{self, resource};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Metric, NumberDataPoint, ResourceMetrics, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use super::event::OutcomeEventRef;
use super::event::hex;
// The one closed set of reasons, which the compactor writes too, kept at this path for the
// collector's code: the collector refuses only for the reasons whose `written_by` names
// `RejectedSource::Collector`.
pub use candor_records::rejection::RejectReason;
use candor_records::rejection::{Refusal, refuse};

mod attributes;
pub mod derived;
pub mod failure_type;
mod lifecycle;
mod outcome;
mod redaction;

use derived::{Candidate, Derivation, DerivedStats, SpanKey};
use lifecycle::lifecycle_event;
use outcome::{EventInput, outcome_count, outcome_event};
pub use redaction::{redact_bytes, redact_count, redact_event, redact_operation};
use redaction::{redact_json, scrub, scrub_borrowed};

/// What `service.name` is recorded as when the resource does not say (the OpenTelemetry default).
pub const UNKNOWN_SERVICE: &str = "unknown_service";

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

/// Which OTLP signal a rejection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Spans and their events.
    Traces,
    /// Metric data points.
    Metrics,
    /// Log records.
    Logs,
}

impl Signal {
    /// `traces`, `metrics` or `logs`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
        }
    }
}

/// One refused event or data point, with what is needed to find and understand it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Why: one of the reasons the collector writes
    /// ([`RejectReason::all_written_by`] the collector).
    pub reason: RejectReason,
    /// What exactly, e.g. `tool.outcome.class = "maybe"`; bounded.
    pub detail: String,
    /// Which signal.
    pub signal: Signal,
    /// The sending service, when known.
    pub service_name: String,
    /// A bounded JSON copy of the offending input.
    pub input: Vec<u8>,
    /// Whether `input` was cut to the bound.
    pub input_truncated: bool,
    /// How many events or points this rejection stands for (more than 1 only for the events
    /// past `max_events_per_request`, which share one rejection).
    pub count: u64,
}

impl Rejection {
    /// The record kept in `candor.rejected.v1` for this rejection, received at
    /// `received_time_unix_nano` by the collector `collector_id`.
    pub fn to_record(&self, received_time_unix_nano: u64, collector_id: &str) -> Rejected {
        Rejected {
            schema_version: RECORD_SCHEMA_VERSION,
            reason: self.reason.as_str().to_owned(),
            detail: self.detail.clone(),
            signal: self.signal.as_str().to_owned(),
            service_name: self.service_name.clone(),
            input: self.input.clone(),
            input_truncated: self.input_truncated,
            received_time_unix_nano,
            collector_id: collector_id.to_owned(),
            count: self.count,
        }
    }
}

/// How many events or points `rejections` stand for.
pub fn rejected_count(rejections: &[Rejection]) -> u64 {
    rejections.iter().map(|r| r.count).sum()
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

/// The service identity from a resource's attributes, bounded, borrowed from the request when
/// it fits.
#[derive(Clone)]
pub(crate) struct Service<'a> {
    /// `service.name`, else `unknown_service`.
    pub name: Cow<'a, str>,
    /// `service.instance.id`; else `host.name` and `process.pid` joined by `/` (either alone
    /// when the other is missing); else empty.
    pub instance: Cow<'a, str>,
}

/// The service identity of a resource.
pub(crate) fn service_of(resource: Option<&Resource>) -> Service<'_> {
    let mut service = Service {
        name: Cow::Borrowed(UNKNOWN_SERVICE),
        instance: Cow::Borrowed(""),
    };
    let mut host: Option<&str> = None;
    let mut pid: Option<i64> = None;
    for kv in resource
        .map(|r| r.attributes.as_slice())
        .unwrap_or_default()
    {
        let Some(value) = kv.value.as_ref().and_then(|v| v.value.as_ref()) else {
            continue;
        };
        match (kv.key.as_str(), value) {
            (resource::SERVICE_NAME, any_value::Value::StringValue(value)) => {
                service.name = bounded(value, 256);
            }
            (resource::SERVICE_INSTANCE_ID, any_value::Value::StringValue(value)) => {
                service.instance = bounded(value, 256);
            }
            (resource::HOST_NAME, any_value::Value::StringValue(value)) => host = Some(value),
            (resource::PROCESS_PID, any_value::Value::IntValue(value)) => pid = Some(*value),
            _ => {}
        }
    }
    if service.instance.is_empty() {
        service.instance = match (host, pid) {
            (Some(host), Some(pid)) => Cow::Owned(format!("{}/{pid}", bounded(host, 200))),
            (Some(host), None) => bounded(host, 256),
            (None, Some(pid)) => Cow::Owned(pid.to_string()),
            (None, None) => Cow::Borrowed(""),
        };
    }
    service
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
            let mut summary = rejection(
                refuse(RejectReason::TooManyEvents, detail),
                Signal::Traces,
                &services[service],
                span,
                received.limits,
                &mut events.out.redacted,
            );
            summary.count = derived.stats.events_over_limit;
            events.out.rejections.push(summary);
        }
        for (refusal, service, span) in derived.refusals {
            let rejection = rejection(
                refusal,
                Signal::Traces,
                &services[service],
                span,
                received.limits,
                &mut events.out.redacted,
            );
            events.out.rejections.push(rejection);
        }
        if !derived.adapter_call_ids.is_empty() {
            let ids: BTreeMap<SpanKey<'_>, &str> = derived.adapter_call_ids.into_iter().collect();
            for event in &mut events.out.events {
                let key = (event.trace_id.as_slice(), event.span_id.as_slice());
                if let Some(id) = ids.get(&key) {
                    // The event's other texts were redacted when it was offered; only the id is
                    // new (a second pass would count their redactions again).
                    let mut id = bounded(id, received.limits.max_value_bytes);
                    scrub_borrowed(&mut id, false, &mut events.out.redacted);
                    event.tool_call_id = Some(id);
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

/// Which event of the contract an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offered {
    /// `tool.outcome`.
    Outcome,
    /// `tool.lifecycle`.
    Lifecycle,
}

/// The events of one request as they are offered, each a record or a rejection (with a copy of
/// `T`, what it came in), up to `limits.max_events_per_request`; those past it share one
/// rejection that keeps a copy of the first.
struct EventCollector<'a, 'r, T> {
    signal: Signal,
    received: &'r Received<'a>,
    out: EventsExtract<'a>,
    overflow: Option<(Service<'a>, &'a T)>,
    overflowed: u64,
    /// Reused by every event's id.
    scratch: Vec<u8>,
}

impl<'a, 'r, T: Serialize> EventCollector<'a, 'r, T> {
    fn new(signal: Signal, received: &'r Received<'a>) -> Self {
        Self {
            signal,
            received,
            out: EventsExtract::default(),
            overflow: None,
            overflowed: 0,
            scratch: Vec::new(),
        }
    }

    fn offer(&mut self, kind: Offered, service: &Service<'a>, input: EventInput<'a>, copy: &'a T) {
        let limits = self.received.limits;
        match kind {
            Offered::Outcome => self.out.outcome_events_seen += 1,
            Offered::Lifecycle => self.out.lifecycle_events_seen += 1,
        }
        // Both kinds share the request's limit.
        let seen = self.out.outcome_events_seen + self.out.lifecycle_events_seen;
        if seen > limits.max_events_per_request as u64 {
            if self.overflow.is_none() {
                self.overflow = Some((service.clone(), copy));
            }
            self.overflowed += 1;
            return;
        }
        let checked = match kind {
            Offered::Outcome => outcome_event(input, service, self.received, &mut self.scratch)
                .map(|mut record| {
                    self.out.redacted += redact_event(&mut record);
                    self.out.events.push(record);
                }),
            Offered::Lifecycle => lifecycle_event(input, service, self.received, &mut self.scratch)
                .map(|mut record| {
                    self.out.redacted += redact_operation(&mut record);
                    self.out.operations.push(record);
                }),
        };
        if let Err(refusal) = checked {
            self.out.rejections.push(rejection(
                refusal,
                self.signal,
                service,
                copy,
                limits,
                &mut self.out.redacted,
            ));
        }
    }

    fn finish(mut self) -> EventsExtract<'a> {
        let limits = self.received.limits;
        if let Some((service, copy)) = self.overflow {
            let detail = format!(
                "{} tool.outcome or tool.lifecycle event(s) past the limit of {} per request",
                self.overflowed, limits.max_events_per_request
            );
            let mut summary = rejection(
                refuse(RejectReason::TooManyEvents, detail),
                self.signal,
                &service,
                copy,
                limits,
                &mut self.out.redacted,
            );
            summary.count = self.overflowed;
            self.out.rejections.push(summary);
        }
        self.out
    }
}

/// Extracts the `tool.outcomes` data points of a metrics export request.
pub fn extract_metrics(
    request: &ExportMetricsServiceRequest,
    received: &Received<'_>,
) -> MetricsExtract {
    let limits = received.limits;
    let mut out = MetricsExtract::default();
    let mut overflow: Option<(Service<'_>, &NumberDataPoint)> = None;
    let mut overflowed = 0u64;
    for resource_metrics in &request.resource_metrics {
        let service = service_of(resource_metrics.resource.as_ref());
        let export_interval_ms = match export_interval(resource_metrics) {
            Ok(interval) => interval,
            Err((refusal, metric)) => {
                out.rejections.push(rejection(
                    refusal,
                    Signal::Metrics,
                    &service,
                    metric,
                    limits,
                    &mut out.redacted,
                ));
                None
            }
        };
        let first_count = out.counts.len();
        for scope_metrics in &resource_metrics.scope_metrics {
            for metric in &scope_metrics.metrics {
                if metric.name == names::EXPORT_INTERVAL_GAUGE {
                    continue;
                }
                if metric.name != names::OUTCOMES_COUNTER {
                    out.ignored_metrics += 1;
                    continue;
                }
                let sum = match &metric.data {
                    Some(metric::Data::Sum(sum)) if sum.is_monotonic => sum,
                    other => {
                        out.points_seen += 1;
                        let detail = format!(
                            "{} must be a monotonic sum, got {}",
                            names::OUTCOMES_COUNTER,
                            metric_type(other.as_ref())
                        );
                        out.rejections.push(rejection(
                            refuse(RejectReason::WrongMetricType, detail),
                            Signal::Metrics,
                            &service,
                            metric,
                            limits,
                            &mut out.redacted,
                        ));
                        continue;
                    }
                };
                let temporality =
                    match AggregationTemporality::try_from(sum.aggregation_temporality) {
                        Ok(AggregationTemporality::Delta) => Some(Temporality::Delta),
                        Ok(AggregationTemporality::Cumulative) => Some(Temporality::Cumulative),
                        _ => None,
                    };
                for point in &sum.data_points {
                    out.points_seen += 1;
                    if out.points_seen > limits.max_events_per_request as u64 {
                        if overflow.is_none() {
                            overflow = Some((service.clone(), point));
                        }
                        overflowed += 1;
                        continue;
                    }
                    let result = match temporality {
                        Some(temporality) => outcome_count(point, temporality, &service, received),
                        None => Err(refuse(
                            RejectReason::UnspecifiedTemporality,
                            format!("aggregation_temporality {}", sum.aggregation_temporality),
                        )),
                    };
                    match result {
                        Ok(mut record) => {
                            out.redacted += redact_count(&mut record);
                            out.counts.push(record);
                        }
                        Err(refusal) => out.rejections.push(rejection(
                            refusal,
                            Signal::Metrics,
                            &service,
                            point,
                            limits,
                            &mut out.redacted,
                        )),
                    }
                }
            }
        }
        for count in &mut out.counts[first_count..] {
            count.export_interval_ms = export_interval_ms;
        }
    }
    if let Some((service, point)) = overflow {
        let detail = format!(
            "{overflowed} {} data point(s) past the limit of {} per request",
            names::OUTCOMES_COUNTER,
            limits.max_events_per_request
        );
        let refusal = refuse(RejectReason::TooManyEvents, detail);
        let mut summary = rejection(
            refusal,
            Signal::Metrics,
            &service,
            point,
            limits,
            &mut out.redacted,
        );
        summary.count = overflowed;
        out.rejections.push(summary);
    }
    out
}

/// The longest export interval the gauge may declare, in seconds: a day.
const MAX_EXPORT_INTERVAL_SECONDS: f64 = 86_400.0;

/// The value of a resource's `candor.adapter.export_interval` gauge in milliseconds (its newest
/// point, when it has several); `None` when the resource has none. A gauge of another type, or a
/// value that is not a number of seconds from 0 to a day, is refused with the metric it came in;
/// the counter points of the same export are still kept, without an interval.
fn export_interval(resource_metrics: &ResourceMetrics) -> Result<Option<u64>, (Refusal, &Metric)> {
    let Some(metric) = resource_metrics
        .scope_metrics
        .iter()
        .flat_map(|scope| &scope.metrics)
        .rfind(|metric| metric.name == names::EXPORT_INTERVAL_GAUGE)
    else {
        return Ok(None);
    };
    let Some(metric::Data::Gauge(gauge)) = &metric.data else {
        let detail = format!(
            "{} must be a gauge, got {}",
            names::EXPORT_INTERVAL_GAUGE,
            metric_type(metric.data.as_ref())
        );
        return Err((refuse(RejectReason::WrongMetricType, detail), metric));
    };
    let Some(point) = gauge
        .data_points
        .iter()
        .max_by_key(|point| point.time_unix_nano)
    else {
        return Ok(None);
    };
    let seconds = match point.value {
        Some(number_data_point::Value::AsDouble(value)) => value,
        // Exact for every value in range; a larger one is refused below either way.
        Some(number_data_point::Value::AsInt(value)) => value as f64,
        None => {
            let detail = format!("{} has no value", names::EXPORT_INTERVAL_GAUGE);
            return Err((refuse(RejectReason::MissingAttribute, detail), metric));
        }
    };
    if !(0.0..=MAX_EXPORT_INTERVAL_SECONDS).contains(&seconds) {
        let detail = format!(
            "{} = {seconds} s: must be from 0 to {MAX_EXPORT_INTERVAL_SECONDS} seconds",
            names::EXPORT_INTERVAL_GAUGE
        );
        return Err((refuse(RejectReason::OutOfRange, detail), metric));
    }
    // In range (NaN is not), so the product fits a u64.
    Ok(Some((seconds * 1000.0).round() as u64))
}

fn metric_type(data: Option<&metric::Data>) -> &'static str {
    match data {
        None => "no data",
        Some(metric::Data::Gauge(_)) => "a gauge",
        Some(metric::Data::Sum(_)) => "a non-monotonic sum",
        Some(metric::Data::Histogram(_)) => "a histogram",
        Some(metric::Data::ExponentialHistogram(_)) => "an exponential histogram",
        Some(metric::Data::Summary(_)) => "a summary",
    }
}

fn rejection<T: Serialize>(
    refusal: Refusal,
    signal: Signal,
    service: &Service<'_>,
    input: &T,
    limits: &Limits,
    redacted: &mut u64,
) -> Rejection {
    // The copy is redacted as a structure, before it is cut, so that no credential survives in
    // it and no cut leaves half of one behind.
    let mut copy = match serde_json::to_value(input) {
        Ok(mut value) => {
            redact_json(&mut value, redacted);
            serde_json::to_vec(&value)
                .unwrap_or_else(|err| format!("unserialisable input: {err}").into_bytes())
        }
        Err(err) => format!("unserialisable input: {err}").into_bytes(),
    };
    let input_truncated = copy.len() > limits.max_rejected_copy_bytes;
    copy.truncate(limits.max_rejected_copy_bytes);
    let mut detail = refusal.detail;
    scrub(&mut detail, false, redacted);
    Rejection {
        reason: refusal.reason,
        detail: bounded(&detail, 1024).into_owned(),
        signal,
        service_name: service.name.clone().into_owned(),
        input: copy,
        input_truncated,
        count: 1,
    }
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

/// How many events or points each reason refused, by reason.
pub fn count_by_reason(rejections: &[Rejection]) -> Vec<(&'static str, u64)> {
    let mut by_reason: BTreeMap<&'static str, u64> = BTreeMap::new();
    for rejection in rejections {
        *by_reason.entry(rejection.reason.as_str()).or_default() += rejection.count;
    }
    by_reason.into_iter().collect()
}

/// One line for OTLP's `partial_success.error_message`: how many were refused, and why.
pub fn summarize(rejections: &[Rejection], what: &str) -> String {
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for rejection in rejections {
        *by_reason.entry(rejection.reason.as_str()).or_default() += rejection.count as usize;
    }
    let reasons: Vec<String> = by_reason
        .iter()
        .map(|(reason, n)| format!("{reason} ({n})"))
        .collect();
    let first = rejections
        .first()
        .map(|r| format!("; first: {}", r.detail))
        .unwrap_or_default();
    format!(
        "rejected {} {what}: {}{first}",
        rejected_count(rejections),
        reasons.join(", ")
    )
}

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "extract/derived_tests.rs"]
mod derived_tests;
