//! Figures for the dashboards: how fast the model takes records (decoding included, as the
//! consumer does it), how much memory a history of many targets takes, and how long the overview,
//! its page, its JSON and `/metrics` take to build.
//!
//! `cargo run --release -p candor-dashboards --example bench -- [TARGETS] [DAYS] [STEP_MINUTES]`
//! (defaults: 1000 targets, 7 days, 5-minute buckets). Each target gets one cumulative counter
//! series per class with a point every 5 minutes, and AccessFailure events at 2 % of its calls.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark's failure is its report

use std::sync::Arc;
use std::time::Instant;

use candor_dashboards::alerts::Alerts;
use candor_dashboards::model::{MINUTE, Model, ModelSettings};
use candor_dashboards::rules::{self, DEFAULT_RULES, Limits};
use candor_dashboards::snapshot::Snapshot;
use candor_dashboards::state::{PipelineInputs, Shared};
use candor_dashboards::{metrics, page, view};
use candor_query::window::{Micros, now};
use candor_records::proto::{Heartbeat, OutcomeCount, OutcomeEvent, Temporality};
use candor_records::rows::{SourceRecord, TimeBounds, decode};
use candor_records::tables::Table;
use prost::Message as _;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn arg(index: usize, default: i64) -> i64 {
    std::env::args()
        .nth(index)
        .and_then(|raw| raw.parse().ok())
        .unwrap_or(default)
}

fn nanos(at: Micros) -> u64 {
    u64::try_from(at).unwrap() * 1000
}

fn record(topic: Table, offset: i64, at: Micros, payload: Vec<u8>) -> SourceRecord {
    SourceRecord {
        topic,
        partition: 0,
        offset,
        timestamp_ms: Some(at / 1000),
        payload: Some(payload),
        generation: 0,
    }
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn time_ms(runs: usize, mut work: impl FnMut() -> usize) -> (f64, usize) {
    let mut samples = Vec::with_capacity(runs);
    let mut size = 0;
    for _ in 0..runs {
        let started = Instant::now();
        size = work();
        samples.push(started.elapsed().as_secs_f64() * 1e3);
    }
    (median(samples), size)
}

fn main() {
    let targets = arg(1, 1000);
    let days = arg(2, 7);
    let step = arg(3, 5) * MINUTE;
    let history = days * 24 * 60 * MINUTE;
    let end = now() / step * step;
    let start = end - history;
    let bounds = TimeBounds {
        late_after_micros: 100 * 24 * 3_600_000_000,
        future_after_micros: 300_000_000,
    };
    let settings = ModelSettings {
        history: history + step,
        step,
        ..ModelSettings::default()
    };
    let mut model = Model::new(settings);
    model.hold_from(start - MINUTE);
    let before = rss_mib();
    println!(
        "dashboards bench: {targets} targets, {days} day(s), {} min buckets",
        step / MINUTE
    );

    // Records as the consumer reads them: protobuf bytes, decoded and applied.
    let interval = 5 * MINUTE;
    let classes = ["success", "empty", "partial", "access_failure"];
    let shares = [90u64, 5, 3, 2];
    let mut offset = 0i64;
    let mut records = 0u64;
    let mut applying = std::time::Duration::ZERO;
    let mut batch: Vec<SourceRecord> = Vec::with_capacity(1 << 16);
    let flush =
        |batch: &mut Vec<SourceRecord>, model: &mut Model, applying: &mut std::time::Duration| {
            let started = Instant::now();
            let clock = end;
            for record in batch.iter() {
                let (meta, row) = decode(record, &bounds, "bench");
                model.apply(&meta, &row, clock);
            }
            *applying += started.elapsed();
            batch.clear();
        };
    let mut at = start;
    let mut tick = 0u64;
    while at < end {
        tick += 1;
        for target in 0..targets {
            let name = format!("https://api-{target:04}.example/v1/search");
            // 60 calls a minute per target, counted cumulatively since `start`.
            let calls = tick * 300;
            for (class, share) in classes.iter().zip(shares) {
                let point = OutcomeCount {
                    schema_version: 1,
                    point_id: format!("{target}/{class}/{at}"),
                    service_name: format!("svc-{}", target % 20),
                    service_instance_id: format!("svc-{}-1", target % 20),
                    tool_name: format!("tool-{}", target % 8),
                    tool_target: name.clone(),
                    outcome_class: (*class).into(),
                    start_time_unix_nano: nanos(start),
                    time_unix_nano: nanos(at),
                    value: calls * share / 100,
                    temporality: Temporality::Cumulative as i32,
                    received_time_unix_nano: nanos(at),
                    collector_id: "bench".into(),
                    export_interval_ms: None,
                    source: None,
                    convention: None,
                    sampling: None,
                };
                offset += 1;
                batch.push(record(
                    Table::OutcomeCounts,
                    offset,
                    at,
                    point.encode_to_vec(),
                ));
            }
            // The interval's AccessFailures as terminal events (2 % of 300 calls).
            for n in 0..6 {
                let event = OutcomeEvent {
                    schema_version: 1,
                    event_id: format!("{target}/{at}/{n}"),
                    trace_id: format!(
                        "{:032x}",
                        u128::from(tick) << 32 | u128::try_from(target).unwrap()
                    ),
                    span_id: format!("{:016x}", n + 1),
                    event_time_unix_nano: nanos(at - n),
                    service_name: format!("svc-{}", target % 20),
                    service_instance_id: format!("svc-{}-1", target % 20),
                    outcome_class: "access_failure".into(),
                    tool_name: format!("tool-{}", target % 8),
                    tool_target: name.clone(),
                    failure_kind: if n % 2 == 0 {
                        "timeout"
                    } else {
                        "server_error"
                    }
                    .into(),
                    retry_action: if n % 3 == 0 { "permanent" } else { "exhausted" }.into(),
                    retry_attempt: 3,
                    retry_max_attempts: 3,
                    received_time_unix_nano: nanos(at),
                    collector_id: "bench".into(),
                    ..OutcomeEvent::default()
                };
                offset += 1;
                batch.push(record(
                    Table::OutcomeEvents,
                    offset,
                    at,
                    event.encode_to_vec(),
                ));
            }
            if batch.len() >= 1 << 16 {
                records += batch.len() as u64;
                flush(&mut batch, &mut model, &mut applying);
            }
        }
        let beat = Heartbeat {
            schema_version: 1,
            collector_id: "bench".into(),
            time_unix_nano: nanos(at),
            started_time_unix_nano: nanos(start),
            interval_ms: 10_000,
            ..Heartbeat::default()
        };
        offset += 1;
        batch.push(record(Table::Heartbeats, offset, at, beat.encode_to_vec()));
        at += interval;
    }
    records += batch.len() as u64;
    flush(&mut batch, &mut model, &mut applying);
    let applied = model.applied();
    println!(
        "apply: {records} records (decode + apply) in {:.2} s = {:.0} records/s on one thread; {} duplicates, {} baselines",
        applying.as_secs_f64(),
        records as f64 / applying.as_secs_f64(),
        applied.duplicates,
        applied.baselines
    );
    println!(
        "memory: resident {:.0} MiB after loading ({:.0} MiB before)",
        rss_mib(),
        before
    );

    let rules = rules::parse(
        DEFAULT_RULES,
        Limits {
            step,
            history: settings.history,
        },
    )
    .unwrap();
    let pipeline = PipelineInputs {
        kafka_contact: Some(end),
        table_watermark: Some(end),
        history_read: Some(end),
        caught_up: true,
        ..PipelineInputs::default()
    };
    let shared = Shared::new(
        model,
        Alerts::default(),
        rules,
        Arc::new(candor_dashboards::access::Access::open()),
        start,
    );
    *shared.pipeline.lock().unwrap() = pipeline;
    let (taken, _) = time_ms(5, || Snapshot::take(&shared, end).instances.len());
    println!("snapshot taken: {taken:.1} ms");
    let snapshot = Snapshot::take(&shared, end);
    for (label, range) in [
        ("1h", 60 * MINUTE),
        ("24h", 24 * 60 * MINUTE),
        ("7d", history),
    ] {
        if range > history {
            continue;
        }
        let (built, _) = time_ms(5, || view::overview(&snapshot, range).by_target.len());
        let overview = view::overview(&snapshot, range);
        let (html, html_bytes) = time_ms(5, || page::overview(&overview).len());
        let (json, json_bytes) = time_ms(5, || serde_json::to_string(&overview).unwrap().len());
        println!(
            "overview {label}: build {built:.1} ms, page {html:.1} ms ({} KiB), JSON {json:.1} ms ({} KiB); page render total {:.1} ms",
            html_bytes / 1024,
            json_bytes / 1024,
            built + html
        );
    }
    let (rendered, bytes) = time_ms(5, || metrics::render(&snapshot).len());
    println!("/metrics: {rendered:.1} ms ({} KiB)", bytes / 1024);
    let (evaluated, _) = time_ms(5, || {
        candor_dashboards::engine::evaluate(&shared, end, MINUTE).len()
    });
    println!("rule evaluation: {evaluated:.1} ms");
    println!("memory: resident {:.0} MiB at the end", rss_mib());
}
