//! The load generator's requests, shared by `candor-loadgen` and the `ingest` bench.

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

/// A realistic request: one span per event batch, events spread over 50 targets.
pub fn request(connection: usize, batch: usize) -> ExportTraceServiceRequest {
    let events = (0..batch)
        .map(|i| span::Event {
            time_unix_nano: 1_800_000_000_000_000_000 + i as u64,
            name: names::OUTCOME_EVENT.to_owned(),
            attributes: vec![
                kv(
                    attr::OUTCOME_CLASS,
                    any_value::Value::StringValue("access_failure".into()),
                ),
                kv(
                    attr::TOOL_NAME,
                    any_value::Value::StringValue("search".into()),
                ),
                kv(
                    attr::TOOL_TARGET,
                    any_value::Value::StringValue(format!(
                        "https://search-{}.internal/v1/items",
                        i % 50
                    )),
                ),
                kv(
                    attr::FAILURE_KIND,
                    any_value::Value::StringValue("server_error".into()),
                ),
                kv(
                    attr::RETRY_ACTION,
                    any_value::Value::StringValue("retry".into()),
                ),
                kv(attr::RETRY_ATTEMPT, any_value::Value::IntValue(1)),
                kv(attr::RETRY_MAX_ATTEMPTS, any_value::Value::IntValue(3)),
                kv(attr::RETRY_BACKOFF_MS, any_value::Value::IntValue(120)),
                kv(attr::HTTP_STATUS_CODE, any_value::Value::IntValue(503)),
                kv(
                    attr::ERROR_TYPE,
                    any_value::Value::StringValue("503".into()),
                ),
            ],
            dropped_attributes_count: 0,
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv(
                        resource::SERVICE_NAME,
                        any_value::Value::StringValue("loadgen".into()),
                    ),
                    kv(
                        resource::SERVICE_INSTANCE_ID,
                        any_value::Value::StringValue(format!("c{connection}")),
                    ),
                ],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![connection as u8 + 1; 16],
                    span_id: vec![7; 8],
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
