//! OTLP trace requests built in code: the attribute and request builders the e2e suites use, and
//! the load generator's request, shared by `candor-loadgen` and the `ingest` bench.

use candor_schema::names::{self, attr, resource};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// A string attribute.
pub fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

/// An int attribute.
pub fn kv_int(key: &str, value: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(value))
}

/// One resource (with `resource_attributes`) holding one `tool.call` span that carries `events`.
pub fn one_span_request(
    resource_attributes: Vec<KeyValue>,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    events: Vec<span::Event>,
) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource_attributes,
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id,
                    span_id,
                    name: names::TOOL_CALL_SPAN.to_owned(),
                    events,
                    ..Span::default()
                }],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// A realistic request: one span per event batch, events spread over 50 targets.
pub fn request(connection: usize, batch: usize) -> ExportTraceServiceRequest {
    let events = (0..batch)
        .map(|i| span::Event {
            time_unix_nano: 1_800_000_000_000_000_000 + i as u64,
            name: names::OUTCOME_EVENT.to_owned(),
            attributes: vec![
                kv_str(attr::OUTCOME_CLASS, "access_failure"),
                kv_str(attr::TOOL_NAME, "search"),
                kv_str(
                    attr::TOOL_TARGET,
                    &format!("https://search-{}.internal/v1/items", i % 50),
                ),
                kv_str(attr::FAILURE_KIND, "server_error"),
                kv_str(attr::RETRY_ACTION, "retry"),
                kv_int(attr::RETRY_ATTEMPT, 1),
                kv_int(attr::RETRY_MAX_ATTEMPTS, 3),
                kv_int(attr::RETRY_BACKOFF_MS, 120),
                kv_int(attr::HTTP_STATUS_CODE, 503),
                kv_str(attr::ERROR_TYPE, "503"),
            ],
            dropped_attributes_count: 0,
        })
        .collect();
    one_span_request(
        vec![
            kv_str(resource::SERVICE_NAME, "loadgen"),
            kv_str(resource::SERVICE_INSTANCE_ID, &format!("c{connection}")),
        ],
        vec![connection as u8 + 1; 16],
        vec![7; 8],
        events,
    )
}
