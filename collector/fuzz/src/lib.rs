//! The checks behind the collector's fuzz targets (`fuzz_targets/`), one public function per
//! target, so that the `seeds` binary can run every seed it writes through the same checks.
//!
//! Each function takes arbitrary bytes and panics (an `assert!`) only when an invariant of the
//! collector's input decoding is broken; input that does not decode is simply not checked further.
//! The invariants are those of `ARCHITECTURE.md` ("Collector ingest") and of the property tests in
//! `collector/src/ingest/extract_tests.rs`: every `tool.outcome` event and every `tool.outcomes`
//! data point becomes exactly one record or is covered by one rejection.

use std::io::Read as _;

use candor_collector::ingest::decode::{self, Encoding, GunzipError};
use candor_collector::ingest::extract::derived::Derivation;
use candor_collector::ingest::extract::{
    self, Limits, MetricsExtract, Received, RejectReason, Rejection, Signal, TracesExtract,
};
use candor_records::proto::{
    CountClass, OutcomeCount, OutcomeEvent, OutcomeSource, RECORD_SCHEMA_VERSION, Temporality,
};
use candor_records::rows::{self, MAX_REJECTED_COPY_BYTES, Row, SourceRecord, TimeBounds};
use candor_records::tables::{RejectedSource, Table};
use candor_schema::names;
use candor_schema::{EvidenceKind, FailureKind, OutcomeClass, RetryAction};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::metric;
use prost::Message as _;

/// The cap of the `gzip_capped` target, in decompressed bytes.
pub const GZIP_CAP: usize = 64 * 1024;

/// The collector id stamped on every extracted record.
pub const COLLECTOR_ID: &str = "fuzz-collector";

/// The compactor id stamped on the rows it refuses.
pub const COMPACTOR_ID: &str = "fuzz-compactor";

/// When every request is received, Unix nanoseconds.
pub const RECEIVED_TIME_UNIX_NANO: u64 = 1_800_000_000_000_000_000;

/// The Kafka timestamp of a `kafka_record` input whose selector asks for an ordinary one.
pub const KAFKA_TIME_MS: i64 = 1_800_000_000_000;

/// The late and future bounds of the `kafka_record` target.
const TIME_BOUNDS: TimeBounds = TimeBounds {
    late_after_micros: 86_400_000_000,
    future_after_micros: 3_600_000_000,
};

/// The longest `detail` of a rejection: 1024 bytes, plus the mark of a cut.
const MAX_DETAIL_BYTES: usize = 1024 + '…'.len_utf8();

/// The limits every request is extracted under: the defaults, and tight ones that let a small
/// input reach what the defaults keep out of its reach (events past the per-request limit, too
/// many attributes, cut copies of the input).
pub fn extraction_limits() -> [Limits; 2] {
    [
        Limits::default(),
        Limits {
            max_value_bytes: 64,
            max_attributes_per_event: 12,
            max_events_per_request: 3,
            max_rejected_copy_bytes: 128,
        },
    ]
}

fn received(limits: &Limits) -> Received<'_> {
    Received {
        collector_id: COLLECTOR_ID,
        time_unix_nano: RECEIVED_TIME_UNIX_NANO,
        limits,
        derivation: &DERIVATION,
    }
}

/// The collector's default derivation of calls from standard spans.
static DERIVATION: std::sync::LazyLock<Derivation> = std::sync::LazyLock::new(Derivation::default);

// ---- the targets ------------------------------------------------------------------------------

/// `otlp_traces`: protobuf → trace export request → extraction.
pub fn otlp_traces(data: &[u8]) {
    let Ok(request) = decode::decode_request::<ExportTraceServiceRequest>(Encoding::Protobuf, data)
    else {
        return;
    };
    check_traces(&request);
    match reencoded(&request) {
        Some(again) => check_same_traces(&request, &again),
        None => panic!("a decoded trace request no longer decodes once re-encoded"),
    }
}

/// `otlp_metrics`: protobuf → metrics export request → extraction.
pub fn otlp_metrics(data: &[u8]) {
    let Ok(request) =
        decode::decode_request::<ExportMetricsServiceRequest>(Encoding::Protobuf, data)
    else {
        return;
    };
    check_metrics(&request);
    match reencoded(&request) {
        Some(again) => check_same_metrics(&request, &again),
        None => panic!("a decoded metrics request no longer decodes once re-encoded"),
    }
}

/// `otlp_json`: JSON → both export requests → extraction.
pub fn otlp_json(data: &[u8]) {
    if let Ok(request) = decode::decode_request::<ExportTraceServiceRequest>(Encoding::Json, data) {
        check_traces(&request);
        // serde_json bounds the nesting of JSON values and prost that of messages, differently,
        // so a request read from JSON may not come back from protobuf; when it does, it is the
        // same.
        if let Some(again) = reencoded(&request) {
            check_same_traces(&request, &again);
        }
    }
    if let Ok(request) = decode::decode_request::<ExportMetricsServiceRequest>(Encoding::Json, data)
    {
        check_metrics(&request);
        if let Some(again) = reencoded(&request) {
            check_same_metrics(&request, &again);
        }
    }
}

/// `gzip_capped`: capped decompression against a plain read of an uncapped decoder.
pub fn gzip_capped(data: &[u8]) {
    let capped = decode::gunzip_capped(data, GZIP_CAP);
    let reference = gunzip_reference(data, GZIP_CAP);
    match (&capped, &reference) {
        (Ok(out), Reference::Complete(all)) => {
            assert!(out.len() <= GZIP_CAP, "{} bytes past the cap", out.len());
            assert!(
                out == all,
                "the capped output differs from the uncapped one"
            );
        }
        (Ok(out), other) => panic!(
            "gunzip_capped returned {} bytes where the uncapped decoder found {other:?}",
            out.len()
        ),
        (Err(err), Reference::Complete(all)) => panic!(
            "gunzip_capped refused ({err}) a body that decompresses to {} bytes, within the cap",
            all.len()
        ),
        (Err(GunzipError::TooLarge { cap }), _) => assert_eq!(*cap, GZIP_CAP, "the cap named"),
        (Err(GunzipError::Malformed(_)), _) => {}
    }
}

/// `kafka_record`: a record of one of the pipeline's topics → the compactor's row.
///
/// The first byte selects the record: bits 0–1 the topic (in the order of [`Table::ALL`]; a high
/// nibble of `0xE` the operation events' instead), bits 2–3 its Kafka timestamp (an ordinary one,
/// none, `i64::MAX`, `i64::MIN`), and a high nibble of `0xF` a record without a value. The rest
/// is the value.
pub fn kafka_record(data: &[u8]) {
    let Some((&selector, value)) = data.split_first() else {
        return;
    };
    let record = SourceRecord {
        topic: if selector >> 4 == 0xE {
            Table::OperationEvents
        } else {
            Table::ALL[usize::from(selector & 0b11)]
        },
        partition: 7,
        offset: 42,
        timestamp_ms: match (selector >> 2) & 0b11 {
            0 => Some(KAFKA_TIME_MS),
            1 => None,
            2 => Some(i64::MAX),
            _ => Some(i64::MIN),
        },
        payload: (selector >> 4 != 0xF).then(|| value.to_vec()),
        generation: 0,
    };
    check_record(&record);
}

// ---- trace requests ---------------------------------------------------------------------------

/// What a trace request holds, counted independently of the extraction.
struct SpanCounts {
    outcome_events: u64,
    lifecycle_events: u64,
    spans_without_one: u64,
}

fn span_counts(request: &ExportTraceServiceRequest) -> SpanCounts {
    let mut counts = SpanCounts {
        outcome_events: 0,
        lifecycle_events: 0,
        spans_without_one: 0,
    };
    let spans = request
        .resource_spans
        .iter()
        .flat_map(|resource| &resource.scope_spans)
        .flat_map(|scope| &scope.spans);
    for span in spans {
        let events = span
            .events
            .iter()
            .filter(|event| event.name == names::OUTCOME_EVENT)
            .count() as u64;
        let states = span
            .events
            .iter()
            .filter(|event| event.name == names::LIFECYCLE_EVENT)
            .count() as u64;
        counts.outcome_events += events;
        counts.lifecycle_events += states;
        if events == 0 && states == 0 {
            counts.spans_without_one += 1;
        }
    }
    counts
}

/// Extracts a trace request under each of [`extraction_limits`] and checks the accounting and
/// every record.
pub fn check_traces(request: &ExportTraceServiceRequest) {
    let counts = span_counts(request);
    for limits in extraction_limits() {
        let out = extract::extract_traces(request, &received(&limits));
        assert_eq!(
            out.outcome_events_seen,
            counts.outcome_events,
            "every {} event is seen",
            names::OUTCOME_EVENT
        );
        let declared = out
            .events
            .iter()
            .filter(|event| {
                let adapter = OutcomeSource::Adapter.as_str().as_bytes();
                event.source.as_ref().map(|source| source.as_bytes()) == Some(adapter)
            })
            .count() as u64;
        let derived = &out.derived;
        assert_eq!(
            out.lifecycle_events_seen,
            counts.lifecycle_events,
            "every {} event is seen",
            names::LIFECYCLE_EVENT
        );
        assert_eq!(
            declared + out.operations.len() as u64 + extract::rejected_count(&out.rejections)
                - derived.refused
                - derived.events_over_limit,
            out.outcome_events_seen + out.lifecycle_events_seen,
            "records plus rejections account for every {} and {} event",
            names::OUTCOME_EVENT,
            names::LIFECYCLE_EVENT
        );
        assert_eq!(
            out.ignored + derived.spans,
            counts.spans_without_one,
            "spans without an event of the contract are derived calls or counted as ignored"
        );
        let calls: u64 = derived.calls.iter().map(|(_, _, _, n)| n).sum();
        assert_eq!(
            calls
                + derived.joined_into_adapter
                + derived.joined_into_derived
                + derived.joined_across_requests
                + derived.refused,
            derived.spans,
            "every derived span is counted, joined or refused"
        );
        let counted: u64 = out.counts.iter().map(|count| count.value).sum();
        assert!(
            counted >= calls,
            "the points count every derived call, a weighted one as the calls it stands for"
        );
        let unknown: u64 = out
            .counts
            .iter()
            .filter(|count| count.sampling.as_deref() == Some("unknown"))
            .map(|count| count.value)
            .sum();
        assert_eq!(
            unknown, derived.sampling_unknown,
            "a point of unknown sampling counts its spans"
        );
        let failed: u64 = derived
            .calls
            .iter()
            .filter(|(_, _, class, _)| *class == CountClass::Outcome(OutcomeClass::AccessFailure))
            .map(|(_, _, _, n)| n)
            .sum();
        assert_eq!(
            out.events.len() as u64 - declared + derived.events_over_limit,
            failed,
            "one event per failed derived call, but for those past the limit"
        );
        for count in &out.counts {
            check_count(count, &limits);
        }
        check_rejections(&out.rejections, Signal::Traces, &limits);
        let overflow = (out.outcome_events_seen + out.lifecycle_events_seen)
            .saturating_sub(limits.max_events_per_request as u64);
        let summaries: Vec<u64> = out
            .rejections
            .iter()
            .filter(|r| r.reason == RejectReason::TooManyEvents)
            .map(|r| r.count)
            .collect();
        // The derived calls' summary comes first: the adapter's is added last.
        let expected: Vec<u64> = [derived.events_over_limit, overflow]
            .into_iter()
            .filter(|n| *n > 0)
            .collect();
        assert_eq!(
            summaries, expected,
            "one summary for the events past the limit, and one for the derived calls"
        );
        for event in &out.events {
            // The record as Kafka receives it: the hand-written encoding, decoded by prost.
            let record = OutcomeEvent::decode(event.encode().as_slice())
                .expect("an extracted event encodes to a decodable record");
            assert_eq!(
                record,
                event.clone().into_record(),
                "the encoding keeps every field"
            );
            check_event(&record, &limits);
        }
    }
}

/// The same request twice (a client's retry) extracts to the same records, ids included.
fn check_same_traces(first: &ExportTraceServiceRequest, second: &ExportTraceServiceRequest) {
    let limits = Limits::default();
    let a: TracesExtract = extract::extract_traces(first, &received(&limits));
    let b: TracesExtract = extract::extract_traces(second, &received(&limits));
    assert!(a == b, "a re-encoded trace request extracts differently");
}

fn check_event(event: &OutcomeEvent, limits: &Limits) {
    assert_eq!(
        event.schema_version, RECORD_SCHEMA_VERSION,
        "schema version"
    );
    assert!(is_hex(&event.event_id, 32), "event_id {:?}", event.event_id);
    assert!(is_hex(&event.trace_id, 32), "trace_id {:?}", event.trace_id);
    assert!(is_hex(&event.span_id, 16), "span_id {:?}", event.span_id);
    assert_ne!(event.event_time_unix_nano, 0, "an event without a time");
    let class = event.outcome_class.parse::<OutcomeClass>();
    assert!(
        matches!(
            class,
            Ok(OutcomeClass::AccessFailure | OutcomeClass::Partial)
        ),
        "an event of class {:?}",
        event.outcome_class
    );
    assert!(event.failure_kind.parse::<FailureKind>().is_ok(), "kind");
    let source = event
        .source
        .as_deref()
        .and_then(|s| OutcomeSource::from_bytes(s.as_bytes()));
    assert!(source.is_some(), "source {:?}", event.source);
    if source.is_some_and(OutcomeSource::is_derived) {
        // A derived call: a failure whose span says nothing of its retries.
        assert!(
            matches!(class, Ok(OutcomeClass::AccessFailure)),
            "a derived event's class"
        );
        assert!(event.retry_action.is_empty(), "a derived event's action");
        assert!(event.retry_attempt >= 1, "attempt {}", event.retry_attempt);
    } else {
        assert!(event.retry_action.parse::<RetryAction>().is_ok(), "action");
        assert!(
            1 <= event.retry_attempt && event.retry_attempt <= event.retry_max_attempts,
            "attempt {} of {}",
            event.retry_attempt,
            event.retry_max_attempts
        );
    }
    for value in [&event.tool_name, &event.tool_target] {
        assert!(
            value.len() <= limits.max_value_bytes,
            "a value past the limit"
        );
    }
    // Evidence comes whole, of a kind of the vocabulary.
    assert_eq!(
        event.evidence_kind.is_some(),
        event.evidence_value.is_some(),
        "half of the evidence"
    );
    if let Some(kind) = &event.evidence_kind {
        assert!(
            kind.parse::<EvidenceKind>().is_ok(),
            "evidence kind {kind:?}"
        );
    }
    assert_eq!(event.collector_id, COLLECTOR_ID, "collector id");
    assert_eq!(
        event.received_time_unix_nano, RECEIVED_TIME_UNIX_NANO,
        "receipt time"
    );
    // What the collector acknowledged, the compactor stores as it is, never as a rejected row.
    match stored(Table::OutcomeEvents, event.encode_to_vec()) {
        Row::Event(row) => assert!(
            row.record() == *event,
            "the stored event differs from the record"
        ),
        other => panic!("the compactor refuses an event the collector accepted: {other:?}"),
    }
}

// ---- metrics requests -------------------------------------------------------------------------

/// What a metrics request holds, counted independently of the extraction: each data point of a
/// monotonic `tool.outcomes` sum is one, and so is each `tool.outcomes` metric of another type.
struct MetricCounts {
    points: u64,
    other_metrics: u64,
}

fn metric_counts(request: &ExportMetricsServiceRequest) -> MetricCounts {
    let mut counts = MetricCounts {
        points: 0,
        other_metrics: 0,
    };
    let metrics = request
        .resource_metrics
        .iter()
        .flat_map(|resource| &resource.scope_metrics)
        .flat_map(|scope| &scope.metrics);
    for metric in metrics {
        if metric.name != names::OUTCOMES_COUNTER {
            counts.other_metrics += 1;
            continue;
        }
        counts.points += match &metric.data {
            Some(metric::Data::Sum(sum)) if sum.is_monotonic => sum.data_points.len() as u64,
            _ => 1,
        };
    }
    counts
}

/// Extracts a metrics request under each of [`extraction_limits`] and checks the accounting and
/// every record.
pub fn check_metrics(request: &ExportMetricsServiceRequest) {
    let counts = metric_counts(request);
    for limits in extraction_limits() {
        let out = extract::extract_metrics(request, &received(&limits));
        assert_eq!(
            out.points_seen,
            counts.points,
            "every {} data point is seen",
            names::OUTCOMES_COUNTER
        );
        assert_eq!(
            out.counts.len() as u64 + extract::rejected_count(&out.rejections),
            out.points_seen,
            "records plus rejections account for every {} data point",
            names::OUTCOMES_COUNTER
        );
        assert_eq!(
            out.ignored_metrics, counts.other_metrics,
            "other metrics are ignored"
        );
        check_rejections(&out.rejections, Signal::Metrics, &limits);
        let summaries = out
            .rejections
            .iter()
            .filter(|r| r.reason == RejectReason::TooManyEvents)
            .count();
        assert!(
            summaries <= 1,
            "{summaries} summaries of the points past the limit"
        );
        for count in &out.counts {
            check_count(count, &limits);
        }
    }
}

fn check_same_metrics(first: &ExportMetricsServiceRequest, second: &ExportMetricsServiceRequest) {
    let limits = Limits::default();
    let a: MetricsExtract = extract::extract_metrics(first, &received(&limits));
    let b: MetricsExtract = extract::extract_metrics(second, &received(&limits));
    assert!(a == b, "a re-encoded metrics request extracts differently");
}

fn check_count(count: &OutcomeCount, limits: &Limits) {
    assert_eq!(
        count.schema_version, RECORD_SCHEMA_VERSION,
        "schema version"
    );
    assert!(is_hex(&count.point_id, 32), "point_id {:?}", count.point_id);
    assert_ne!(count.time_unix_nano, 0, "a point without a time");
    let source = count
        .source
        .as_deref()
        .and_then(|s| OutcomeSource::from_bytes(s.as_bytes()));
    assert!(source.is_some(), "source {:?}", count.source);
    assert!(
        CountClass::parse(&count.outcome_class, source).is_ok(),
        "class {:?} of source {:?}",
        count.outcome_class,
        count.source
    );
    assert!(
        count.temporality == Temporality::Delta as i32
            || count.temporality == Temporality::Cumulative as i32,
        "temporality {}",
        count.temporality
    );
    for value in [&count.tool_name, &count.tool_target] {
        assert!(
            value.len() <= limits.max_value_bytes,
            "a value past the limit"
        );
    }
    assert_eq!(count.collector_id, COLLECTOR_ID, "collector id");
    match stored(Table::OutcomeCounts, count.encode_to_vec()) {
        Row::Count(row) => assert!(*row == *count, "the stored count differs from the record"),
        other => panic!("the compactor refuses a count the collector accepted: {other:?}"),
    }
}

// ---- both -------------------------------------------------------------------------------------

fn check_rejections(rejections: &[Rejection], signal: Signal, limits: &Limits) {
    for rejection in rejections {
        assert!(rejection.count >= 1, "a rejection that stands for nothing");
        assert_eq!(rejection.signal, signal, "signal");
        assert_ne!(
            rejection.reason,
            RejectReason::MalformedRequest,
            "extraction never calls a decoded request malformed"
        );
        assert!(
            rejection.input.len() <= limits.max_rejected_copy_bytes,
            "a copy of {} bytes",
            rejection.input.len()
        );
        if rejection.input_truncated {
            assert_eq!(
                rejection.input.len(),
                limits.max_rejected_copy_bytes,
                "a cut copy is cut at the bound"
            );
        }
        assert!(
            rejection.detail.len() <= MAX_DETAIL_BYTES,
            "an unbounded detail"
        );
        assert!(!rejection.detail.is_empty(), "a rejection without a detail");
    }
}

/// The request encoded again and decoded, as a client's retry would arrive; `None` when it does
/// not decode.
fn reencoded<T: prost::Message + Default>(request: &T) -> Option<T> {
    T::decode(request.encode_to_vec().as_slice()).ok()
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

// ---- gzip -------------------------------------------------------------------------------------

/// What a plain read of an uncapped decoder found, read until it passes the cap (reading further
/// would only grow memory: the result is known by then).
#[derive(Debug)]
enum Reference {
    /// The whole body, within the cap.
    Complete(Vec<u8>),
    /// More than the cap.
    PastCap,
    /// An error before the cap was passed.
    Malformed,
}

fn gunzip_reference(data: &[u8], cap: usize) -> Reference {
    let mut decoder = flate2::read::MultiGzDecoder::new(data);
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match decoder.read(&mut chunk) {
            Ok(0) => return Reference::Complete(out),
            Ok(n) => {
                out.extend_from_slice(&chunk[..n]);
                if out.len() > cap {
                    return Reference::PastCap;
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Reference::Malformed,
        }
    }
}

// ---- Kafka records ----------------------------------------------------------------------------

/// What the compactor makes of a record of `table` with this value and no Kafka timestamp.
fn stored(table: Table, payload: Vec<u8>) -> Row {
    let record = SourceRecord {
        topic: table,
        partition: 0,
        offset: 0,
        timestamp_ms: None,
        payload: Some(payload),
        generation: 0,
    };
    rows::decode(&record, &TIME_BOUNDS, COMPACTOR_ID).1
}

/// Decodes one record as the compactor does and checks the row: one of the record's own table,
/// or a rejected row that says why and keeps a bounded copy; and the row goes into a record batch
/// of its table.
pub fn check_record(record: &SourceRecord) {
    let decoded = rows::decode(record, &TIME_BOUNDS, COMPACTOR_ID);
    let (meta, row) = &decoded;
    assert_eq!(
        (meta.partition, meta.offset),
        (record.partition, record.offset)
    );
    let expected_kafka_micros = match record.timestamp_ms {
        Some(ms) => ms.saturating_mul(1000),
        // Without a Kafka timestamp, the row is measured against its own time.
        None => row.time_micros(),
    };
    assert_eq!(
        meta.kafka_micros, expected_kafka_micros,
        "the row's Kafka time"
    );
    match row {
        Row::Rejected(rejected) if rejected.source == RejectedSource::Compactor => {
            assert!(
                !rejected.reason.is_empty(),
                "a compactor rejection without a reason"
            );
            assert!(
                !rejected.detail.is_empty(),
                "a compactor rejection without a detail"
            );
            assert_eq!(
                rejected.topic,
                record.topic.topic(),
                "the topic it came from"
            );
            assert_eq!(rejected.count, 1, "a refused record is one");
            let payload = record.payload.as_deref().unwrap_or_default();
            assert!(
                rejected.input.len() <= MAX_REJECTED_COPY_BYTES,
                "an unbounded copy"
            );
            assert!(
                payload.starts_with(&rejected.input),
                "the copy is the value's start"
            );
            assert_eq!(
                rejected.input_truncated,
                rejected.input.len() < payload.len(),
                "a cut copy is marked"
            );
        }
        Row::Rejected(rejected) => {
            // A collector's rejection, read from its own topic.
            assert_eq!(
                record.topic,
                Table::Rejected,
                "a collector rejection from elsewhere"
            );
            assert_eq!(rejected.schema_version, Some(1), "schema version");
            assert!(rejected.count >= 0, "a negative count");
        }
        other => assert_eq!(other.table(), record.topic, "a row of another table"),
    }
    if let Some(id) = row.id() {
        assert!(!id.is_empty(), "a row without its id");
    }
    match rows::to_batch(row.table(), &[&decoded]) {
        Ok(batch) => assert_eq!(batch.num_rows(), 1, "one row in the batch"),
        Err(err) => panic!("a decoded row does not fit its table's batch: {err}"),
    }
}
