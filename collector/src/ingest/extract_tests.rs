//! Tests of extraction: every `tool.outcome` event and every `tool.outcomes` point becomes a
//! record or a named rejection, and nothing else happens to it.
//!
//! Wire names are always spelled through `candor_schema::names` (a workspace test forbids
//! repeating them as literals); vocabulary spellings such as "access_failure" are literals on
//! purpose, to pin what the wire carries.

use std::collections::HashSet;

use candor_records::proto::{OperationEvent, OutcomeEvent, RECORD_SCHEMA_VERSION, Temporality};
use candor_schema::names::{attr, resource};
use candor_schema::{OutcomeClass, RetryAction};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
    metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};
use proptest::prelude::*;
use prost::Message as _;

use super::*;

const TRACE_ID: [u8; 16] = [1; 16];
const SPAN_ID: [u8; 8] = [2; 8];
const OTHER_SPAN_ID: [u8; 8] = [3; 8];
const EVENT_TIME: u64 = 1_799_999_999_000_000_000;
const RECEIVED_TIME: u64 = 1_800_000_000_000_000_000;
const POINT_START: u64 = 1_799_999_000_000_000_000;
const COLLECTOR: &str = "c-1";
const TARGET: &str = "http://search.test/v1";

// ---- builders ----------------------------------------------------------------------------------

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

fn kv_int(key: &str, value: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(value))
}

fn good_event_attributes() -> Vec<KeyValue> {
    vec![
        kv_str(attr::OUTCOME_CLASS, "access_failure"),
        kv_str(attr::TOOL_NAME, "search"),
        kv_str(attr::TOOL_TARGET, TARGET),
        kv_str(attr::FAILURE_KIND, "server_error"),
        kv_str(attr::RETRY_ACTION, "retry"),
        kv_int(attr::RETRY_ATTEMPT, 1),
        kv_int(attr::RETRY_MAX_ATTEMPTS, 3),
        kv_int(attr::RETRY_BACKOFF_MS, 100),
        kv_int(attr::HTTP_STATUS_CODE, 503),
        kv_str(attr::ERROR_TYPE, "503"),
        kv_str(attr::AUTHORITY, "svc"),
    ]
}

fn good_partial_attributes() -> Vec<KeyValue> {
    vec![
        kv_str(attr::OUTCOME_CLASS, "partial"),
        kv_str(attr::TOOL_NAME, "search"),
        kv_str(attr::TOOL_TARGET, TARGET),
        kv_str(attr::FAILURE_KIND, "declared_total"),
        kv_str(attr::RETRY_ACTION, "accept_partial"),
        kv_int(attr::RETRY_ATTEMPT, 1),
        kv_int(attr::RETRY_MAX_ATTEMPTS, 3),
        kv_int(attr::PARTIAL_RETURNED, 3),
        kv_int(attr::PARTIAL_EXPECTED, 10),
        kv_str(attr::COVERAGE, "items 1-3 of 10"),
        kv_str(attr::DROPPED, "7 item(s)"),
    ]
}

/// `attributes` with `key` set to `value`: the first occurrence replaced, or one appended.
fn with(mut attributes: Vec<KeyValue>, key: &str, value: any_value::Value) -> Vec<KeyValue> {
    match attributes.iter_mut().find(|existing| existing.key == key) {
        Some(existing) => existing.value = Some(AnyValue { value: Some(value) }),
        None => attributes.push(kv(key, value)),
    }
    attributes
}

fn with_str(attributes: Vec<KeyValue>, key: &str, value: &str) -> Vec<KeyValue> {
    with(
        attributes,
        key,
        any_value::Value::StringValue(value.to_owned()),
    )
}

fn with_int(attributes: Vec<KeyValue>, key: &str, value: i64) -> Vec<KeyValue> {
    with(attributes, key, any_value::Value::IntValue(value))
}

fn without(mut attributes: Vec<KeyValue>, key: &str) -> Vec<KeyValue> {
    attributes.retain(|kv| kv.key != key);
    attributes
}

fn event_with(attributes: Vec<KeyValue>) -> span::Event {
    span::Event {
        time_unix_nano: EVENT_TIME,
        name: names::OUTCOME_EVENT.to_owned(),
        attributes,
        dropped_attributes_count: 0,
    }
}

fn good_event() -> span::Event {
    event_with(good_event_attributes())
}

fn span_of(trace_id: &[u8], span_id: &[u8], events: Vec<span::Event>) -> Span {
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        name: names::TOOL_CALL_SPAN.to_owned(),
        events,
        ..Default::default()
    }
}

fn service_resource() -> Resource {
    Resource {
        attributes: vec![
            kv_str(resource::SERVICE_NAME, "checkout"),
            kv_str(resource::SERVICE_INSTANCE_ID, "i-1"),
        ],
        ..Default::default()
    }
}

fn request_of(resource: Option<Resource>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource,
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn request(events: Vec<span::Event>) -> ExportTraceServiceRequest {
    request_of(
        Some(service_resource()),
        vec![span_of(&TRACE_ID, &SPAN_ID, events)],
    )
}

fn received(limits: &Limits) -> Received<'_> {
    Received {
        collector_id: COLLECTOR,
        time_unix_nano: RECEIVED_TIME,
        limits,
        derivation: &DERIVATION,
    }
}

/// The default derivation, shared by the tests that do not look at its target cap.
static DERIVATION: std::sync::LazyLock<Derivation> = std::sync::LazyLock::new(Derivation::default);

/// What a test looks at: an extract whose events are the records Kafka receives, decoded from
/// the encoder's bytes, so that every extraction test checks the encoding as well.
#[derive(Debug)]
struct Traces {
    events: Vec<OutcomeEvent>,
    rejections: Vec<Rejection>,
    ignored_spans: u64,
    outcome_events_seen: u64,
    redacted: u64,
}

fn extracted(request: &ExportTraceServiceRequest, received: &Received<'_>) -> Traces {
    let out = extract_traces(request, received);
    Traces {
        events: decoded(&out.events),
        rejections: out.rejections,
        ignored_spans: out.ignored,
        outcome_events_seen: out.outcome_events_seen,
        redacted: out.redacted,
    }
}

/// The records of `events` as the encoder writes them, decoded again.
fn decoded(events: &[OutcomeEventRef<'_>]) -> Vec<OutcomeEvent> {
    events
        .iter()
        .map(|event| {
            let record = crate::sink::kafka::encode::outcome_event(event);
            OutcomeEvent::decode(record.payload.as_slice()).unwrap()
        })
        .collect()
}

fn traces(request: &ExportTraceServiceRequest) -> Traces {
    extracted(request, &received(&Limits::default()))
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b"0123456789abcdef".contains(&b))
}

// ---- events ------------------------------------------------------------------------------------

/// Credentials a client (not the adapter, which redacts its own) may put in values.
const PLANTED: [&str; 4] = ["hunter2", "sigvalue", "amzsig", "bearertok"];
const SECRET_TARGET: &str =
    "https://bob:hunter2@api.test/q?sig=sigvalue&X-Amz-Signature=amzsig&q=cats";

#[test]
fn credentials_in_values_are_removed_from_records_and_rejection_copies_and_counted() {
    let attributes = with_str(good_event_attributes(), attr::TOOL_TARGET, SECRET_TARGET);
    let attributes = with_str(
        attributes,
        attr::ERROR_TYPE,
        "Authorization: Bearer bearertok",
    );
    let out = traces(&request(vec![event_with(attributes.clone())]));
    assert_eq!(out.events.len(), 1, "{:?}", out.rejections);
    let record = &out.events[0];
    assert_eq!(
        record.tool_target,
        "https://REDACTED@api.test/q?sig=REDACTED&X-Amz-Signature=REDACTED&q=cats"
    );
    let error_type = record.error_type.clone().unwrap_or_default();
    assert!(!error_type.contains("bearertok"), "{error_type}");
    assert_eq!(out.redacted, 2);

    // Refused (an unknown class): the copy and the detail keep no credential either.
    let refused = with_str(attributes, attr::OUTCOME_CLASS, "maybe");
    let out = traces(&request(vec![event_with(refused)]));
    assert_eq!(out.rejections.len(), 1);
    let rejection = &out.rejections[0];
    let copy = String::from_utf8_lossy(&rejection.input);
    for secret in PLANTED {
        assert!(!copy.contains(secret), "{secret} in the copy {copy}");
    }
    assert!(copy.contains("REDACTED@api.test"), "{copy}");
    assert!(out.redacted >= 2, "{}", out.redacted);
}

#[test]
fn a_status_code_wider_than_16_bits_is_refused_here_not_later_by_the_compactor() {
    let wide = with_int(
        good_event_attributes(),
        attr::HTTP_STATUS_CODE,
        3_000_000_000,
    );
    let out = traces(&request(vec![event_with(wide), good_event()]));
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.rejections.len(), 1);
    assert_eq!(out.rejections[0].reason, RejectReason::OutOfRange);
    // Every record the collector accepts, the compactor's decoder stores as a row.
    let record = out.events[0].encode_to_vec();
    let source = candor_records::rows::SourceRecord {
        topic: candor_records::tables::Table::OutcomeEvents,
        partition: 0,
        offset: 0,
        timestamp_ms: None,
        payload: Some(record),
        generation: 0,
    };
    let bounds = candor_records::rows::TimeBounds {
        late_after_micros: i64::MAX,
        future_after_micros: i64::MAX,
    };
    let (_, row) = candor_records::rows::decode(&source, &bounds, "test");
    assert!(
        matches!(row, candor_records::rows::Row::Event(_)),
        "{row:?}"
    );
}

#[test]
fn an_undecodable_body_keeps_its_bytes_but_not_its_credentials() {
    let mut body = vec![0xff, 0x00];
    body.extend_from_slice(SECRET_TARGET.as_bytes());
    body.extend_from_slice(&[0xfe, 0x0a]);
    let (kept, redacted) = redact_bytes(&body);
    let text = String::from_utf8_lossy(&kept);
    for secret in PLANTED {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert_eq!(
        (&kept[..2], &kept[kept.len() - 2..]),
        (&body[..2], &body[body.len() - 2..])
    );
    assert_eq!(redacted, 1);
}

#[test]
fn a_good_access_failure_event_becomes_one_complete_record() {
    let out = traces(&request(vec![good_event()]));
    assert!(
        out.rejections.is_empty(),
        "good access_failure: rejected {:?}",
        out.rejections
    );
    assert_eq!(out.events.len(), 1, "good access_failure: one record");
    let record = &out.events[0];
    assert!(
        is_hex(&record.event_id, 32),
        "good access_failure: event_id {:?}",
        record.event_id
    );
    let expected = OutcomeEvent {
        schema_version: 1,
        event_id: record.event_id.clone(),
        trace_id: "01".repeat(16),
        span_id: "02".repeat(8),
        event_time_unix_nano: EVENT_TIME,
        service_name: "checkout".to_owned(),
        service_instance_id: "i-1".to_owned(),
        outcome_class: "access_failure".to_owned(),
        tool_name: "search".to_owned(),
        tool_target: TARGET.to_owned(),
        failure_kind: "server_error".to_owned(),
        retry_action: "retry".to_owned(),
        retry_attempt: 1,
        retry_max_attempts: 3,
        retry_backoff_ms: Some(100),
        http_status_code: Some(503),
        error_type: Some("503".to_owned()),
        partial_returned: None,
        partial_expected: None,
        coverage: None,
        dropped: None,
        authority: Some("svc".to_owned()),
        received_time_unix_nano: RECEIVED_TIME,
        collector_id: COLLECTOR.to_owned(),
        source: Some("adapter".to_owned()),
        ..OutcomeEvent::default()
    };
    assert_eq!(record, &expected, "good access_failure: every field");
    assert_eq!(
        record.schema_version, RECORD_SCHEMA_VERSION,
        "good access_failure: schema version"
    );
    assert_eq!(
        (out.outcome_events_seen, out.ignored_spans),
        (1, 0),
        "good access_failure: counters"
    );
}

#[test]
fn a_good_partial_event_becomes_a_record_with_its_extent() {
    let out = traces(&request(vec![event_with(good_partial_attributes())]));
    assert!(
        out.rejections.is_empty(),
        "good partial: rejected {:?}",
        out.rejections
    );
    assert_eq!(out.events.len(), 1, "good partial: one record");
    let record = &out.events[0];
    assert_eq!(record.outcome_class, "partial", "good partial: class");
    assert_eq!(record.failure_kind, "declared_total", "good partial: kind");
    assert_eq!(
        record.retry_action, "accept_partial",
        "good partial: action"
    );
    assert_eq!(record.partial_returned, Some(3), "good partial: returned");
    assert_eq!(record.partial_expected, Some(10), "good partial: expected");
    assert_eq!(
        record.coverage.as_deref(),
        Some("items 1-3 of 10"),
        "good partial: coverage"
    );
    assert_eq!(
        record.dropped.as_deref(),
        Some("7 item(s)"),
        "good partial: dropped"
    );
    assert_eq!(record.retry_backoff_ms, None, "good partial: no backoff");
    assert_eq!(record.http_status_code, None, "good partial: no status");
}

fn only_event_id(
    request: &ExportTraceServiceRequest,
    received: &Received<'_>,
    case: &str,
) -> String {
    let out = extracted(request, received);
    assert_eq!(
        out.events.len(),
        1,
        "{case}: one record, rejections {:?}",
        out.rejections
    );
    out.events[0].event_id.clone()
}

#[test]
fn event_id_is_deterministic_from_the_content() {
    let limits = Limits::default();
    let base = only_event_id(&request(vec![good_event()]), &received(&limits), "base");
    let again = only_event_id(&request(vec![good_event()]), &received(&limits), "again");
    assert_eq!(base, again, "same request twice: same id");

    let later = Received {
        collector_id: "c-2",
        time_unix_nano: RECEIVED_TIME + 5,
        limits: &limits,
        derivation: &DERIVATION,
    };
    let retried = only_event_id(
        &request(vec![good_event()]),
        &later,
        "retry to another collector",
    );
    assert_eq!(
        base, retried,
        "a retried export received elsewhere keeps its id"
    );

    let changed = event_with(with_str(good_event_attributes(), attr::AUTHORITY, "svc-2"));
    let changed = only_event_id(
        &request(vec![changed]),
        &received(&limits),
        "changed attribute",
    );
    assert_ne!(base, changed, "one attribute value changed: new id");

    let mut moved = good_event();
    moved.time_unix_nano += 1;
    let moved = only_event_id(&request(vec![moved]), &received(&limits), "changed time");
    assert_ne!(base, moved, "event time changed: new id");

    // The content is fed with its structure: the same bytes split otherwise between key and
    // value, or the same digits as another type, are other content.
    let split = |key: &str, value: &str| {
        let event = event_with(with_str(good_event_attributes(), key, value));
        only_event_id(&request(vec![event]), &received(&limits), key)
    };
    assert_ne!(
        split("x.a", "bc"),
        split("x.ab", "c"),
        "the same bytes split otherwise between key and value: new id"
    );
    let as_int = event_with(with_int(good_event_attributes(), "x.extra", 7));
    let as_int = only_event_id(&request(vec![as_int]), &received(&limits), "int");
    let as_text = event_with(with_str(good_event_attributes(), "x.extra", "7"));
    let as_text = only_event_id(&request(vec![as_text]), &received(&limits), "text");
    assert_ne!(
        as_int, as_text,
        "the same digits as an int and as a string: new id"
    );
    assert_ne!(base, as_int, "an extra attribute: new id");

    let two_spans = request_of(
        Some(service_resource()),
        vec![
            span_of(&TRACE_ID, &SPAN_ID, vec![good_event()]),
            span_of(&TRACE_ID, &OTHER_SPAN_ID, vec![good_event()]),
        ],
    );
    let out = traces(&two_spans);
    assert_eq!(out.events.len(), 2, "two spans: two records");
    assert_ne!(
        out.events[0].event_id, out.events[1].event_id,
        "identical events in two spans: different ids"
    );
}

struct Case {
    name: &'static str,
    bad: Span,
    reason: RejectReason,
    mentions: &'static str,
}

fn bad_event(attributes: Vec<KeyValue>) -> Span {
    span_of(&TRACE_ID, &OTHER_SPAN_ID, vec![event_with(attributes)])
}

fn rejection_cases() -> Vec<Case> {
    let good = good_event_attributes;
    let mut twice = good();
    twice.push(kv_str(attr::OUTCOME_CLASS, "access_failure"));
    let mut timeless = good_event();
    timeless.time_unix_nano = 0;
    let crowd: Vec<KeyValue> = (0..10_000)
        .map(|i| kv_int(&format!("extra.{i}"), i))
        .collect();
    use RejectReason as R;
    vec![
        Case {
            name: "missing class",
            bad: bad_event(without(good(), attr::OUTCOME_CLASS)),
            reason: R::MissingAttribute,
            mentions: attr::OUTCOME_CLASS,
        },
        Case {
            name: "unknown class",
            bad: bad_event(with_str(good(), attr::OUTCOME_CLASS, "maybe")),
            reason: R::UnknownClass,
            mentions: attr::OUTCOME_CLASS,
        },
        Case {
            name: "differently cased class",
            bad: bad_event(with_str(good(), attr::OUTCOME_CLASS, "Access_Failure")),
            reason: R::UnknownClass,
            mentions: attr::OUTCOME_CLASS,
        },
        Case {
            name: "class success",
            bad: bad_event(with_str(good(), attr::OUTCOME_CLASS, "success")),
            reason: R::ClassNotAllowed,
            mentions: "success",
        },
        Case {
            name: "unknown kind",
            bad: bad_event(with_str(good(), attr::FAILURE_KIND, "melted")),
            reason: R::UnknownKind,
            mentions: attr::FAILURE_KIND,
        },
        Case {
            name: "unknown action",
            bad: bad_event(with_str(good(), attr::RETRY_ACTION, "again")),
            reason: R::UnknownAction,
            mentions: attr::RETRY_ACTION,
        },
        Case {
            name: "partial retried",
            bad: bad_event(with_str(
                good_partial_attributes(),
                attr::RETRY_ACTION,
                "retry",
            )),
            reason: R::Inconsistent,
            mentions: "partial",
        },
        Case {
            name: "access_failure with size_cap",
            bad: bad_event(with_str(good(), attr::FAILURE_KIND, "size_cap")),
            reason: R::Inconsistent,
            mentions: "size_cap",
        },
        Case {
            name: "attempt as a string",
            bad: bad_event(with_str(good(), attr::RETRY_ATTEMPT, "1")),
            reason: R::WrongType,
            mentions: attr::RETRY_ATTEMPT,
        },
        Case {
            name: "attempt 0",
            bad: bad_event(with_int(good(), attr::RETRY_ATTEMPT, 0)),
            reason: R::OutOfRange,
            mentions: attr::RETRY_ATTEMPT,
        },
        Case {
            name: "attempt 4 of 3",
            bad: bad_event(with_int(good(), attr::RETRY_ATTEMPT, 4)),
            reason: R::OutOfRange,
            mentions: attr::RETRY_MAX_ATTEMPTS,
        },
        Case {
            name: "negative status",
            bad: bad_event(with_int(good(), attr::HTTP_STATUS_CODE, -1)),
            reason: R::OutOfRange,
            mentions: attr::HTTP_STATUS_CODE,
        },
        Case {
            name: "retry without backoff",
            bad: bad_event(without(good(), attr::RETRY_BACKOFF_MS)),
            reason: R::MissingAttribute,
            mentions: attr::RETRY_BACKOFF_MS,
        },
        Case {
            name: "5000-byte target",
            bad: bad_event(with_str(good(), attr::TOOL_TARGET, &"x".repeat(5000))),
            reason: R::ValueTooLong,
            mentions: attr::TOOL_TARGET,
        },
        Case {
            name: "10000 attributes",
            bad: bad_event(crowd),
            reason: R::TooManyAttributes,
            mentions: "10000",
        },
        Case {
            name: "class twice",
            bad: bad_event(twice),
            reason: R::DuplicateAttribute,
            mentions: attr::OUTCOME_CLASS,
        },
        Case {
            name: "event time 0",
            bad: span_of(&TRACE_ID, &OTHER_SPAN_ID, vec![timeless]),
            reason: R::MissingTime,
            mentions: "time",
        },
        Case {
            name: "3-byte trace id",
            bad: span_of(&[1, 2, 3], &OTHER_SPAN_ID, vec![good_event()]),
            reason: R::InvalidTraceId,
            mentions: "3 bytes",
        },
        Case {
            name: "all-zero span id",
            bad: span_of(&TRACE_ID, &[0; 8], vec![good_event()]),
            reason: R::InvalidSpanId,
            mentions: "span id",
        },
    ]
}

#[test]
fn each_bad_event_is_rejected_for_its_reason_and_its_neighbour_still_passes() {
    for case in rejection_cases() {
        let name = case.name;
        let good = span_of(&TRACE_ID, &SPAN_ID, vec![good_event()]);
        let out = traces(&request_of(Some(service_resource()), vec![good, case.bad]));
        assert_eq!(out.outcome_events_seen, 2, "{name}: events seen");
        assert_eq!(
            out.rejections.len(),
            1,
            "{name}: one rejection, got {:?}",
            out.rejections
        );
        let rejection = &out.rejections[0];
        assert_eq!(
            rejection.reason, case.reason,
            "{name}: reason (detail {:?})",
            rejection.detail
        );
        assert!(
            rejection.detail.contains(case.mentions),
            "{name}: detail {:?} should mention {:?}",
            rejection.detail,
            case.mentions
        );
        assert_eq!(rejection.signal, Signal::Traces, "{name}: signal");
        assert_eq!(rejection.service_name, "checkout", "{name}: service");
        assert_eq!(
            out.events.len(),
            1,
            "{name}: the good neighbour still becomes a record"
        );
        assert_eq!(
            out.events[0].span_id,
            hex(&SPAN_ID),
            "{name}: the record is the good neighbour"
        );
    }
}

#[test]
fn hostile_but_legal_targets_are_stored_verbatim() {
    for target in [
        "../../etc/passwd",
        "检索/😀",
        "line one\nline two \"quoted\" 'single'",
    ] {
        let out = traces(&request(vec![event_with(with_str(
            good_event_attributes(),
            attr::TOOL_TARGET,
            target,
        ))]));
        assert!(
            out.rejections.is_empty(),
            "target {target:?}: rejected {:?}",
            out.rejections
        );
        assert_eq!(out.events.len(), 1, "target {target:?}: one record");
        assert_eq!(
            out.events[0].tool_target, target,
            "target {target:?}: stored verbatim"
        );
    }
}

#[test]
fn events_beyond_the_request_limit_are_rejected_one_by_one() {
    let limits = Limits {
        max_events_per_request: 2,
        ..Limits::default()
    };
    let events: Vec<span::Event> = (0..5)
        .map(|i| span::Event {
            time_unix_nano: EVENT_TIME + i,
            ..good_event()
        })
        .collect();
    let out = extracted(&request(events), &received(&limits));
    assert_eq!(out.events.len(), 2, "too many events: the first two pass");
    assert_eq!(
        out.rejections.len(),
        1,
        "too many events: one rejection for all of them"
    );
    assert_eq!(
        out.rejections[0].count, 3,
        "too many events: it stands for three"
    );
    assert!(
        out.rejections
            .iter()
            .all(|r| r.reason == RejectReason::TooManyEvents),
        "too many events: reasons {:?}",
        out.rejections
    );
    assert_eq!(out.outcome_events_seen, 5, "too many events: all seen");
}

#[test]
fn the_rejected_copy_is_bounded_and_otherwise_json() {
    let bad = || {
        request(vec![event_with(with_str(
            good_event_attributes(),
            attr::OUTCOME_CLASS,
            "maybe",
        ))])
    };

    let small = Limits {
        max_rejected_copy_bytes: 64,
        ..Limits::default()
    };
    let out = extracted(&bad(), &received(&small));
    assert_eq!(out.rejections.len(), 1, "64-byte bound: one rejection");
    assert!(
        out.rejections[0].input.len() <= 64,
        "64-byte bound: copy of {} bytes",
        out.rejections[0].input.len()
    );
    assert!(
        out.rejections[0].input_truncated,
        "64-byte bound: marked truncated"
    );

    let out = traces(&bad());
    assert_eq!(out.rejections.len(), 1, "default bound: one rejection");
    let copy = &out.rejections[0];
    assert!(
        !copy.input_truncated,
        "default bound: a small event is not truncated"
    );
    assert!(
        serde_json::from_slice::<serde_json::Value>(&copy.input).is_ok(),
        "default bound: the copy is JSON"
    );
    let text = String::from_utf8_lossy(&copy.input);
    assert!(
        text.contains(names::OUTCOME_EVENT),
        "default bound: the copy names the event: {text}"
    );
    assert!(
        text.contains("maybe"),
        "default bound: the copy holds the offending value: {text}"
    );
}

#[test]
fn other_spans_and_other_events_are_ignored_and_counted() {
    let exception = span::Event {
        time_unix_nano: EVENT_TIME,
        name: "exception".to_owned(),
        ..Default::default()
    };
    let spans = vec![
        span_of(&TRACE_ID, &SPAN_ID, Vec::new()),
        span_of(&TRACE_ID, &OTHER_SPAN_ID, vec![exception.clone()]),
        span_of(&TRACE_ID, &[4; 8], vec![exception, good_event()]),
    ];
    let out = traces(&request_of(Some(service_resource()), spans));
    assert_eq!(
        out.ignored_spans, 2,
        "ignored: two spans carry no outcome event"
    );
    assert_eq!(
        out.outcome_events_seen, 1,
        "ignored: only the outcome event is seen"
    );
    assert_eq!(out.events.len(), 1, "ignored: one record");
    assert!(
        out.rejections.is_empty(),
        "ignored: an exception event is no rejection: {:?}",
        out.rejections
    );
}

#[test]
fn a_resource_without_service_name_gives_the_unknown_service() {
    let instance_only = Resource {
        attributes: vec![kv_str(resource::SERVICE_INSTANCE_ID, "i-1")],
        ..Default::default()
    };
    for (case, resource) in [
        ("instance only", Some(instance_only)),
        ("no resource", None),
    ] {
        let out = traces(&request_of(
            resource,
            vec![span_of(&TRACE_ID, &SPAN_ID, vec![good_event()])],
        ));
        assert_eq!(out.events.len(), 1, "{case}: one record");
        assert_eq!(
            out.events[0].service_name, UNKNOWN_SERVICE,
            "{case}: service name"
        );
    }
}

// ---- metrics -----------------------------------------------------------------------------------

fn point(class: &str, value: number_data_point::Value) -> NumberDataPoint {
    NumberDataPoint {
        attributes: vec![
            kv_str(attr::OUTCOME_CLASS, class),
            kv_str(attr::TOOL_NAME, "search"),
            kv_str(attr::TOOL_TARGET, TARGET),
        ],
        start_time_unix_nano: POINT_START,
        time_unix_nano: EVENT_TIME,
        value: Some(value),
        ..Default::default()
    }
}

fn count(class: &str, n: i64) -> NumberDataPoint {
    point(class, number_data_point::Value::AsInt(n))
}

fn sum_metric(name: &str, temporality: i32, data_points: Vec<NumberDataPoint>) -> Metric {
    let sum = Sum {
        data_points,
        aggregation_temporality: temporality,
        is_monotonic: true,
    };
    Metric {
        name: name.to_owned(),
        data: Some(metric::Data::Sum(sum)),
        ..Default::default()
    }
}

fn outcomes(temporality: AggregationTemporality, data_points: Vec<NumberDataPoint>) -> Metric {
    sum_metric(names::OUTCOMES_COUNTER, temporality as i32, data_points)
}

fn metrics_of(metrics: Vec<Metric>) -> MetricsExtract {
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(service_resource()),
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    extract_metrics(&request, &received(&Limits::default()))
}

fn four_classes() -> Vec<NumberDataPoint> {
    vec![
        count("success", 5),
        count("empty", 1),
        count("partial", 0),
        count("access_failure", 2),
    ]
}

#[test]
fn a_cumulative_sum_becomes_one_count_per_point() {
    let out = metrics_of(vec![outcomes(
        AggregationTemporality::Cumulative,
        four_classes(),
    )]);
    assert!(
        out.rejections.is_empty(),
        "cumulative: rejected {:?}",
        out.rejections
    );
    assert_eq!(out.points_seen, 4, "cumulative: points seen");
    let got: Vec<(&str, u64)> = out
        .counts
        .iter()
        .map(|c| (c.outcome_class.as_str(), c.value))
        .collect();
    assert_eq!(
        got,
        [
            ("success", 5_u64),
            ("empty", 1),
            ("partial", 0),
            ("access_failure", 2)
        ],
        "cumulative: classes and values"
    );
    for record in &out.counts {
        let class = &record.outcome_class;
        assert_eq!(
            record.temporality,
            Temporality::Cumulative as i32,
            "cumulative {class}: temporality"
        );
        assert_eq!(
            (record.start_time_unix_nano, record.time_unix_nano),
            (POINT_START, EVENT_TIME),
            "cumulative {class}: times"
        );
        assert_eq!(
            (record.tool_name.as_str(), record.tool_target.as_str()),
            ("search", TARGET),
            "cumulative {class}: tool"
        );
        assert_eq!(
            (
                record.service_name.as_str(),
                record.service_instance_id.as_str()
            ),
            ("checkout", "i-1"),
            "cumulative {class}: service"
        );
        assert_eq!(
            (record.received_time_unix_nano, record.collector_id.as_str()),
            (RECEIVED_TIME, COLLECTOR),
            "cumulative {class}: receipt"
        );
        assert_eq!(
            record.schema_version, RECORD_SCHEMA_VERSION,
            "cumulative {class}: schema version"
        );
        assert!(
            is_hex(&record.point_id, 32),
            "cumulative {class}: point_id {:?}",
            record.point_id
        );
    }
}

#[test]
fn a_delta_sum_keeps_its_temporality() {
    let out = metrics_of(vec![outcomes(
        AggregationTemporality::Delta,
        vec![count("success", 7)],
    )]);
    assert_eq!(
        out.counts.len(),
        1,
        "delta: one count, rejections {:?}",
        out.rejections
    );
    assert_eq!(
        out.counts[0].temporality,
        Temporality::Delta as i32,
        "delta: temporality"
    );
}

#[test]
fn a_gauge_of_the_counter_is_one_wrong_metric_type() {
    let gauge = Metric {
        name: names::OUTCOMES_COUNTER.to_owned(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: four_classes(),
        })),
        ..Default::default()
    };
    let out = metrics_of(vec![gauge]);
    assert!(out.counts.is_empty(), "gauge: no counts");
    let reasons: Vec<RejectReason> = out.rejections.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        [RejectReason::WrongMetricType],
        "gauge: one rejection for the metric"
    );
    assert_eq!(out.rejections[0].signal, Signal::Metrics, "gauge: signal");
}

#[test]
fn a_sum_without_temporality_rejects_every_point() {
    let out = metrics_of(vec![sum_metric(
        names::OUTCOMES_COUNTER,
        0,
        vec![count("success", 1), count("empty", 2)],
    )]);
    assert!(out.counts.is_empty(), "unspecified temporality: no counts");
    let reasons: Vec<RejectReason> = out.rejections.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        [RejectReason::UnspecifiedTemporality; 2],
        "unspecified temporality: one per point"
    );
}

#[test]
fn each_bad_point_is_rejected_for_its_reason_and_its_neighbour_still_passes() {
    let mut timeless = count("success", 1);
    timeless.time_unix_nano = 0;
    let cases = [
        (
            "negative count",
            count("success", -1),
            RejectReason::OutOfRange,
        ),
        (
            "double count",
            point("success", number_data_point::Value::AsDouble(1.5)),
            RejectReason::WrongType,
        ),
        (
            "unknown class",
            count("maybe", 1),
            RejectReason::UnknownClass,
        ),
        ("no time", timeless, RejectReason::MissingTime),
    ];
    for (name, bad, reason) in cases {
        let out = metrics_of(vec![outcomes(
            AggregationTemporality::Cumulative,
            vec![count("empty", 3), bad],
        )]);
        assert_eq!(out.points_seen, 2, "{name}: points seen");
        let reasons: Vec<RejectReason> = out.rejections.iter().map(|r| r.reason).collect();
        assert_eq!(reasons, [reason], "{name}: reason");
        assert_eq!(
            out.counts.len(),
            1,
            "{name}: the good neighbour still becomes a count"
        );
        assert_eq!(
            out.counts[0].outcome_class, "empty",
            "{name}: the count is the neighbour"
        );
    }
}

#[test]
fn other_metrics_are_ignored() {
    let out = metrics_of(vec![sum_metric(
        "http.server.requests",
        AggregationTemporality::Cumulative as i32,
        four_classes(),
    )]);
    assert_eq!(out.ignored_metrics, 1, "other metric: ignored");
    assert!(
        out.counts.is_empty() && out.rejections.is_empty(),
        "other metric: nothing extracted {out:?}"
    );
    assert_eq!(out.points_seen, 0, "other metric: no points seen");
}

#[test]
fn point_id_is_deterministic_and_distinct_per_point() {
    let ids = || -> Vec<String> {
        metrics_of(vec![outcomes(
            AggregationTemporality::Cumulative,
            four_classes(),
        )])
        .counts
        .into_iter()
        .map(|c| c.point_id)
        .collect()
    };
    let first = ids();
    assert_eq!(first.len(), 4, "point ids: four counts");
    assert_eq!(first, ids(), "point ids: same request, same ids");
    let distinct: HashSet<&String> = first.iter().collect();
    assert_eq!(distinct.len(), 4, "point ids: one per point {first:?}");
}

// ---- helpers and summary -----------------------------------------------------------------------

fn stub_rejection(reason: RejectReason, detail: &str) -> Rejection {
    Rejection {
        reason,
        detail: detail.to_owned(),
        signal: Signal::Traces,
        service_name: "checkout".to_owned(),
        input: Vec::new(),
        input_truncated: false,
        count: 1,
    }
}

#[test]
fn summarize_counts_by_reason() {
    let rejections = [
        stub_rejection(RejectReason::UnknownClass, "first detail"),
        stub_rejection(RejectReason::UnknownClass, "second detail"),
        stub_rejection(RejectReason::ValueTooLong, "third detail"),
    ];
    let line = summarize(&rejections, "events");
    for part in [
        "rejected 3",
        "unknown_class (2)",
        "value_too_long (1)",
        "first detail",
    ] {
        assert!(
            line.contains(part),
            "summary {line:?} should contain {part:?}"
        );
    }
}

#[test]
fn hex_bounded_and_content_id_behave() {
    assert_eq!(
        hex(&[0x00, 0xab, 0x7f]),
        "00ab7f",
        "hex: lower case, two digits a byte"
    );
    assert_eq!(
        bounded("short", 10),
        "short",
        "bounded: short text unchanged"
    );
    assert_eq!(
        bounded("😀😀", 5),
        "😀…",
        "bounded: cut at a character boundary and marked"
    );
    assert_ne!(
        content_id(&[b"ab".as_slice(), b"c".as_slice()]),
        content_id(&[b"a".as_slice(), b"bc".as_slice()]),
        "content_id: parts are length-prefixed"
    );
    assert!(
        is_hex(&content_id(&[b"x".as_slice()]), 32),
        "content_id: 32 hex characters"
    );
}

// ---- properties --------------------------------------------------------------------------------

fn attribute_key() -> impl Strategy<Value = &'static str> {
    let keys: Vec<&'static str> = names::ALL.iter().copied().chain(["other"]).collect();
    prop::sample::select(keys)
}

fn attribute_value() -> impl Strategy<Value = any_value::Value> {
    let words: Vec<&'static str> = OutcomeClass::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(candor_schema::FailureKind::ALL.iter().map(|k| k.as_str()))
        .chain(RetryAction::ALL.iter().map(|a| a.as_str()))
        .collect();
    prop_oneof![
        "[a-z_]{0,40}".prop_map(any_value::Value::StringValue),
        prop::sample::select(words).prop_map(|w| any_value::Value::StringValue(w.to_owned())),
        (-5i64..10).prop_map(any_value::Value::IntValue),
        any::<bool>().prop_map(any_value::Value::BoolValue),
    ]
}

/// Either a random attribute list, or a good one with random attributes overwritten or added.
fn attribute_list() -> impl Strategy<Value = Vec<KeyValue>> {
    (
        any::<bool>(),
        prop::collection::vec((attribute_key(), attribute_value()), 0..12),
    )
        .prop_map(|(from_good, pairs)| {
            let mut attributes = if from_good {
                good_event_attributes()
            } else {
                Vec::new()
            };
            for (key, value) in pairs {
                if from_good {
                    attributes = with(attributes, key, value);
                } else {
                    attributes.push(kv(key, value));
                }
            }
            attributes
        })
}

proptest! {
    #[test]
    fn every_outcome_event_is_a_record_or_a_rejection(
        lists in prop::collection::vec((attribute_list(), 0u64..3), 0..6),
        trace_id in prop_oneof![Just(TRACE_ID.to_vec()), prop::collection::vec(any::<u8>(), 0..20)],
    ) {
        let events: Vec<span::Event> = lists
            .into_iter()
            .map(|(attributes, tick)| span::Event {
                time_unix_nano: if tick == 0 { 0 } else { EVENT_TIME + tick },
                ..event_with(attributes)
            })
            .collect();
        let sent = events.len() as u64;
        let out = traces(&request_of(Some(service_resource()), vec![span_of(&trace_id, &SPAN_ID, events)]));
        prop_assert_eq!(out.outcome_events_seen, sent);
        prop_assert_eq!(out.events.len() as u64 + rejected_count(&out.rejections), out.outcome_events_seen);
    }

    #[test]
    fn every_outcomes_point_is_a_record_or_a_rejection(
        points in prop::collection::vec((attribute_list(), -3i64..5), 0..6),
    ) {
        let points: Vec<NumberDataPoint> = points
            .into_iter()
            .map(|(attributes, n)| NumberDataPoint { attributes, ..count("success", n) })
            .collect();
        let sent = points.len() as u64;
        let out = metrics_of(vec![outcomes(AggregationTemporality::Delta, points)]);
        prop_assert_eq!(out.points_seen, sent);
        prop_assert_eq!(out.counts.len() as u64 + rejected_count(&out.rejections), out.points_seen);
    }
}

#[test]
fn an_event_sent_as_json_gets_the_id_it_gets_as_protobuf() {
    let sent = request(vec![good_event()]);
    let json = serde_json::to_vec(&sent).unwrap();
    let from_json: ExportTraceServiceRequest =
        crate::ingest::decode::decode_request(crate::ingest::decode::Encoding::Json, &json)
            .unwrap();
    let limits = Limits::default();
    assert_eq!(
        only_event_id(&sent, &received(&limits), "protobuf"),
        only_event_id(&from_json, &received(&limits), "json"),
    );
}

fn export_interval_gauge(value: number_data_point::Value) -> Metric {
    Metric {
        name: names::EXPORT_INTERVAL_GAUGE.to_owned(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: vec![NumberDataPoint {
                time_unix_nano: EVENT_TIME,
                value: Some(value),
                ..Default::default()
            }],
        })),
        ..Default::default()
    }
}

#[test]
fn the_export_interval_gauge_is_carried_by_every_point_of_its_export() {
    use number_data_point::Value::{AsDouble, AsInt};
    for (case, value, expected) in [
        ("ten seconds", AsDouble(10.0), Some(10_000)),
        ("a fraction", AsDouble(0.25), Some(250)),
        ("an int", AsInt(30), Some(30_000)),
        ("the final export", AsDouble(0.0), Some(0)),
    ] {
        let out = metrics_of(vec![
            export_interval_gauge(value),
            outcomes(AggregationTemporality::Cumulative, four_classes()),
        ]);
        assert!(out.rejections.is_empty(), "{case}: {:?}", out.rejections);
        assert_eq!(out.ignored_metrics, 0, "{case}: the gauge is not ignored");
        assert_eq!(out.counts.len(), 4, "{case}");
        for count in &out.counts {
            assert_eq!(count.export_interval_ms, expected, "{case}");
        }
    }
    let without = metrics_of(vec![outcomes(
        AggregationTemporality::Cumulative,
        four_classes(),
    )]);
    assert!(
        without
            .counts
            .iter()
            .all(|count| count.export_interval_ms.is_none())
    );
}

#[test]
fn a_bad_export_interval_is_refused_and_its_export_points_are_kept_without_one() {
    use number_data_point::Value::{AsDouble, AsInt};
    let not_a_gauge = sum_metric(
        names::EXPORT_INTERVAL_GAUGE,
        AggregationTemporality::Cumulative as i32,
        vec![count("success", 1)],
    );
    for (case, gauge, reason) in [
        (
            "negative",
            export_interval_gauge(AsDouble(-1.0)),
            RejectReason::OutOfRange,
        ),
        (
            "not a number",
            export_interval_gauge(AsDouble(f64::NAN)),
            RejectReason::OutOfRange,
        ),
        (
            "past a day",
            export_interval_gauge(AsInt(86_401)),
            RejectReason::OutOfRange,
        ),
        ("a sum", not_a_gauge, RejectReason::WrongMetricType),
    ] {
        let out = metrics_of(vec![
            gauge,
            outcomes(AggregationTemporality::Cumulative, four_classes()),
        ]);
        let reasons: Vec<RejectReason> = out.rejections.iter().map(|r| r.reason).collect();
        assert_eq!(reasons, [reason], "{case}");
        assert!(
            out.rejections[0]
                .detail
                .contains(names::EXPORT_INTERVAL_GAUGE),
            "{case}: {}",
            out.rejections[0].detail
        );
        assert_eq!(out.counts.len(), 4, "{case}: the points are kept");
        assert!(
            out.counts
                .iter()
                .all(|count| count.export_interval_ms.is_none()),
            "{case}"
        );
    }
}

// ---- logs --------------------------------------------------------------------------------------

fn log_of(event: &span::Event, trace_id: &[u8], span_id: &[u8]) -> LogRecord {
    LogRecord {
        time_unix_nano: event.time_unix_nano,
        observed_time_unix_nano: event.time_unix_nano + 1_000,
        event_name: event.name.clone(),
        attributes: event.attributes.clone(),
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        ..Default::default()
    }
}

fn logs_request(records: Vec<LogRecord>) -> ExportLogsServiceRequest {
    use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(service_resource()),
            scope_logs: vec![ScopeLogs {
                log_records: records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The events of a logs request decoded from the encoder's bytes, its rejections, and how many
/// outcome events and other records it held.
fn log_events(request: &ExportLogsServiceRequest) -> (Vec<OutcomeEvent>, Vec<Rejection>, u64, u64) {
    let limits = Limits::default();
    let out = extract_logs(request, &received(&limits));
    let events = decoded(&out.events);
    (events, out.rejections, out.outcome_events_seen, out.ignored)
}

#[test]
fn a_log_based_outcome_event_is_the_same_record_as_the_span_event() {
    let spans = request(vec![good_event()]);
    let from_span = extracted(&spans, &received(&Limits::default()));
    let logs = logs_request(vec![log_of(&good_event(), &TRACE_ID, &SPAN_ID)]);
    let (from_log, rejections, seen, ignored) = log_events(&logs);
    assert!(rejections.is_empty(), "{rejections:?}");
    assert_eq!(
        from_log, from_span.events,
        "field for field, the id included"
    );
    assert_eq!((seen, ignored), (1, 0));
}

#[test]
fn a_log_based_event_without_a_time_takes_the_observed_time() {
    let mut record = log_of(&good_event(), &TRACE_ID, &SPAN_ID);
    record.time_unix_nano = 0;
    let observed = record.observed_time_unix_nano;
    let (events, rejections, _, _) = log_events(&logs_request(vec![record]));
    assert!(rejections.is_empty(), "{rejections:?}");
    assert_eq!(events[0].event_time_unix_nano, observed);
}

#[test]
fn other_log_records_are_ignored_and_a_bad_log_based_event_is_rejected_as_a_log() {
    let plain = LogRecord {
        time_unix_nano: EVENT_TIME,
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue("hello".into())),
        }),
        ..Default::default()
    };
    let outside_a_span = log_of(&good_event(), &[], &[]);
    let unknown_class = log_of(
        &event_with(with_str(
            good_event_attributes(),
            attr::OUTCOME_CLASS,
            "maybe",
        )),
        &TRACE_ID,
        &SPAN_ID,
    );
    let (events, rejections, seen, ignored) =
        log_events(&logs_request(vec![plain, outside_a_span, unknown_class]));
    assert!(events.is_empty());
    assert_eq!((seen, ignored), (2, 1));
    let reasons: Vec<(RejectReason, Signal)> = rejections
        .iter()
        .map(|rejection| (rejection.reason, rejection.signal))
        .collect();
    assert_eq!(
        reasons,
        [
            (RejectReason::InvalidTraceId, Signal::Logs),
            (RejectReason::UnknownClass, Signal::Logs)
        ]
    );
}

// ---- forensic fields ---------------------------------------------------------------------------

/// A call that failed twice: a retried attempt, then the one that ended it, with the evidence
/// of the last response, on a span whose status is ERROR with the failure's message.
fn failed_call_span(message: &str) -> Span {
    let retried = good_event();
    let ending = event_with(
        [
            without(
                with_str(good_event_attributes(), attr::RETRY_ACTION, "exhausted"),
                attr::RETRY_BACKOFF_MS,
            ),
            vec![
                kv_str(attr::EVIDENCE_KIND, "request_id"),
                kv_str(attr::EVIDENCE_VALUE, "req-504"),
            ],
        ]
        .concat(),
    );
    let mut span = span_of(&TRACE_ID, &SPAN_ID, vec![retried, ending]);
    span.status = Some(opentelemetry_proto::tonic::trace::v1::Status {
        message: message.to_owned(),
        code: opentelemetry_proto::tonic::trace::v1::status::StatusCode::Error as i32,
    });
    span
}

#[test]
fn the_event_that_ends_a_failed_call_carries_the_spans_message_redacted_and_the_evidence() {
    let out = traces(&request_of(
        Some(service_resource()),
        vec![failed_call_span(
            "HTTP 503 upstream said access_token=abc123 try later",
        )],
    ));
    assert!(out.rejections.is_empty(), "{:?}", out.rejections);
    let [retried, ending] = out.events.as_slice() else {
        panic!("two events: {:?}", out.events);
    };
    assert_eq!(retried.retry_action, "retry");
    assert_eq!(
        (
            &retried.error_message,
            &retried.evidence_kind,
            &retried.evidence_value
        ),
        (&None, &None, &None),
        "an attempt that was retried did not end the call"
    );
    assert_eq!(
        ending.error_message.as_deref(),
        Some("HTTP 503 upstream said access_token=REDACTED try later")
    );
    assert_eq!(ending.evidence_kind.as_deref(), Some("request_id"));
    assert_eq!(ending.evidence_value.as_deref(), Some("req-504"));
    assert_eq!(
        (
            &ending.exception_type,
            &ending.rpc_status_code,
            &ending.tool_call_id
        ),
        (&None, &None, &None),
        "an adapter's span says none of these"
    );
    assert_eq!(out.redacted, 1);
}

#[test]
fn a_message_past_the_value_limit_is_cut_on_a_character_boundary() {
    let limits = Limits {
        max_value_bytes: 64,
        ..Limits::default()
    };
    let message = "é".repeat(100);
    let out = extracted(
        &request_of(Some(service_resource()), vec![failed_call_span(&message)]),
        &received(&limits),
    );
    assert!(out.rejections.is_empty(), "{:?}", out.rejections);
    let kept = out.events[1].error_message.as_deref().expect("a message");
    assert_eq!(kept, format!("{}…", "é".repeat(32)));
}

#[test]
fn evidence_of_an_unknown_kind_or_half_of_it_is_refused_with_its_reason() {
    let with_evidence = |evidence: Vec<KeyValue>| {
        event_with(
            [
                without(
                    with_str(good_event_attributes(), attr::RETRY_ACTION, "exhausted"),
                    attr::RETRY_BACKOFF_MS,
                ),
                evidence,
            ]
            .concat(),
        )
    };
    let unknown = with_evidence(vec![
        kv_str(attr::EVIDENCE_KIND, "hunch"),
        kv_str(attr::EVIDENCE_VALUE, "x"),
    ]);
    let kind_only = with_evidence(vec![kv_str(attr::EVIDENCE_KIND, "receipt")]);
    let value_only = with_evidence(vec![kv_str(attr::EVIDENCE_VALUE, "r-1")]);
    let out = traces(&request(vec![unknown, kind_only, value_only]));
    assert!(out.events.is_empty(), "{:?}", out.events);
    let reasons: Vec<RejectReason> = out.rejections.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        [
            RejectReason::UnknownKind,
            RejectReason::MissingAttribute,
            RejectReason::MissingAttribute
        ]
    );
    let details: Vec<&str> = out.rejections.iter().map(|r| r.detail.as_str()).collect();
    assert!(
        details[0].starts_with(attr::EVIDENCE_KIND) && details[0].contains("hunch"),
        "{details:?}"
    );
    assert_eq!(
        details[1..],
        [
            format!(
                "{} is missing where {} is present",
                attr::EVIDENCE_VALUE,
                attr::EVIDENCE_KIND
            ),
            format!(
                "{} is missing where {} is present",
                attr::EVIDENCE_KIND,
                attr::EVIDENCE_VALUE
            ),
        ]
    );
}

// ---- acceptances on the counter ------------------------------------------------------------------

#[test]
fn an_acceptance_is_counted_as_accepted_and_never_beside_a_class() {
    let with_state = |class: Option<&str>, state: Option<&str>| {
        let mut point = count("success", 3);
        point.attributes.retain(|kv| kv.key != attr::OUTCOME_CLASS);
        point
            .attributes
            .extend(class.map(|c| kv_str(attr::OUTCOME_CLASS, c)));
        point
            .attributes
            .extend(state.map(|s| kv_str(attr::LIFECYCLE_STATE, s)));
        point
    };
    let out = metrics_of(vec![outcomes(
        AggregationTemporality::Cumulative,
        vec![
            with_state(None, Some("accepted")),
            with_state(Some("success"), Some("accepted")),
            with_state(None, Some("running")),
            with_state(None, Some("dreaming")),
            with_state(None, None),
        ],
    )]);
    let classes: Vec<(&str, u64)> = out
        .counts
        .iter()
        .map(|c| (c.outcome_class.as_str(), c.value))
        .collect();
    assert_eq!(classes, [("accepted", 3)]);
    let reasons: Vec<RejectReason> = out.rejections.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        [
            RejectReason::Inconsistent,
            RejectReason::ClassNotAllowed,
            RejectReason::UnknownKind,
            RejectReason::MissingAttribute,
        ],
        "{:?}",
        out.rejections
    );
}

// ---- tool.lifecycle ------------------------------------------------------------------------

fn lifecycle_attributes(state: &str) -> Vec<KeyValue> {
    vec![
        kv_str(attr::TOOL_NAME, "export"),
        kv_str(attr::TOOL_TARGET, "http://export.test/v1/jobs?token=s3cret"),
        kv_str(attr::OPERATION_ID, "op-7"),
        kv_str(attr::LIFECYCLE_STATE, state),
        kv_str(attr::PROVENANCE_SOURCE_SYSTEM, "export.test"),
        kv_str(attr::PROVENANCE_ACTOR, "billing-agent"),
        kv_str(attr::PROVENANCE_ADAPTER, "candor-adapter/0.1.0"),
    ]
}

fn lifecycle_with(attributes: Vec<KeyValue>) -> span::Event {
    span::Event {
        time_unix_nano: EVENT_TIME,
        name: names::LIFECYCLE_EVENT.to_owned(),
        attributes,
        dropped_attributes_count: 0,
    }
}

fn completed_attributes() -> Vec<KeyValue> {
    let attributes = lifecycle_attributes("completed");
    let attributes = with_str(attributes, attr::EVIDENCE_KIND, "query");
    with_str(
        attributes,
        attr::EVIDENCE_VALUE,
        "http://export.test/v1/operations/7",
    )
}

#[test]
fn a_lifecycle_event_becomes_one_operation_record_with_its_provenance() {
    let request = request(vec![lifecycle_with(completed_attributes())]);
    let limits = Limits::default();
    let out = extract_traces(&request, &received(&limits));
    assert!(out.rejections.is_empty(), "{:?}", out.rejections);
    assert_eq!(out.lifecycle_events_seen, 1);
    assert_eq!(out.outcome_events_seen, 0);
    assert_eq!(
        out.ignored, 0,
        "a span with a state is an adapter's, not ignored"
    );
    let [record] = out.operations.as_slice() else {
        panic!("{:?}", out.operations);
    };
    assert_eq!(record.schema_version, RECORD_SCHEMA_VERSION);
    assert!(is_hex(&record.event_id, 32), "{}", record.event_id);
    assert_eq!(record.trace_id, hex(&TRACE_ID));
    assert_eq!(record.span_id, hex(&SPAN_ID));
    assert_eq!(record.event_time_unix_nano, EVENT_TIME);
    assert_eq!(
        (
            record.service_name.as_str(),
            record.service_instance_id.as_str()
        ),
        ("checkout", "i-1")
    );
    assert_eq!(record.operation_id, "op-7");
    assert_eq!(record.lifecycle_state, "completed");
    assert_eq!(record.evidence_kind.as_deref(), Some("query"));
    assert_eq!(record.source_system, "export.test");
    assert_eq!(record.actor.as_deref(), Some("billing-agent"));
    assert_eq!(record.adapter, "candor-adapter/0.1.0");
    assert_eq!(
        record.tool_target, "http://export.test/v1/jobs?token=REDACTED",
        "the target is redacted like an outcome event's"
    );
    assert_eq!(out.redacted, 1);
    let encoded = crate::sink::kafka::encode::operation_event(record);
    assert_eq!(
        encoded.key, b"op-7",
        "keyed by operation: its states stay in order"
    );
    assert_eq!(
        OperationEvent::decode(encoded.payload.as_slice()).unwrap(),
        *record
    );
}

#[test]
fn a_completion_keeps_the_resource_it_names_redacted_with_its_version() {
    let attributes = with_str(
        completed_attributes(),
        attr::RESOURCE_ID,
        "https://bob:hunter2@store.test/exports/7",
    );
    let attributes = with_str(attributes, attr::RESOURCE_VERSION, "\"v7\"");
    let request = request(vec![
        lifecycle_with(attributes),
        lifecycle_with(completed_attributes()),
    ]);
    let limits = Limits::default();
    let out = extract_traces(&request, &received(&limits));
    assert!(out.rejections.is_empty(), "{:?}", out.rejections);
    let [named, unnamed] = out.operations.as_slice() else {
        panic!("{:?}", out.operations);
    };
    assert_eq!(
        named.resource_id.as_deref(),
        Some("https://REDACTED@store.test/exports/7")
    );
    assert_eq!(named.resource_version.as_deref(), Some("\"v7\""));
    assert_eq!(
        (&unnamed.resource_id, &unnamed.resource_version),
        (&None, &None)
    );
    assert_eq!(out.redacted, 3, "both targets and the resource id");
}

#[test]
fn each_bad_lifecycle_event_is_refused_for_its_reason() {
    let cases = [
        (
            "unknown state",
            with_str(
                lifecycle_attributes("accepted"),
                attr::LIFECYCLE_STATE,
                "done",
            ),
            RejectReason::UnknownKind,
        ),
        (
            "no operation id",
            without(lifecycle_attributes("running"), attr::OPERATION_ID),
            RejectReason::MissingAttribute,
        ),
        (
            "a completion without evidence",
            lifecycle_attributes("completed"),
            RejectReason::MissingAttribute,
        ),
        (
            "a failure without its reason",
            lifecycle_attributes("failed"),
            RejectReason::MissingAttribute,
        ),
        (
            "half of the evidence",
            without(completed_attributes(), attr::EVIDENCE_VALUE),
            RejectReason::MissingAttribute,
        ),
        (
            "no adapter",
            without(lifecycle_attributes("queued"), attr::PROVENANCE_ADAPTER),
            RejectReason::MissingAttribute,
        ),
        (
            "a version without its resource",
            with_str(completed_attributes(), attr::RESOURCE_VERSION, "7"),
            RejectReason::MissingAttribute,
        ),
    ];
    for (case, attributes, reason) in cases {
        let request = request(vec![
            lifecycle_with(attributes),
            lifecycle_with(lifecycle_attributes("running")),
        ]);
        let limits = Limits::default();
        let out = extract_traces(&request, &received(&limits));
        assert_eq!(out.operations.len(), 1, "{case}: the neighbour passes");
        let [rejection] = out.rejections.as_slice() else {
            panic!("{case}: {:?}", out.rejections);
        };
        assert_eq!(rejection.reason, reason, "{case}: {}", rejection.detail);
    }
}

#[test]
fn a_log_based_lifecycle_event_is_the_same_record_as_the_span_event() {
    let event = lifecycle_with(completed_attributes());
    let limits = Limits::default();
    let spans = request(vec![event.clone()]);
    let from_span = extract_traces(&spans, &received(&limits));
    let logs = logs_request(vec![log_of(&event, &TRACE_ID, &SPAN_ID)]);
    let from_log = extract_logs(&logs, &received(&limits));
    assert!(from_log.rejections.is_empty(), "{:?}", from_log.rejections);
    assert_eq!(from_log.operations, from_span.operations, "the id included");
    assert_eq!(from_log.ignored, 0);
}

#[test]
fn lifecycle_and_outcome_events_share_the_request_limit() {
    let limits = Limits {
        max_events_per_request: 2,
        ..Limits::default()
    };
    let request = request(vec![
        good_event(),
        lifecycle_with(lifecycle_attributes("running")),
        lifecycle_with(lifecycle_attributes("queued")),
    ]);
    let out = extract_traces(&request, &received(&limits));
    assert_eq!((out.events.len(), out.operations.len()), (1, 1));
    let [summary] = out.rejections.as_slice() else {
        panic!("{:?}", out.rejections);
    };
    assert_eq!(summary.reason, RejectReason::TooManyEvents);
    assert_eq!(summary.count, 1);
}
