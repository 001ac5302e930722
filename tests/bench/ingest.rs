//! The collector's own CPU per event, stage by stage, on the load generator's request shape (one
//! span of 500 `tool.outcome` events, ten attributes each): decoding the protobuf body,
//! extracting the records, encoding them for Kafka. Kafka's client and the network are not in
//! these figures; `tests/bench/collector.sh` measures the whole process.
//!
//! `cargo bench -p candor-e2e --bench ingest`

#![allow(clippy::unwrap_used)] // a panic in a benchmark set-up is its failure report

use std::hint::black_box;

use candor_collector::ingest::decode::{Encoding, decode_request};
use candor_collector::ingest::extract::{Limits, Received, extract_traces};
use candor_collector::sink::kafka::encode;
use candor_e2e::load::request;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

const EVENTS: usize = 500;

fn stages(c: &mut Criterion) {
    let body = request(0, EVENTS).encode_to_vec();
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
