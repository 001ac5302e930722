//! The corpus writers, one per fuzz target: each builds its seeds, checks them and writes them.

use std::io::Write as _;
use std::path::Path;

use candor_collector::ingest::extract::derived::Derivation;
use candor_collector::ingest::extract::{self, Limits, Received};
use candor_collector_fuzz as checks;
use candor_records::proto::{
    Heartbeat, OutcomeCount, OutcomeEvent, RECORD_SCHEMA_VERSION, Rejected,
};
use candor_records::tables::Table;
use candor_schema::OutcomeClass;
use prost::Message as _;

use crate::metric_requests::{
    bad_points, cumulative, delta, many_points, oversized_points, points_to_patch,
    wrong_metric_types,
};
use crate::trace_requests::{
    bad_ids, declared_partial, derived_spans, every_class, many_events, oversized_values,
    retried_server_error, to_patch, unknown_values, wrong_types,
};
use crate::{Corpus, PATCHED_TOOL, Result};

/// `bytes` with the first occurrence of `from` replaced by `to`.
fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Result<Vec<u8>> {
    let at = bytes
        .windows(from.len())
        .position(|window| window == from)
        .ok_or_else(|| format!("{:?} is not in the seed", String::from_utf8_lossy(from)))?;
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(to);
    out.extend_from_slice(&bytes[at + from.len()..]);
    Ok(out)
}

pub(crate) fn otlp_traces(root: &Path) -> Result<usize> {
    let mut corpus = Corpus::open(root, "otlp_traces", checks::otlp_traces)?;
    let seeds = [
        ("retried-server-error", retried_server_error()),
        ("declared-partial", declared_partial()),
        ("every-class", every_class()),
        ("unknown-values", unknown_values()),
        ("oversized-values", oversized_values()),
        ("wrong-types", wrong_types()),
        ("bad-ids-and-times", bad_ids()),
        ("many-events", many_events()),
        ("derived-spans", derived_spans()),
    ];
    for (name, request) in seeds {
        corpus.add(name, &request.encode_to_vec())?;
    }
    let bytes = to_patch().encode_to_vec();
    let broken = patched(&bytes, PATCHED_TOOL.as_bytes(), b"lo\xffkup")?;
    corpus.add("invalid-utf8-in-a-string", &broken)?;
    Ok(corpus.written)
}

pub(crate) fn otlp_metrics(root: &Path) -> Result<usize> {
    let mut corpus = Corpus::open(root, "otlp_metrics", checks::otlp_metrics)?;
    let seeds = [
        ("cumulative-four-classes", cumulative()),
        ("delta-four-classes", delta()),
        ("bad-points", bad_points()),
        ("wrong-metric-types", wrong_metric_types()),
        ("oversized-values", oversized_points()),
        ("three-services", many_points()),
    ];
    for (name, request) in seeds {
        corpus.add(name, &request.encode_to_vec())?;
    }
    let bytes = points_to_patch().encode_to_vec();
    let broken = patched(&bytes, PATCHED_TOOL.as_bytes(), b"lo\xffkup")?;
    corpus.add("invalid-utf8-in-a-string", &broken)?;
    Ok(corpus.written)
}

pub(crate) fn otlp_json(root: &Path) -> Result<usize> {
    let mut corpus = Corpus::open(root, "otlp_json", checks::otlp_json)?;
    corpus.add("traces-every-class", &serde_json::to_vec(&every_class())?)?;
    corpus.add("traces-wrong-types", &serde_json::to_vec(&wrong_types())?)?;
    corpus.add(
        "traces-unknown-values",
        &serde_json::to_vec(&unknown_values())?,
    )?;
    corpus.add("metrics-cumulative", &serde_json::to_vec(&cumulative())?)?;
    corpus.add("metrics-bad-points", &serde_json::to_vec(&bad_points())?)?;
    corpus.add(
        "metrics-wrong-types",
        &serde_json::to_vec(&wrong_metric_types())?,
    )?;
    let json = serde_json::to_vec(&to_patch())?;
    let quoted = format!("\"{PATCHED_TOOL}\"");
    // JSON text cannot carry invalid UTF-8: a raw byte that is not, and an escaped lone surrogate.
    let raw = patched(&json, quoted.as_bytes(), b"\"lo\xffkup\"")?;
    corpus.add("invalid-utf8-byte", &raw)?;
    let surrogate = patched(&json, quoted.as_bytes(), b"\"lo\\ud800kup\"")?;
    corpus.add("lone-surrogate", &surrogate)?;
    let cut = &json[..json.len() / 2];
    corpus.add("cut", cut)?;
    Ok(corpus.written)
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data)?;
    Ok(encoder.finish()?)
}

pub(crate) fn gzip_capped(root: &Path) -> Result<usize> {
    let mut corpus = Corpus::open(root, "gzip_capped", checks::gzip_capped)?;
    let request = retried_server_error().encode_to_vec();
    corpus.add("request", &gzip(&request)?)?;
    let mut two = gzip(&request)?;
    two.extend(gzip(&cumulative().encode_to_vec())?);
    corpus.add("two-members", &two)?;
    corpus.add("empty-member", &gzip(b"")?)?;
    let pattern: Vec<u8> = (0..=checks::GZIP_CAP).map(|i| (i % 251) as u8).collect();
    corpus.add("exactly-the-cap", &gzip(&pattern[..checks::GZIP_CAP])?)?;
    corpus.add("one-past-the-cap", &gzip(&pattern)?)?;
    // 8 MiB of zeros compress to about 8 KiB; the first 4 KiB still inflate far past the cap.
    let bomb = gzip(&vec![0u8; 8 << 20])?;
    corpus.add("bomb-prefix", &bomb[..bomb.len().min(4096)])?;
    let mut bad_crc = gzip(b"hello, world")?;
    let crc_at = bad_crc.len() - 8;
    bad_crc[crc_at] ^= 0xff;
    corpus.add("wrong-crc", &bad_crc)?;
    let mut trailing = gzip(b"hello, world")?;
    trailing.extend_from_slice(b"not gzip");
    corpus.add("trailing-garbage", &trailing)?;
    Ok(corpus.written)
}

/// The first byte of a `kafka_record` input: the topic's index in [`Table::ALL`], and the
/// timestamp choice (0 an ordinary one, 1 none, 2 `i64::MAX`, 3 `i64::MIN`).
fn selector(table: Table, timestamp: u8) -> Result<u8> {
    let index = Table::ALL
        .iter()
        .position(|t| *t == table)
        .ok_or("a table missing from Table::ALL")?;
    Ok(u8::try_from(index)? | (timestamp << 2))
}

fn record(table: Table, timestamp: u8, payload: &[u8]) -> Result<Vec<u8>> {
    let mut bytes = vec![selector(table, timestamp)?];
    bytes.extend_from_slice(payload);
    Ok(bytes)
}

pub(crate) fn kafka_record(root: &Path) -> Result<usize> {
    let mut corpus = Corpus::open(root, "kafka_record", checks::kafka_record)?;
    let limits = Limits::default();
    let received = Received {
        collector_id: checks::COLLECTOR_ID,
        time_unix_nano: checks::RECEIVED_TIME_UNIX_NANO,
        limits: &limits,
        derivation: &Derivation::default(),
    };
    let request = every_class();
    let traces = extract::extract_traces(&request, &received);
    let metrics = extract::extract_metrics(&cumulative(), &received);
    let event = traces
        .events
        .first()
        .ok_or("no event extracted")?
        .clone()
        .into_record();
    let partial = traces
        .events
        .iter()
        .find(|e| e.outcome_class.as_bytes() == OutcomeClass::Partial.as_str().as_bytes())
        .ok_or("no partial extracted")?;
    let count: &OutcomeCount = metrics.counts.first().ok_or("no count extracted")?;
    let rejection = traces.rejections.first().ok_or("no rejection extracted")?;
    let rejected = rejection.to_record(checks::RECEIVED_TIME_UNIX_NANO, checks::COLLECTOR_ID);
    let heartbeat = Heartbeat {
        schema_version: RECORD_SCHEMA_VERSION,
        collector_id: checks::COLLECTOR_ID.to_owned(),
        time_unix_nano: checks::RECEIVED_TIME_UNIX_NANO,
        started_time_unix_nano: checks::RECEIVED_TIME_UNIX_NANO - 3_600_000_000_000,
        interval_ms: 10_000,
        accepted_events: 12,
        accepted_counts: 40,
        rejected: 2,
        ..Heartbeat::default()
    };
    let senders = Heartbeat {
        service_name: Some("checkout".to_owned()),
        service_instance_id: Some("web-1/4242".to_owned()),
        sender_items: Some(1_000),
        accepted_events: 0,
        accepted_counts: 0,
        rejected: 0,
        ..heartbeat.clone()
    };
    let events = Table::OutcomeEvents;
    corpus.add("outcome-event", &record(events, 0, &event.encode_to_vec())?)?;
    corpus.add(
        "outcome-count",
        &record(Table::OutcomeCounts, 0, &count.encode_to_vec())?,
    )?;
    corpus.add(
        "rejected",
        &record(Table::Rejected, 0, &rejected.encode_to_vec())?,
    )?;
    corpus.add(
        "heartbeat",
        &record(Table::Heartbeats, 0, &heartbeat.encode_to_vec())?,
    )?;
    corpus.add(
        "senders-heartbeat",
        &record(Table::Heartbeats, 0, &senders.encode_to_vec())?,
    )?;
    corpus.add(
        "partial-without-timestamp",
        &record(events, 1, &partial.encode())?,
    )?;
    let future = OutcomeEvent {
        schema_version: RECORD_SCHEMA_VERSION + 1,
        ..event.clone()
    };
    corpus.add(
        "unknown-schema-version",
        &record(events, 0, &future.encode_to_vec())?,
    )?;
    let unknown = OutcomeCount {
        outcome_class: "maybe".to_owned(),
        ..count.clone()
    };
    let counts = Table::OutcomeCounts;
    corpus.add(
        "unknown-class",
        &record(counts, 2, &unknown.encode_to_vec())?,
    )?;
    let huge = Rejected {
        count: u64::MAX,
        ..rejected.clone()
    };
    corpus.add(
        "count-past-i64",
        &record(Table::Rejected, 3, &huge.encode_to_vec())?,
    )?;
    corpus.add(
        "a-count-on-the-events-topic",
        &record(events, 0, &count.encode_to_vec())?,
    )?;
    corpus.add("no-value", &[0xF0])?;
    Ok(corpus.written)
}
