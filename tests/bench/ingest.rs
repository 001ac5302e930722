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
use candor_collector::ingest::extract::derived::{Conventions, Derivation, DerivedConfig};
use candor_collector::ingest::extract::{Limits, Received, extract_traces};
use candor_collector::sink::kafka::encode;
use candor_e2e::load::{mix_request, request};
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

const MIX_SPANS: usize = 1_000;

fn derive(c: &mut Criterion) {
    let body = mix_request(0, MIX_SPANS).encode_to_vec();
    let limits = Limits::default();
    let on = Derivation::default();
    let off = Derivation::new(DerivedConfig {
        conventions: Conventions::new(Vec::new(), &[], |_| false).unwrap(),
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
