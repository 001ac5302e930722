//! Builders of OTLP attributes, events, spans, points and export requests, shared by the seeds.

use candor_schema::names::{self, attr, resource};
use candor_schema::{AccessFailureKind, OutcomeClass, PartialKind, RetryAction};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, metric,
    number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};

use crate::{EVENT_TIME, TRACE_ID};

const POINT_START: u64 = 1_799_999_000_000_000_000;
const TARGET: &str = "http://search.test/v1/items";

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

pub(crate) fn text(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

pub(crate) fn int(key: &str, value: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(value))
}

/// `attributes` with `key` set to `value`: the first occurrence replaced, or one appended.
pub(crate) fn with(
    mut attributes: Vec<KeyValue>,
    key: &str,
    value: any_value::Value,
) -> Vec<KeyValue> {
    match attributes.iter_mut().find(|kv| kv.key == key) {
        Some(existing) => existing.value = Some(AnyValue { value: Some(value) }),
        None => attributes.push(kv(key, value)),
    }
    attributes
}

pub(crate) fn with_text(attributes: Vec<KeyValue>, key: &str, value: &str) -> Vec<KeyValue> {
    with(
        attributes,
        key,
        any_value::Value::StringValue(value.to_owned()),
    )
}

pub(crate) fn without(mut attributes: Vec<KeyValue>, key: &str) -> Vec<KeyValue> {
    attributes.retain(|kv| kv.key != key);
    attributes
}

pub(crate) fn access_failure(
    kind: AccessFailureKind,
    action: RetryAction,
    attempt: i64,
) -> Vec<KeyValue> {
    let mut attributes = vec![
        text(attr::OUTCOME_CLASS, OutcomeClass::AccessFailure.as_str()),
        text(attr::TOOL_NAME, "search"),
        text(attr::TOOL_TARGET, TARGET),
        text(attr::FAILURE_KIND, kind.as_str()),
        text(attr::RETRY_ACTION, action.as_str()),
        int(attr::RETRY_ATTEMPT, attempt),
        int(attr::RETRY_MAX_ATTEMPTS, 3),
        text(attr::AUTHORITY, "search.test"),
    ];
    if action == RetryAction::Retry {
        attributes.push(int(attr::RETRY_BACKOFF_MS, 100 * attempt));
    }
    let status = match kind {
        AccessFailureKind::ServerError => Some(503),
        AccessFailureKind::RateLimited => Some(429),
        AccessFailureKind::Auth => Some(401),
        AccessFailureKind::ClientError => Some(400),
        _ => None,
    };
    if let Some(status) = status {
        attributes.push(int(attr::HTTP_STATUS_CODE, status));
        attributes.push(text(attr::ERROR_TYPE, &status.to_string()));
    }
    attributes
}

pub(crate) fn partial(kind: PartialKind) -> Vec<KeyValue> {
    vec![
        text(attr::OUTCOME_CLASS, OutcomeClass::Partial.as_str()),
        text(attr::TOOL_NAME, "search"),
        text(attr::TOOL_TARGET, TARGET),
        text(attr::FAILURE_KIND, kind.as_str()),
        text(attr::RETRY_ACTION, RetryAction::AcceptPartial.as_str()),
        int(attr::RETRY_ATTEMPT, 1),
        int(attr::RETRY_MAX_ATTEMPTS, 3),
        int(attr::PARTIAL_RETURNED, 3),
        int(attr::PARTIAL_EXPECTED, 10),
        text(attr::COVERAGE, "items 1-3 of 10"),
        text(attr::DROPPED, "7 item(s)"),
    ]
}

pub(crate) fn event(attributes: Vec<KeyValue>) -> span::Event {
    span::Event {
        time_unix_nano: EVENT_TIME,
        name: names::OUTCOME_EVENT.to_owned(),
        attributes,
        dropped_attributes_count: 0,
    }
}

pub(crate) fn span_of(trace_id: &[u8], span_id: &[u8], events: Vec<span::Event>) -> Span {
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        name: names::TOOL_CALL_SPAN.to_owned(),
        start_time_unix_nano: EVENT_TIME - 2_000_000,
        end_time_unix_nano: EVENT_TIME + 1_000_000,
        events,
        ..Default::default()
    }
}

pub(crate) fn tool_span(span_id: u8, events: Vec<span::Event>) -> Span {
    span_of(&TRACE_ID, &[span_id; 8], events)
}

pub(crate) fn service(name: &str) -> Resource {
    Resource {
        attributes: vec![
            text(resource::SERVICE_NAME, name),
            text(resource::SERVICE_INSTANCE_ID, "instance-1"),
        ],
        ..Default::default()
    }
}

pub(crate) fn traces_of(
    resource_spans: Vec<(Option<Resource>, Vec<Span>)>,
) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: resource_spans
            .into_iter()
            .map(|(resource, spans)| ResourceSpans {
                resource,
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

pub(crate) fn traces(spans: Vec<Span>) -> ExportTraceServiceRequest {
    traces_of(vec![(Some(service("checkout")), spans)])
}

pub(crate) fn count_point(class: &str, value: Option<number_data_point::Value>) -> NumberDataPoint {
    NumberDataPoint {
        attributes: vec![
            text(attr::OUTCOME_CLASS, class),
            text(attr::TOOL_NAME, "search"),
            text(attr::TOOL_TARGET, TARGET),
        ],
        start_time_unix_nano: POINT_START,
        time_unix_nano: EVENT_TIME,
        value,
        ..Default::default()
    }
}

pub(crate) fn count(class: OutcomeClass, n: i64) -> NumberDataPoint {
    count_point(class.as_str(), Some(number_data_point::Value::AsInt(n)))
}

pub(crate) fn four_classes(base: i64) -> Vec<NumberDataPoint> {
    OutcomeClass::ALL
        .iter()
        .zip(0..)
        .map(|(class, i)| count(*class, base + i))
        .collect()
}

pub(crate) fn sum(
    name: &str,
    temporality: i32,
    monotonic: bool,
    points: Vec<NumberDataPoint>,
) -> Metric {
    Metric {
        name: name.to_owned(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: temporality,
            is_monotonic: monotonic,
        })),
        ..Default::default()
    }
}

pub(crate) fn outcomes(
    temporality: AggregationTemporality,
    points: Vec<NumberDataPoint>,
) -> Metric {
    sum(names::OUTCOMES_COUNTER, temporality as i32, true, points)
}

pub(crate) fn metrics_of(
    resources: Vec<(Option<Resource>, Vec<Metric>)>,
) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: resources
            .into_iter()
            .map(|(resource, metrics)| ResourceMetrics {
                resource,
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

pub(crate) fn metrics(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    metrics_of(vec![(Some(service("checkout")), metrics)])
}
