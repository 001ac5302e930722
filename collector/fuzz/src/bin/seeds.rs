//! Writes the seed corpora of the fuzz targets: a few valid and interesting inputs per target, as
//! `corpus/<target>/seed-NN-<what>`, the same bytes on every run. Each seed is run through its
//! target's checks before it is written, so a seed that breaks an invariant stops the run.
//!
//! ```text
//! cargo run --manifest-path collector/fuzz/Cargo.toml --bin seeds [DIR]
//! ```
//!
//! DIR defaults to `collector/fuzz/corpus`. Earlier `seed-*` files there are replaced; other files
//! (inputs a fuzzing run found and someone committed) are left alone.

use std::error::Error;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use candor_collector::ingest::extract::derived::Derivation;
use candor_collector::ingest::extract::{self, Limits, Received};
use candor_collector_fuzz as checks;
use candor_records::proto::{
    Heartbeat, OutcomeCount, OutcomeEvent, RECORD_SCHEMA_VERSION, Rejected,
};
use candor_records::tables::Table;
use candor_schema::names::{self, attr, resource, semconv};
use candor_schema::{AccessFailureKind, OutcomeClass, PartialKind, RetryAction};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, Metric, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use prost::Message as _;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const TRACE_ID: [u8; 16] = [
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
];
const EVENT_TIME: u64 = 1_799_999_999_000_000_000;
const POINT_START: u64 = 1_799_999_000_000_000_000;
const TARGET: &str = "http://search.test/v1/items";
/// The tool name of the seeds whose bytes are patched: it appears nowhere else in them.
const PATCHED_TOOL: &str = "lookup";

fn main() -> Result<()> {
    let root = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
    };
    let mut written = 0;
    written += otlp_traces(&root)?;
    written += otlp_metrics(&root)?;
    written += otlp_json(&root)?;
    written += gzip_capped(&root)?;
    written += kafka_record(&root)?;
    println!("wrote {written} seeds under {}", root.display());
    Ok(())
}

/// One target's corpus directory.
struct Corpus {
    dir: PathBuf,
    check: fn(&[u8]),
    written: usize,
}

impl Corpus {
    /// The directory of `target`, emptied of earlier seeds.
    fn open(root: &Path, target: &str, check: fn(&[u8])) -> Result<Self> {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with("seed-") {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(Self {
            dir,
            check,
            written: 0,
        })
    }

    /// Checks a seed as its target would, then writes it as `seed-NN-<name>`.
    fn add(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        (self.check)(bytes);
        self.written += 1;
        let path = self.dir.join(format!("seed-{:02}-{name}", self.written));
        std::fs::write(&path, bytes)?;
        Ok(())
    }
}

// ---- OTLP builders ----------------------------------------------------------------------------

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

fn int(key: &str, value: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(value))
}

/// `attributes` with `key` set to `value`: the first occurrence replaced, or one appended.
fn with(mut attributes: Vec<KeyValue>, key: &str, value: any_value::Value) -> Vec<KeyValue> {
    match attributes.iter_mut().find(|kv| kv.key == key) {
        Some(existing) => existing.value = Some(AnyValue { value: Some(value) }),
        None => attributes.push(kv(key, value)),
    }
    attributes
}

fn with_text(attributes: Vec<KeyValue>, key: &str, value: &str) -> Vec<KeyValue> {
    with(
        attributes,
        key,
        any_value::Value::StringValue(value.to_owned()),
    )
}

fn without(mut attributes: Vec<KeyValue>, key: &str) -> Vec<KeyValue> {
    attributes.retain(|kv| kv.key != key);
    attributes
}

fn access_failure(kind: AccessFailureKind, action: RetryAction, attempt: i64) -> Vec<KeyValue> {
    let mut attributes = vec![
        text(attr::OUTCOME_CLASS, OutcomeClass::AccessFailure.as_str()),
        text(attr::TOOL_NAME, "search"),
        text(attr::TOOL_TARGET, TARGET),
        text(attr::FAILURE_KIND, kind.as_str()),
        text(attr::RETRY_ACTION, action.as_str()),
        int(attr::RETRY_ATTEMPT, attempt),
        int(attr::RETRY_MAX_ATTEMPTS, 3),
        text(attr::AUTHORITY, "search.test"),
    ];
    if action == RetryAction::Retry {
        attributes.push(int(attr::RETRY_BACKOFF_MS, 100 * attempt));
    }
    let status = match kind {
        AccessFailureKind::ServerError => Some(503),
        AccessFailureKind::RateLimited => Some(429),
        AccessFailureKind::Auth => Some(401),
        AccessFailureKind::ClientError => Some(400),
        _ => None,
    };
    if let Some(status) = status {
        attributes.push(int(attr::HTTP_STATUS_CODE, status));
        attributes.push(text(attr::ERROR_TYPE, &status.to_string()));
    }
    attributes
}

fn partial(kind: PartialKind) -> Vec<KeyValue> {
    vec![
        text(attr::OUTCOME_CLASS, OutcomeClass::Partial.as_str()),
        text(attr::TOOL_NAME, "search"),
        text(attr::TOOL_TARGET, TARGET),
        text(attr::FAILURE_KIND, kind.as_str()),
        text(attr::RETRY_ACTION, RetryAction::AcceptPartial.as_str()),
        int(attr::RETRY_ATTEMPT, 1),
        int(attr::RETRY_MAX_ATTEMPTS, 3),
        int(attr::PARTIAL_RETURNED, 3),
        int(attr::PARTIAL_EXPECTED, 10),
        text(attr::COVERAGE, "items 1-3 of 10"),
        text(attr::DROPPED, "7 item(s)"),
    ]
}

fn event(attributes: Vec<KeyValue>) -> span::Event {
    span::Event {
        time_unix_nano: EVENT_TIME,
        name: names::OUTCOME_EVENT.to_owned(),
        attributes,
        dropped_attributes_count: 0,
    }
}

fn span_of(trace_id: &[u8], span_id: &[u8], events: Vec<span::Event>) -> Span {
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        name: names::TOOL_CALL_SPAN.to_owned(),
        start_time_unix_nano: EVENT_TIME - 2_000_000,
        end_time_unix_nano: EVENT_TIME + 1_000_000,
        events,
        ..Default::default()
    }
}

fn tool_span(span_id: u8, events: Vec<span::Event>) -> Span {
    span_of(&TRACE_ID, &[span_id; 8], events)
}

fn service(name: &str) -> Resource {
    Resource {
        attributes: vec![
            text(resource::SERVICE_NAME, name),
            text(resource::SERVICE_INSTANCE_ID, "instance-1"),
        ],
        ..Default::default()
    }
}

fn traces_of(resource_spans: Vec<(Option<Resource>, Vec<Span>)>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: resource_spans
            .into_iter()
            .map(|(resource, spans)| ResourceSpans {
                resource,
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

fn traces(spans: Vec<Span>) -> ExportTraceServiceRequest {
    traces_of(vec![(Some(service("checkout")), spans)])
}

fn count_point(class: &str, value: Option<number_data_point::Value>) -> NumberDataPoint {
    NumberDataPoint {
        attributes: vec![
            text(attr::OUTCOME_CLASS, class),
            text(attr::TOOL_NAME, "search"),
            text(attr::TOOL_TARGET, TARGET),
        ],
        start_time_unix_nano: POINT_START,
        time_unix_nano: EVENT_TIME,
        value,
        ..Default::default()
    }
}

fn count(class: OutcomeClass, n: i64) -> NumberDataPoint {
    count_point(class.as_str(), Some(number_data_point::Value::AsInt(n)))
}

fn four_classes(base: i64) -> Vec<NumberDataPoint> {
    OutcomeClass::ALL
        .iter()
        .zip(0..)
        .map(|(class, i)| count(*class, base + i))
        .collect()
}

fn sum(name: &str, temporality: i32, monotonic: bool, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.to_owned(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: temporality,
            is_monotonic: monotonic,
        })),
        ..Default::default()
    }
}

fn outcomes(temporality: AggregationTemporality, points: Vec<NumberDataPoint>) -> Metric {
    sum(names::OUTCOMES_COUNTER, temporality as i32, true, points)
}

fn metrics_of(resources: Vec<(Option<Resource>, Vec<Metric>)>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: resources
            .into_iter()
            .map(|(resource, metrics)| ResourceMetrics {
                resource,
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

fn metrics(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    metrics_of(vec![(Some(service("checkout")), metrics)])
}

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

// ---- the requests -----------------------------------------------------------------------------

fn retried_server_error() -> ExportTraceServiceRequest {
    traces(vec![tool_span(
        1,
        vec![event(access_failure(
            AccessFailureKind::ServerError,
            RetryAction::Retry,
            1,
        ))],
    )])
}

fn declared_partial() -> ExportTraceServiceRequest {
    traces(vec![tool_span(
        2,
        vec![event(partial(PartialKind::DeclaredTotal))],
    )])
}

/// Events of every class (success and empty are refused as events), spans without one, and a
/// resource without a service name.
fn every_class() -> ExportTraceServiceRequest {
    let exception = span::Event {
        time_unix_nano: EVENT_TIME,
        name: "exception".to_owned(),
        ..Default::default()
    };
    let af = |kind, action, attempt| event(access_failure(kind, action, attempt));
    let of_class = |class: OutcomeClass| {
        event(with_text(
            access_failure(AccessFailureKind::Timeout, RetryAction::Exhausted, 3),
            attr::OUTCOME_CLASS,
            class.as_str(),
        ))
    };
    traces_of(vec![
        (
            Some(service("checkout")),
            vec![
                tool_span(
                    1,
                    vec![
                        af(AccessFailureKind::Timeout, RetryAction::Retry, 1),
                        af(AccessFailureKind::RateLimited, RetryAction::Retry, 2),
                        af(AccessFailureKind::Timeout, RetryAction::Exhausted, 3),
                    ],
                ),
                tool_span(
                    2,
                    vec![af(AccessFailureKind::Auth, RetryAction::Permanent, 1)],
                ),
                tool_span(
                    3,
                    vec![
                        event(partial(PartialKind::SizeCap)),
                        event(partial(PartialKind::MidStream)),
                    ],
                ),
                tool_span(
                    4,
                    vec![
                        of_class(OutcomeClass::Success),
                        of_class(OutcomeClass::Empty),
                    ],
                ),
                tool_span(5, vec![exception.clone()]),
                tool_span(6, Vec::new()),
            ],
        ),
        (
            None,
            vec![tool_span(
                7,
                vec![
                    exception,
                    af(AccessFailureKind::Connect, RetryAction::Retry, 1),
                ],
            )],
        ),
    ])
}

/// Values outside the closed vocabularies, and kinds or actions that do not go with the class.
fn unknown_values() -> ExportTraceServiceRequest {
    let good = || access_failure(AccessFailureKind::ServerError, RetryAction::Retry, 1);
    traces(vec![tool_span(
        3,
        vec![
            event(with_text(good(), attr::OUTCOME_CLASS, "maybe")),
            event(with_text(good(), attr::OUTCOME_CLASS, "Access_Failure")),
            event(with_text(good(), attr::FAILURE_KIND, "melted")),
            event(with_text(good(), attr::RETRY_ACTION, "again")),
            event(with_text(
                good(),
                attr::FAILURE_KIND,
                PartialKind::SizeCap.as_str(),
            )),
            event(with_text(
                partial(PartialKind::DeclaredTotal),
                attr::RETRY_ACTION,
                RetryAction::Retry.as_str(),
            )),
            event(without(good(), attr::OUTCOME_CLASS)),
        ],
    )])
}

/// A value, a key and a service name past their bounds, and too many attributes.
fn oversized_values() -> ExportTraceServiceRequest {
    let good = || access_failure(AccessFailureKind::ServerError, RetryAction::Retry, 1);
    let mut long_key = good();
    long_key.push(text(&"k".repeat(5000), "v"));
    let mut crowd = good();
    crowd.extend((0..200).map(|i| int(&format!("extra.{i}"), i)));
    traces_of(vec![(
        Some(service(&"s".repeat(1000))),
        vec![tool_span(
            4,
            vec![
                event(with_text(good(), attr::TOOL_TARGET, &"x".repeat(5000))),
                event(long_key),
                event(crowd),
            ],
        )],
    )])
}

/// Attributes of the wrong type (bytes that are not UTF-8 among them), twice, or out of range.
fn wrong_types() -> ExportTraceServiceRequest {
    let good = || access_failure(AccessFailureKind::ServerError, RetryAction::Retry, 1);
    let mut twice = good();
    twice.push(text(
        attr::OUTCOME_CLASS,
        OutcomeClass::AccessFailure.as_str(),
    ));
    traces(vec![tool_span(
        5,
        vec![
            event(with_text(good(), attr::RETRY_ATTEMPT, "1")),
            event(with(
                good(),
                attr::HTTP_STATUS_CODE,
                any_value::Value::DoubleValue(503.0),
            )),
            event(with(
                good(),
                attr::OUTCOME_CLASS,
                any_value::Value::IntValue(4),
            )),
            event(with(
                good(),
                attr::TOOL_TARGET,
                any_value::Value::BytesValue(vec![0xff, 0xfe, 0x00, 0x80]),
            )),
            event(twice),
            event(with(
                good(),
                attr::HTTP_STATUS_CODE,
                any_value::Value::IntValue(-1),
            )),
            event(with(
                good(),
                attr::RETRY_ATTEMPT,
                any_value::Value::IntValue(0),
            )),
            event(with(
                good(),
                attr::RETRY_ATTEMPT,
                any_value::Value::IntValue(4),
            )),
            event(without(good(), attr::RETRY_BACKOFF_MS)),
        ],
    )])
}

/// Trace and span ids of the wrong length or all zero, and an event without a time.
fn bad_ids() -> ExportTraceServiceRequest {
    let good = || {
        event(access_failure(
            AccessFailureKind::Timeout,
            RetryAction::Retry,
            1,
        ))
    };
    let mut timeless = good();
    timeless.time_unix_nano = 0;
    traces(vec![
        span_of(&[1, 2, 3], &[6; 8], vec![good()]),
        span_of(&[0; 16], &[6; 8], vec![good()]),
        span_of(&TRACE_ID, &[0; 8], vec![good()]),
        span_of(&TRACE_ID, &[], vec![good()]),
        span_of(&TRACE_ID, &[6; 8], vec![timeless]),
    ])
}

/// Twelve good events over four spans and two services: within the default limit, past the
/// tight one.
fn many_events() -> ExportTraceServiceRequest {
    let spans = |first: u8| {
        (first..first + 2)
            .map(|id| {
                tool_span(
                    id,
                    (1..=3)
                        .map(|attempt| {
                            event(access_failure(
                                AccessFailureKind::ServerError,
                                RetryAction::Retry,
                                attempt,
                            ))
                        })
                        .collect(),
                )
            })
            .collect::<Vec<_>>()
    };
    traces_of(vec![
        (Some(service("checkout")), spans(10)),
        (Some(service("billing")), spans(20)),
    ])
}

/// A request whose tool name is [`PATCHED_TOOL`], for the seeds that break its bytes.
fn to_patch() -> ExportTraceServiceRequest {
    let attributes = with_text(
        access_failure(AccessFailureKind::Deadline, RetryAction::Exhausted, 3),
        attr::TOOL_NAME,
        PATCHED_TOOL,
    );
    traces(vec![tool_span(9, vec![event(attributes)])])
}

fn cumulative() -> ExportMetricsServiceRequest {
    metrics(vec![outcomes(
        AggregationTemporality::Cumulative,
        four_classes(5),
    )])
}

fn delta() -> ExportMetricsServiceRequest {
    metrics(vec![outcomes(
        AggregationTemporality::Delta,
        four_classes(0),
    )])
}

/// Points refused one by one next to a good one.
fn bad_points() -> ExportMetricsServiceRequest {
    let mut timeless = count(OutcomeClass::Success, 1);
    timeless.time_unix_nano = 0;
    let mut classless = count(OutcomeClass::Success, 1);
    classless
        .attributes
        .retain(|kv| kv.key != attr::OUTCOME_CLASS);
    metrics(vec![outcomes(
        AggregationTemporality::Cumulative,
        vec![
            count(OutcomeClass::Empty, 3),
            count_point("maybe", Some(number_data_point::Value::AsInt(1))),
            count(OutcomeClass::Success, -1),
            count_point(
                OutcomeClass::Success.as_str(),
                Some(number_data_point::Value::AsDouble(1.5)),
            ),
            count_point(OutcomeClass::Success.as_str(), None),
            timeless,
            classless,
        ],
    )])
}

/// The counter as a gauge, a non-monotonic sum, a histogram and a sum without temporality, and a
/// metric that is not the counter.
fn wrong_metric_types() -> ExportMetricsServiceRequest {
    let gauge = Metric {
        name: names::OUTCOMES_COUNTER.to_owned(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: four_classes(1),
        })),
        ..Default::default()
    };
    let histogram = Metric {
        name: names::OUTCOMES_COUNTER.to_owned(),
        data: Some(metric::Data::Histogram(Histogram::default())),
        ..Default::default()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    metrics(vec![
        gauge,
        sum(names::OUTCOMES_COUNTER, cumulative, false, four_classes(1)),
        histogram,
        sum(names::OUTCOMES_COUNTER, 0, true, four_classes(1)),
        sum("http.server.requests", cumulative, true, four_classes(1)),
        Metric {
            name: names::OUTCOMES_COUNTER.to_owned(),
            ..Default::default()
        },
    ])
}

fn oversized_points() -> ExportMetricsServiceRequest {
    let mut long = count(OutcomeClass::AccessFailure, 2);
    long.attributes = with_text(long.attributes, attr::TOOL_TARGET, &"x".repeat(5000));
    metrics(vec![outcomes(
        AggregationTemporality::Cumulative,
        vec![long, count(OutcomeClass::Success, 9)],
    )])
}

fn many_points() -> ExportMetricsServiceRequest {
    metrics_of(
        ["checkout", "billing", "search"]
            .into_iter()
            .zip(0..)
            .map(|(name, i)| {
                (
                    Some(service(name)),
                    vec![outcomes(
                        AggregationTemporality::Cumulative,
                        four_classes(i),
                    )],
                )
            })
            .collect(),
    )
}

fn points_to_patch() -> ExportMetricsServiceRequest {
    let mut point = count(OutcomeClass::Partial, 4);
    point.attributes = with_text(point.attributes, attr::TOOL_NAME, PATCHED_TOOL);
    metrics(vec![outcomes(AggregationTemporality::Delta, vec![point])])
}

// ---- the corpora ------------------------------------------------------------------------------

/// Standard spans of every derived source, nested as real emitters nest them: an adapter's call
/// with an HTTP span under it, a GenAI tool span with an MCP span and an HTTP span under it, a
/// cancelled sibling, a failed HTTP span with a credential in its URL.
fn derived_spans() -> ExportTraceServiceRequest {
    let derived = |id: u8, parent: u8, kind: span::SpanKind, name: &str, attributes| Span {
        parent_span_id: if parent == 0 {
            Vec::new()
        } else {
            vec![parent; 8]
        },
        name: name.to_owned(),
        kind: kind as i32,
        attributes,
        ..tool_span(id, Vec::new())
    };
    let failed = |mut span: Span, exception: &str| {
        span.status = Some(Status {
            code: status::StatusCode::Error as i32,
            ..Default::default()
        });
        span.events.push(span::Event {
            name: semconv::EXCEPTION_EVENT.to_owned(),
            time_unix_nano: EVENT_TIME,
            attributes: vec![text(semconv::EXCEPTION_TYPE, exception)],
            ..Default::default()
        });
        span
    };
    let internal = span::SpanKind::Internal;
    let client = span::SpanKind::Client;
    let adapter = tool_span(1, Vec::new());
    let under_adapter = derived(2, 1, client, "GET", vec![text(semconv::HTTP_METHOD, "GET")]);
    let genai = derived(
        3,
        0,
        internal,
        "execute_tool fetch",
        vec![
            text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
            text(semconv::GEN_AI_TOOL_NAME, "fetch"),
            text(semconv::GEN_AI_TOOL_CALL_ID, "call-1"),
        ],
    );
    let mcp = derived(
        4,
        3,
        client,
        "MCP send tools/call fetch",
        vec![
            text(semconv::MCP_METHOD_NAME, semconv::MCP_TOOLS_CALL),
            text(attr::ERROR_TYPE, "tool_error"),
            int(semconv::RPC_RESPONSE_STATUS_CODE, -32603),
        ],
    );
    let request = failed(
        derived(
            5,
            3,
            client,
            "GET",
            vec![
                text(semconv::HTTP_REQUEST_METHOD, "GET"),
                text(
                    semconv::URL_FULL,
                    "https://u:secret@api.test:8443/v1/x?token=t",
                ),
                text(semconv::URL_TEMPLATE, "/v1/{id}"),
                int(attr::HTTP_STATUS_CODE, 503),
            ],
        ),
        "httpx.HTTPStatusError",
    );
    let cancelled = failed(
        derived(6, 0, internal, "execute_tool slow", Vec::new()),
        "asyncio.exceptions.CancelledError",
    );
    traces_of(vec![(
        Some(service("agent")),
        vec![adapter, under_adapter, genai, mcp, request, cancelled],
    )])
}

fn otlp_traces(root: &Path) -> Result<usize> {
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

fn otlp_metrics(root: &Path) -> Result<usize> {
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

fn otlp_json(root: &Path) -> Result<usize> {
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

fn gzip_capped(root: &Path) -> Result<usize> {
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

fn kafka_record(root: &Path) -> Result<usize> {
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
