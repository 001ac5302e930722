//! Extraction: from OTLP requests to typed records, with every refusal named.
//!
//! Pure functions. Every `tool.outcome` span event becomes an [`OutcomeEventRef`] (an
//! `OutcomeEvent` record whose texts are still borrowed from the request) or a [`Rejection`];
//! every data point of `tool.outcomes` becomes an [`OutcomeCount`] or a [`Rejection`]. Nothing
//! is dropped without one or the other, and what is neither (other spans, other metrics) is
//! counted as ignored.
//!
//! Events are the hot path (one request may carry thousands), so an event is checked and
//! identified without copying its texts or encoding it again: its strings stay borrowed until
//! [`OutcomeEventRef::encode`] writes the record's bytes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use candor_records::proto::{OutcomeCount, RECORD_SCHEMA_VERSION, Temporality};
use candor_schema::names::{self, attr, resource};
use candor_schema::redact;
use candor_schema::{AccessFailureKind, OutcomeClass, PartialKind, RetryAction};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, NumberDataPoint, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span;
use prost::Message as _;
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use super::event::OutcomeEventRef;
use super::event::hex;

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
            max_value_bytes: 4096,
            max_attributes_per_event: 128,
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
}

/// Which OTLP signal a rejection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Spans and their events.
    Traces,
    /// Metric data points.
    Metrics,
}

impl Signal {
    /// `traces` or `metrics`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
        }
    }
}

macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal),+ $(,)?) => {
        /// Why an event or a data point was refused: a closed set.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum RejectReason {
            $($(#[$doc])* $variant),+
        }

        impl RejectReason {
            /// Every reason.
            pub const ALL: &'static [RejectReason] = &[$(RejectReason::$variant),+];

            /// The reason as it appears in metrics, responses and the rejected topic.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(RejectReason::$variant => $wire),+
                }
            }
        }
    };
}

reasons! {
    /// A required attribute is absent.
    MissingAttribute => "missing_attribute",
    /// An attribute has the wrong type (e.g. a string where an int belongs).
    WrongType => "wrong_type",
    /// A known attribute appears twice.
    DuplicateAttribute => "duplicate_attribute",
    /// `tool.outcome.class` is not a member of the contract's closed set.
    UnknownClass => "unknown_class",
    /// A `tool.outcome` event whose class is `success` or `empty`.
    ClassNotAllowed => "class_not_allowed",
    /// `tool.failure.kind` is not a member of the closed set.
    UnknownKind => "unknown_kind",
    /// `tool.retry.action` is not a member of the closed set.
    UnknownAction => "unknown_action",
    /// The kind or the action does not belong with the class (e.g. a Partial that was retried).
    Inconsistent => "inconsistent",
    /// An integer attribute is out of its range (a negative count, attempt 0).
    OutOfRange => "out_of_range",
    /// An attribute value is longer than `max_value_bytes`.
    ValueTooLong => "value_too_long",
    /// More attributes than `max_attributes_per_event`.
    TooManyAttributes => "too_many_attributes",
    /// More `tool.outcome` events in one request than `max_events_per_request`.
    TooManyEvents => "too_many_events",
    /// The span's trace id is not 16 bytes, or is all zero.
    InvalidTraceId => "invalid_trace_id",
    /// The span's span id is not 8 bytes, or is all zero.
    InvalidSpanId => "invalid_span_id",
    /// The event or data point has no time.
    MissingTime => "missing_time",
    /// `tool.outcomes` is not a monotonic sum.
    WrongMetricType => "wrong_metric_type",
    /// A `tool.outcomes` sum without delta or cumulative temporality.
    UnspecifiedTemporality => "unspecified_temporality",
    /// The whole request could not be decoded.
    MalformedRequest => "malformed_request",
}

/// One refused event or data point, with what is needed to find and understand it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Why.
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

/// How many events or points `rejections` stand for.
pub fn rejected_count(rejections: &[Rejection]) -> u64 {
    rejections.iter().map(|r| r.count).sum()
}

/// What a trace export request held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TracesExtract<'a> {
    /// One record per valid `tool.outcome` event.
    pub events: Vec<OutcomeEventRef<'a>>,
    /// One per refused `tool.outcome` event.
    pub rejections: Vec<Rejection>,
    /// Spans that carried no `tool.outcome` event.
    pub ignored_spans: u64,
    /// `tool.outcome` events seen, valid or not.
    pub outcome_events_seen: u64,
    /// Values a credential was removed from (in records and in rejections' copies).
    pub redacted: u64,
}

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

/// A refusal before it is tied to its input.
struct Refusal {
    reason: RejectReason,
    detail: String,
}

fn refuse(reason: RejectReason, detail: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        detail: detail.into(),
    }
}

/// The service identity from a resource's attributes, bounded, borrowed from the request when
/// it fits.
#[derive(Clone)]
struct Service<'a> {
    name: Cow<'a, str>,
    instance: Cow<'a, str>,
}

fn service_of(resource: Option<&Resource>) -> Service<'_> {
    let mut service = Service {
        name: Cow::Borrowed(UNKNOWN_SERVICE),
        instance: Cow::Borrowed(""),
    };
    for kv in resource
        .map(|r| r.attributes.as_slice())
        .unwrap_or_default()
    {
        let Some(any_value::Value::StringValue(value)) =
            kv.value.as_ref().and_then(|v| v.value.as_ref())
        else {
            continue;
        };
        match kv.key.as_str() {
            resource::SERVICE_NAME => service.name = bounded(value, 256),
            resource::SERVICE_INSTANCE_ID => service.instance = bounded(value, 256),
            _ => {}
        }
    }
    service
}

/// Extracts the `tool.outcome` events of a trace export request.
pub fn extract_traces<'a>(
    request: &'a ExportTraceServiceRequest,
    received: &Received<'a>,
) -> TracesExtract<'a> {
    let limits = received.limits;
    let mut out = TracesExtract::default();
    let mut overflow: Option<(Service<'_>, &span::Event)> = None;
    // Reused by every event's id.
    let mut scratch = Vec::new();
    let mut overflowed = 0u64;
    for resource_spans in &request.resource_spans {
        let service = service_of(resource_spans.resource.as_ref());
        for scope_spans in &resource_spans.scope_spans {
            for span in &scope_spans.spans {
                let mut carried = false;
                for event in span
                    .events
                    .iter()
                    .filter(|e| e.name == names::OUTCOME_EVENT)
                {
                    carried = true;
                    out.outcome_events_seen += 1;
                    if out.outcome_events_seen > limits.max_events_per_request as u64 {
                        // One rejection for all of them, keeping a copy of the first.
                        if overflow.is_none() {
                            overflow = Some((service.clone(), event));
                        }
                        overflowed += 1;
                        continue;
                    }
                    match outcome_event(
                        &span.trace_id,
                        &span.span_id,
                        event,
                        &service,
                        received,
                        &mut scratch,
                    ) {
                        Ok(mut record) => {
                            out.redacted += redact_event(&mut record);
                            out.events.push(record);
                        }
                        Err(refusal) => out.rejections.push(rejection(
                            refusal,
                            Signal::Traces,
                            &service,
                            event,
                            limits,
                            &mut out.redacted,
                        )),
                    }
                }
                if !carried {
                    out.ignored_spans += 1;
                }
            }
        }
    }
    if let Some((service, event)) = overflow {
        let detail = format!(
            "{overflowed} tool.outcome event(s) past the limit of {} per request",
            limits.max_events_per_request
        );
        let refusal = refuse(RejectReason::TooManyEvents, detail);
        let mut summary = rejection(
            refusal,
            Signal::Traces,
            &service,
            event,
            limits,
            &mut out.redacted,
        );
        summary.count = overflowed;
        out.rejections.push(summary);
    }
    out
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
        for scope_metrics in &resource_metrics.scope_metrics {
            for metric in &scope_metrics.metrics {
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

/// The contract's attribute keys of events and data points, each with a slot in [`Attributes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    OutcomeClass,
    ToolName,
    ToolTarget,
    FailureKind,
    RetryAction,
    RetryAttempt,
    RetryMaxAttempts,
    RetryBackoffMs,
    HttpStatusCode,
    ErrorType,
    PartialReturned,
    PartialExpected,
    Coverage,
    Dropped,
    Authority,
}

impl Key {
    /// Every key, in slot order.
    const ALL: [Key; 15] = [
        Key::OutcomeClass,
        Key::ToolName,
        Key::ToolTarget,
        Key::FailureKind,
        Key::RetryAction,
        Key::RetryAttempt,
        Key::RetryMaxAttempts,
        Key::RetryBackoffMs,
        Key::HttpStatusCode,
        Key::ErrorType,
        Key::PartialReturned,
        Key::PartialExpected,
        Key::Coverage,
        Key::Dropped,
        Key::Authority,
    ];

    /// The attribute's name on the wire.
    const fn name(self) -> &'static str {
        match self {
            Key::OutcomeClass => attr::OUTCOME_CLASS,
            Key::ToolName => attr::TOOL_NAME,
            Key::ToolTarget => attr::TOOL_TARGET,
            Key::FailureKind => attr::FAILURE_KIND,
            Key::RetryAction => attr::RETRY_ACTION,
            Key::RetryAttempt => attr::RETRY_ATTEMPT,
            Key::RetryMaxAttempts => attr::RETRY_MAX_ATTEMPTS,
            Key::RetryBackoffMs => attr::RETRY_BACKOFF_MS,
            Key::HttpStatusCode => attr::HTTP_STATUS_CODE,
            Key::ErrorType => attr::ERROR_TYPE,
            Key::PartialReturned => attr::PARTIAL_RETURNED,
            Key::PartialExpected => attr::PARTIAL_EXPECTED,
            Key::Coverage => attr::COVERAGE,
            Key::Dropped => attr::DROPPED,
            Key::Authority => attr::AUTHORITY,
        }
    }

    /// The key named `name`, when it is one of the contract's. The last bytes are compared
    /// before the whole names: keys of one length differ there (but for `returned` and
    /// `expected`), so most candidates are passed over without a string comparison.
    fn named(name: &str) -> Option<Key> {
        let last = name.as_bytes().last();
        Key::ALL.into_iter().find(|key| {
            let candidate = key.name();
            candidate.len() == name.len()
                && candidate.as_bytes().last() == last
                && candidate == name
        })
    }
}

/// The contract's attributes of one event or data point, checked against the limits, one slot
/// per [`Key`]. Other attributes are checked for size and otherwise ignored.
struct Attributes<'a> {
    values: [Option<&'a any_value::Value>; Key::ALL.len()],
}

impl<'a> Attributes<'a> {
    fn read(kvs: &'a [KeyValue], limits: &Limits) -> Result<Self, Refusal> {
        if kvs.len() > limits.max_attributes_per_event {
            return Err(refuse(
                RejectReason::TooManyAttributes,
                format!(
                    "{} attributes; the limit is {}",
                    kvs.len(),
                    limits.max_attributes_per_event
                ),
            ));
        }
        let mut values = [None; Key::ALL.len()];
        for kv in kvs {
            let Some(value) = kv.value.as_ref().and_then(|v| v.value.as_ref()) else {
                continue;
            };
            let length = match value {
                any_value::Value::StringValue(s) => s.len(),
                any_value::Value::BytesValue(b) => b.len(),
                _ => 0,
            };
            if length > limits.max_value_bytes || kv.key.len() > limits.max_value_bytes {
                return Err(refuse(
                    RejectReason::ValueTooLong,
                    format!(
                        "{} is {length} bytes; the limit is {}",
                        bounded(&kv.key, 128),
                        limits.max_value_bytes
                    ),
                ));
            }
            let Some(key) = Key::named(&kv.key) else {
                continue;
            };
            let slot = &mut values[key as usize];
            if slot.is_some() {
                return Err(refuse(
                    RejectReason::DuplicateAttribute,
                    format!("{} appears twice", key.name()),
                ));
            }
            *slot = Some(value);
        }
        Ok(Self { values })
    }

    fn get(&self, key: Key) -> Option<&'a any_value::Value> {
        self.values[key as usize]
    }

    fn string(&self, key: Key) -> Result<Option<&'a str>, Refusal> {
        match self.get(key) {
            None => Ok(None),
            Some(any_value::Value::StringValue(value)) => Ok(Some(value)),
            Some(other) => Err(refuse(
                RejectReason::WrongType,
                format!("{} must be a string, got {}", key.name(), value_type(other)),
            )),
        }
    }

    fn required_string(&self, key: Key) -> Result<&'a str, Refusal> {
        self.string(key)?.ok_or_else(|| missing(key))
    }

    fn int(&self, key: Key) -> Result<Option<i64>, Refusal> {
        match self.get(key) {
            None => Ok(None),
            Some(any_value::Value::IntValue(value)) => Ok(Some(*value)),
            Some(other) => Err(refuse(
                RejectReason::WrongType,
                format!("{} must be an int, got {}", key.name(), value_type(other)),
            )),
        }
    }

    fn unsigned<T: TryFrom<i64>>(&self, key: Key) -> Result<Option<T>, Refusal> {
        match self.int(key)? {
            None => Ok(None),
            Some(value) => T::try_from(value).map(Some).map_err(|_| {
                refuse(
                    RejectReason::OutOfRange,
                    format!("{} = {value} is out of range", key.name()),
                )
            }),
        }
    }

    fn required_unsigned<T: TryFrom<i64>>(&self, key: Key) -> Result<T, Refusal> {
        self.unsigned(key)?.ok_or_else(|| missing(key))
    }
}

fn missing(key: Key) -> Refusal {
    refuse(
        RejectReason::MissingAttribute,
        format!("{} is missing", key.name()),
    )
}

fn value_type(value: &any_value::Value) -> &'static str {
    match value {
        any_value::Value::StringValue(_) => "a string",
        any_value::Value::BoolValue(_) => "a bool",
        any_value::Value::IntValue(_) => "an int",
        any_value::Value::DoubleValue(_) => "a double",
        any_value::Value::ArrayValue(_) => "an array",
        any_value::Value::KvlistValue(_) => "a key-value list",
        any_value::Value::BytesValue(_) => "bytes",
        #[allow(unreachable_patterns)]
        _ => "another type",
    }
}

fn outcome_event<'a>(
    trace_id: &'a [u8],
    span_id: &'a [u8],
    event: &'a span::Event,
    service: &Service<'a>,
    received: &Received<'a>,
    scratch: &mut Vec<u8>,
) -> Result<OutcomeEventRef<'a>, Refusal> {
    let trace: [u8; 16] = match trace_id.try_into() {
        Ok(id) if id != [0; 16] => id,
        _ => {
            return Err(refuse(
                RejectReason::InvalidTraceId,
                format!("trace id of {} bytes", trace_id.len()),
            ));
        }
    };
    let span: [u8; 8] = match span_id.try_into() {
        Ok(id) if id != [0; 8] => id,
        _ => {
            return Err(refuse(
                RejectReason::InvalidSpanId,
                format!("span id of {} bytes", span_id.len()),
            ));
        }
    };
    if event.time_unix_nano == 0 {
        return Err(refuse(RejectReason::MissingTime, "the event has no time"));
    }
    let attributes = Attributes::read(&event.attributes, received.limits)?;
    let class_text = attributes.required_string(Key::OutcomeClass)?;
    let class: OutcomeClass = class_text.parse().map_err(|err| {
        refuse(
            RejectReason::UnknownClass,
            format!("{}: {err}", attr::OUTCOME_CLASS),
        )
    })?;
    let kind_text = attributes.required_string(Key::FailureKind)?;
    let kind: candor_schema::FailureKind = kind_text.parse().map_err(|err| {
        refuse(
            RejectReason::UnknownKind,
            format!("{}: {err}", attr::FAILURE_KIND),
        )
    })?;
    let action: RetryAction = attributes
        .required_string(Key::RetryAction)?
        .parse()
        .map_err(|err| {
            refuse(
                RejectReason::UnknownAction,
                format!("{}: {err}", attr::RETRY_ACTION),
            )
        })?;
    let consistent = match class {
        OutcomeClass::AccessFailure => {
            kind_text.parse::<AccessFailureKind>().is_ok() && action != RetryAction::AcceptPartial
        }
        OutcomeClass::Partial => {
            kind_text.parse::<PartialKind>().is_ok() && action == RetryAction::AcceptPartial
        }
        OutcomeClass::Success | OutcomeClass::Empty => {
            return Err(refuse(
                RejectReason::ClassNotAllowed,
                format!(
                    "{} event with class {class}: only access_failure and partial are events",
                    names::OUTCOME_EVENT
                ),
            ));
        }
    };
    if !consistent {
        return Err(refuse(
            RejectReason::Inconsistent,
            format!("class {class} with kind {kind} and action {action}"),
        ));
    }
    let attempt: u32 = attributes.required_unsigned(Key::RetryAttempt)?;
    let max_attempts: u32 = attributes.required_unsigned(Key::RetryMaxAttempts)?;
    if attempt == 0 || attempt > max_attempts {
        return Err(refuse(
            RejectReason::OutOfRange,
            format!(
                "{} = {attempt} with {} = {max_attempts}",
                attr::RETRY_ATTEMPT,
                attr::RETRY_MAX_ATTEMPTS
            ),
        ));
    }
    let backoff: Option<u64> = attributes.unsigned(Key::RetryBackoffMs)?;
    if action == RetryAction::Retry && backoff.is_none() {
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!("{} is missing for action retry", attr::RETRY_BACKOFF_MS),
        ));
    }
    let tool_name = attributes.required_string(Key::ToolName)?;
    let tool_target = attributes.required_string(Key::ToolTarget)?;
    let text = |key| attributes.string(key).map(|value| value.map(Cow::Borrowed));
    Ok(OutcomeEventRef {
        event_id: event_id(service, trace_id, span_id, event, scratch),
        trace_id: trace,
        span_id: span,
        event_time_unix_nano: event.time_unix_nano,
        service_name: service.name.clone(),
        service_instance_id: service.instance.clone(),
        outcome_class: class,
        tool_name,
        tool_target: Cow::Borrowed(tool_target),
        failure_kind: kind,
        retry_action: action,
        retry_attempt: attempt,
        retry_max_attempts: max_attempts,
        retry_backoff_ms: backoff,
        // A status fits 16 bits; wider values would pass here and be refused by the compactor
        // (the table's column is a 32-bit signed int).
        http_status_code: attributes
            .unsigned::<u16>(Key::HttpStatusCode)?
            .map(u32::from),
        error_type: text(Key::ErrorType)?,
        partial_returned: attributes.unsigned(Key::PartialReturned)?,
        partial_expected: attributes.unsigned(Key::PartialExpected)?,
        coverage: text(Key::Coverage)?,
        dropped: text(Key::Dropped)?,
        authority: text(Key::Authority)?,
        received_time_unix_nano: received.time_unix_nano,
        collector_id: received.collector_id,
    })
}

/// An event's id: the SHA-256 of its service, span and content, cut to 128 bits. The content is
/// written out field by field into `scratch` (a buffer reused from event to event), each
/// variable part after its length, so that two different events never hash alike while the
/// same event always does, whether it came as protobuf or JSON and however often a client
/// retried it.
fn event_id(
    service: &Service<'_>,
    trace_id: &[u8],
    span_id: &[u8],
    event: &span::Event,
    scratch: &mut Vec<u8>,
) -> [u8; 16] {
    scratch.clear();
    let mut feed = Feed(scratch);
    feed.bytes(service.name.as_bytes());
    feed.bytes(service.instance.as_bytes());
    feed.bytes(trace_id);
    feed.bytes(span_id);
    feed.bytes(event.name.as_bytes());
    feed.varint(event.time_unix_nano);
    feed.varint(u64::from(event.dropped_attributes_count));
    feed.varint(event.attributes.len() as u64);
    for kv in &event.attributes {
        feed.bytes(kv.key.as_bytes());
        feed.value(kv.value.as_ref().and_then(|v| v.value.as_ref()));
    }
    let digest = Sha256::digest(scratch.as_slice());
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// What an id is computed from, written as prefix-free parts: varints, and byte strings after
/// their length.
struct Feed<'s>(&'s mut Vec<u8>);

impl Feed<'_> {
    fn varint(&mut self, value: u64) {
        prost::encoding::encode_varint(value, self.0);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A value after a tag of its type. Arrays and key-value lists, which the contract's
    /// attributes never are, are written as their protobuf encoding.
    fn value(&mut self, value: Option<&any_value::Value>) {
        match value {
            None => self.varint(0),
            Some(any_value::Value::StringValue(text)) => {
                self.varint(1);
                self.bytes(text.as_bytes());
            }
            Some(any_value::Value::BoolValue(flag)) => {
                self.varint(2);
                self.varint(u64::from(*flag));
            }
            Some(any_value::Value::IntValue(number)) => {
                self.varint(3);
                self.varint(*number as u64);
            }
            Some(any_value::Value::DoubleValue(number)) => {
                self.varint(4);
                self.varint(number.to_bits());
            }
            Some(any_value::Value::BytesValue(bytes)) => {
                self.varint(5);
                self.bytes(bytes);
            }
            Some(other) => {
                self.varint(6);
                self.varint(other.encoded_len() as u64);
                other.encode(self.0);
            }
        }
    }
}

fn outcome_count(
    point: &NumberDataPoint,
    temporality: Temporality,
    service: &Service<'_>,
    received: &Received<'_>,
) -> Result<OutcomeCount, Refusal> {
    if point.time_unix_nano == 0 {
        return Err(refuse(
            RejectReason::MissingTime,
            "the data point has no time",
        ));
    }
    let attributes = Attributes::read(&point.attributes, received.limits)?;
    let class: OutcomeClass = attributes
        .required_string(Key::OutcomeClass)?
        .parse()
        .map_err(|err| {
            refuse(
                RejectReason::UnknownClass,
                format!("{}: {err}", attr::OUTCOME_CLASS),
            )
        })?;
    let value = match point.value {
        Some(number_data_point::Value::AsInt(value)) => u64::try_from(value).map_err(|_| {
            refuse(
                RejectReason::OutOfRange,
                format!("the count is negative: {value}"),
            )
        })?,
        Some(number_data_point::Value::AsDouble(value)) => {
            return Err(refuse(
                RejectReason::WrongType,
                format!("the count must be an int, got the double {value}"),
            ));
        }
        None => {
            return Err(refuse(
                RejectReason::MissingAttribute,
                "the data point has no value",
            ));
        }
    };
    let point_id = content_id(&[
        service.name.as_bytes(),
        service.instance.as_bytes(),
        names::OUTCOMES_COUNTER.as_bytes(),
        &point.encode_to_vec(),
    ]);
    Ok(OutcomeCount {
        schema_version: RECORD_SCHEMA_VERSION,
        point_id,
        service_name: service.name.clone().into_owned(),
        service_instance_id: service.instance.clone().into_owned(),
        tool_name: attributes.required_string(Key::ToolName)?.to_owned(),
        tool_target: attributes.required_string(Key::ToolTarget)?.to_owned(),
        outcome_class: class.as_str().to_owned(),
        start_time_unix_nano: point.start_time_unix_nano,
        time_unix_nano: point.time_unix_nano,
        value,
        temporality: temporality.into(),
        received_time_unix_nano: received.time_unix_nano,
        collector_id: received.collector_id.to_owned(),
    })
}

/// Replaces `value` with its redacted form (credentials removed from a URL or free text), and
/// counts it in `redacted` when anything was removed.
fn scrub(value: &mut String, url: bool, redacted: &mut u64) {
    if let Some(clean) = redacted_form(value, url) {
        *value = clean;
        *redacted += 1;
    }
}

/// [`scrub`] for a text borrowed from the request: it is copied only when a credential is
/// removed.
fn scrub_borrowed(value: &mut Cow<'_, str>, url: bool, redacted: &mut u64) {
    if let Some(clean) = redacted_form(value, url) {
        *value = Cow::Owned(clean);
        *redacted += 1;
    }
}

/// `value` with its credentials removed, or `None` when it has none.
fn redacted_form(value: &str, url: bool) -> Option<String> {
    let clean = if url {
        redact::redact_url(value)
    } else {
        redact::redact_text(value)
    };
    match clean {
        Cow::Owned(clean) => Some(clean),
        Cow::Borrowed(_) => None,
    }
}

/// Removes credentials from the free-form values of an event before it is recorded: the target
/// (a URL more often than not) and the texts. Returns how many values changed.
pub fn redact_event(event: &mut OutcomeEventRef<'_>) -> u64 {
    let mut redacted = 0;
    scrub_borrowed(&mut event.tool_target, true, &mut redacted);
    for text in [
        &mut event.error_type,
        &mut event.coverage,
        &mut event.dropped,
        &mut event.authority,
    ]
    .into_iter()
    .flatten()
    {
        scrub_borrowed(text, false, &mut redacted);
    }
    redacted
}

/// Removes credentials from a count's target, as [`redact_event`] does for an event's, so that a
/// counter and its events keep one target. Returns how many values changed.
pub fn redact_count(count: &mut OutcomeCount) -> u64 {
    let mut redacted = 0;
    scrub(&mut count.tool_target, true, &mut redacted);
    redacted
}

/// Removes credentials from every string of a JSON value; counts each string changed.
fn redact_json(value: &mut serde_json::Value, redacted: &mut u64) {
    match value {
        serde_json::Value::String(text) => scrub(text, false, redacted),
        serde_json::Value::Array(items) => {
            for item in items {
                redact_json(item, redacted);
            }
        }
        serde_json::Value::Object(fields) => {
            for field in fields.values_mut() {
                redact_json(field, redacted);
            }
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
}

/// Removes credentials from the raw bytes of a request that could not be decoded: each run of
/// valid UTF-8 is redacted as free text; other bytes are kept as they are. Returns the bytes
/// and how many runs changed.
pub fn redact_bytes(body: &[u8]) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(body.len());
    let mut redacted = 0;
    for chunk in body.utf8_chunks() {
        let mut text = chunk.valid().to_owned();
        scrub(&mut text, false, &mut redacted);
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(chunk.invalid());
    }
    (out, redacted)
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
