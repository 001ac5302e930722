//! The collector's own CPU per event, stage by stage, on the load generator's request shape (one
//! span of 500 `tool.outcome` events, ten attributes each): decoding the protobuf body,
//! extracting the records, encoding them for Kafka. Kafka's client and the network are not in
//! these figures; `tests/bench/collector.sh` measures the whole process.
//!
//! `cargo bench -p candor-collector --bench ingest`

#![allow(clippy::unwrap_used)] // a panic in a benchmark set-up is its failure report

use std::hint::black_box;

use candor_collector::ingest::decode::{Encoding, decode_request};
use candor_collector::ingest::extract::{Limits, Received, extract_traces};
use candor_collector::sink::kafka::encode;
use candor_schema::names::{self, attr, resource};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};
use prost::Message as _;

const EVENTS: usize = 500;

fn text(key: &str, value: &str) -> KeyValue {
    int_or_text(key, any_value::Value::StringValue(value.to_owned()))
}

fn int(key: &str, value: i64) -> KeyValue {
    int_or_text(key, any_value::Value::IntValue(value))
}

fn int_or_text(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// The load generator's request: one span carrying `EVENTS` failures over 50 targets.
fn body() -> Vec<u8> {
    let events = (0..EVENTS)
        .map(|i| span::Event {
            time_unix_nano: 1_800_000_000_000_000_000 + i as u64,
            name: names::OUTCOME_EVENT.to_owned(),
            attributes: vec![
                text(attr::OUTCOME_CLASS, "access_failure"),
                text(attr::TOOL_NAME, "search"),
                text(
                    attr::TOOL_TARGET,
                    &format!("https://search-{}.internal/v1/items", i % 50),
                ),
                text(attr::FAILURE_KIND, "server_error"),
                text(attr::RETRY_ACTION, "retry"),
                int(attr::RETRY_ATTEMPT, 1),
                int(attr::RETRY_MAX_ATTEMPTS, 3),
                int(attr::RETRY_BACKOFF_MS, 120),
                int(attr::HTTP_STATUS_CODE, 503),
                text(attr::ERROR_TYPE, "503"),
            ],
            dropped_attributes_count: 0,
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text(resource::SERVICE_NAME, "loadgen"),
                    text(resource::SERVICE_INSTANCE_ID, "c0"),
                ],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![1; 16],
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
    .encode_to_vec()
}

fn stages(c: &mut Criterion) {
    let body = body();
    let limits = Limits::default();
    let received = Received {
        collector_id: "bench",
        time_unix_nano: 1_800_000_000_000_000_000,
        limits: &limits,
    };
    let decode = || -> ExportTraceServiceRequest {
        decode_request(Encoding::Protobuf, black_box(&body)).unwrap()
    };
    let request = decode();
    let extracted = extract_traces(&request, &received);
    assert_eq!(extracted.events.len(), EVENTS, "every event is valid");

    let mut group = c.benchmark_group("ingest");
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("decode and drop the request", |b| {
        b.iter(|| drop(black_box(decode())))
    });
    group.bench_function("extract the records", |b| {
        b.iter(|| extract_traces(black_box(&request), &received))
    });
    group.bench_function("encode the records for Kafka", |b| {
        b.iter(|| {
            black_box(&extracted)
                .events
                .iter()
                .map(encode::outcome_event)
                .collect::<Vec<_>>()
        })
    });
    group.bench_function("all three", |b| {
        b.iter(|| {
            let request = decode();
            let extracted = extract_traces(&request, &received);
            extracted
                .events
                .iter()
                .map(encode::outcome_event)
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
