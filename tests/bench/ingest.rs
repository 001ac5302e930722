//! The collector's own CPU per event, stage by stage, on the load generator's request shape (one
//! span of 500 `tool.outcome` events, ten attributes each): decoding the protobuf body,
//! extracting the records, encoding them for Kafka. Kafka's client and the network are not in
//! these figures; `tests/bench/collector.sh` measures the whole process.
//!
//! The group `derive` times a trace request of a realistic mix instead (1,000 spans: 80 %
//! ordinary server, database and internal spans, 20 % tool spans of the derived sources, nested
//! as real emitters nest them), extracted with every derived source on and with every source
//! off (the spans ignored), per span.
//!
//! `cargo bench -p candor-e2e --bench ingest`

#![allow(clippy::unwrap_used)] // a panic in a benchmark set-up is its failure report

use std::hint::black_box;

use candor_collector::ingest::decode::{Encoding, decode_request};
use candor_collector::ingest::extract::derived::{Derivation, DerivedConfig};
use candor_collector::ingest::extract::{Limits, Received, extract_traces};
use candor_collector::sink::kafka::encode;
use candor_e2e::load::request;
use candor_schema::names::{attr, resource, semconv};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use prost::Message as _;

const EVENTS: usize = 500;

fn stages(c: &mut Criterion) {
    let body = request(0, EVENTS).encode_to_vec();
    let limits = Limits::default();
    let received = Received {
        collector_id: "bench",
        time_unix_nano: 1_800_000_000_000_000_000,
        limits: &limits,
        derivation: &Derivation::default(),
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

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..Default::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..Default::default()
    }
}

/// Spans of the mix: out of every 10, 8 ordinary (a server span, database calls, internal work)
/// and 2 tool spans (a GenAI tool call and an HTTP request it made, or an MCP call); one tool
/// call in ten fails.
fn mix(spans: usize) -> ExportTraceServiceRequest {
    let end = 1_800_000_000_000_000_000u64;
    let mut out = Vec::with_capacity(spans);
    for n in 0..spans {
        let trace = (n / 10) as u64 + 1;
        let id = n as u64 + 1;
        // The HTTP request is the tool call's child; everything else the server span's.
        let parent = match n % 10 {
            0 => 0,
            9 => n as u64,
            _ => (n - n % 10) as u64 + 1,
        };
        let (name, kind, attributes): (String, span::SpanKind, Vec<KeyValue>) = match n % 10 {
            0 => (
                "GET /orders/{id}".into(),
                span::SpanKind::Server,
                vec![
                    text(semconv::HTTP_REQUEST_METHOD, "GET"),
                    text("http.route", "/orders/{id}"),
                    int(attr::HTTP_STATUS_CODE, 200),
                    text("url.path", "/orders/42"),
                    text("user_agent.original", "python-httpx/0.28"),
                    text(semconv::SERVER_ADDRESS, "orders.internal"),
                ],
            ),
            1..=5 => (
                "SELECT orders".into(),
                span::SpanKind::Client,
                vec![
                    text("db.system.name", "postgresql"),
                    text("db.operation.name", "SELECT"),
                    text("db.collection.name", "orders"),
                    text("db.query.text", "SELECT * FROM orders WHERE id = $1"),
                    text(semconv::SERVER_ADDRESS, "db.internal"),
                    int(semconv::SERVER_PORT, 5432),
                ],
            ),
            6 | 7 => (
                "render".into(),
                span::SpanKind::Internal,
                vec![text("code.function.name", "render_order"), int("items", 3)],
            ),
            8 if n % 20 == 8 => (
                format!("{} search", semconv::EXECUTE_TOOL),
                span::SpanKind::Internal,
                vec![
                    text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
                    text(semconv::GEN_AI_TOOL_NAME, "search"),
                    text(semconv::GEN_AI_TOOL_CALL_ID, &format!("call_{n}")),
                    text("gen_ai.tool.type", "function"),
                ],
            ),
            8 => (
                "tools/call fetch".into(),
                span::SpanKind::Client,
                vec![
                    text(semconv::MCP_METHOD_NAME, semconv::MCP_TOOLS_CALL),
                    text(semconv::GEN_AI_TOOL_NAME, "fetch"),
                    text("jsonrpc.request.id", &n.to_string()),
                    text(semconv::SERVER_ADDRESS, "mcp.internal"),
                    int(semconv::SERVER_PORT, 8443),
                ],
            ),
            _ => (
                "GET".into(),
                span::SpanKind::Client,
                vec![
                    text(semconv::HTTP_METHOD, "GET"),
                    text(
                        semconv::HTTP_URL,
                        &format!("https://api.example.com/v1/items/{n}?q=x"),
                    ),
                    int(
                        semconv::HTTP_STATUS_CODE_OLD,
                        if n % 100 == 9 { 503 } else { 200 },
                    ),
                ],
            ),
        };
        let failed = n % 100 == 9 || n % 100 == 28;
        out.push(Span {
            trace_id: trace.to_be_bytes().repeat(2),
            span_id: id.to_be_bytes().to_vec(),
            parent_span_id: if parent == 0 {
                Vec::new()
            } else {
                parent.to_be_bytes().to_vec()
            },
            name,
            kind: kind as i32,
            start_time_unix_nano: end - 5_000_000,
            end_time_unix_nano: end,
            attributes,
            status: failed.then(|| Status {
                code: status::StatusCode::Error as i32,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text(resource::SERVICE_NAME, "orders"),
                    text(resource::SERVICE_INSTANCE_ID, "orders-1"),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: out,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

const MIX_SPANS: usize = 1_000;

fn derive(c: &mut Criterion) {
    let body = mix(MIX_SPANS).encode_to_vec();
    let limits = Limits::default();
    let on = Derivation::default();
    let off = Derivation::new(DerivedConfig {
        genai: false,
        mcp: false,
        http: false,
        ..DerivedConfig::default()
    });
    let received = |derivation| Received {
        collector_id: "bench",
        time_unix_nano: 1_800_000_000_000_000_000,
        limits: &limits,
        derivation,
    };
    let request = decode_request(Encoding::Protobuf, &body).unwrap();
    let derived = extract_traces(&request, &received(&on));
    assert_eq!(
        derived.derived.spans,
        (MIX_SPANS / 5) as u64,
        "a fifth of the spans are tool spans"
    );
    assert!(!derived.counts.is_empty() && !derived.events.is_empty());
    assert_eq!(
        extract_traces(&request, &received(&off)).ignored,
        MIX_SPANS as u64
    );

    let mut group = c.benchmark_group("derive");
    group.throughput(Throughput::Elements(MIX_SPANS as u64));
    for (name, derivation) in [
        ("deriving the tool spans", &on),
        ("ignoring every span", &off),
    ] {
        group.bench_function(format!("extract: {name}"), |b| {
            b.iter(|| extract_traces(black_box(&request), &received(derivation)))
        });
        group.bench_function(format!("decode, extract, encode: {name}"), |b| {
            b.iter(|| {
                let request = decode_request(Encoding::Protobuf, black_box(&body)).unwrap();
                let extracted = extract_traces(&request, &received(derivation));
                let mut records: Vec<_> =
                    extracted.events.iter().map(encode::outcome_event).collect();
                records.extend(extracted.counts.iter().map(encode::outcome_count));
                records
            })
        });
    }
    group.finish();
}

criterion_group!(benches, stages, derive);
criterion_main!(benches);
