//! Telemetry through the SDK's in-memory exporters: the exact events per scenario, none for
//! Success and Empty, the counter for all four classes, sampling, redaction, and hosts that
//! bridge `tracing` into OpenTelemetry.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use candor_adapter::classify::http::{BodyEnd, HttpExchange, HttpResponse};
use candor_adapter::follow::http::StatusUrl;
use candor_adapter::telemetry::UNRECORDED_SPANS_COUNTER;
use candor_adapter::testing::{FakeClock, ScriptedTool};
use candor_adapter::{Adapter, HttpClassifier, KeepToolFailures, NotFound, RetryPolicy};
use candor_schema::names::{self, attr};
use candor_schema::{Authority, OutcomeClass};
use http::{HeaderMap, HeaderValue, StatusCode};
use opentelemetry::KeyValue;
use opentelemetry::trace::{Status, TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider, SpanData};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

struct Sdk {
    spans: InMemorySpanExporter,
    tracer_provider: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meter_provider: SdkMeterProvider,
}

impl Sdk {
    fn new(sampler: Sampler, keep_failures: bool) -> Self {
        let spans = InMemorySpanExporter::default();
        let builder = SdkTracerProvider::builder().with_simple_exporter(spans.clone());
        let tracer_provider = if keep_failures {
            builder.with_sampler(KeepToolFailures::new(sampler)).build()
        } else {
            builder.with_sampler(sampler).build()
        };
        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        Self {
            spans,
            tracer_provider,
            metrics,
            meter_provider,
        }
    }

    fn adapter(&self, target: &str, max_attempts: u32) -> Adapter<HttpClassifier, FakeClock> {
        Adapter::builder("search", target)
            .classifier(
                HttpClassifier::new(NotFound::Unreachable)
                    .items_at("/items")
                    .total_at("/total"),
            )
            .clock(FakeClock::default())
            .retry(
                RetryPolicy::default()
                    .with_max_attempts(max_attempts)
                    .unwrap(),
            )
            .attempt_timeout(Duration::from_secs(1))
            .jitter_seed(1)
            .authority(Authority {
                principal: Some("svc-search".into()),
                scope: None,
            })
            .tracer_provider(&self.tracer_provider)
            .meter_provider(&self.meter_provider)
            .build()
            .unwrap()
    }

    fn finished_spans(&self) -> Vec<SpanData> {
        self.spans.get_finished_spans().unwrap()
    }

    /// The `tool.outcomes`-style counter `name` per class (or per lifecycle state, for the
    /// points counted without a class), after a flush.
    fn counter(&self, name: &str) -> BTreeMap<String, u64> {
        self.meter_provider.force_flush().unwrap();
        let mut totals = BTreeMap::new();
        let exported = self.metrics.get_finished_metrics().unwrap();
        let Some(latest) = exported.last() else {
            return totals;
        };
        for scope in latest.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() else {
                    panic!("{name} is not a u64 sum");
                };
                assert!(sum.is_monotonic());
                for point in sum.data_points() {
                    let value = |key: &str| {
                        point
                            .attributes()
                            .find(|kv| kv.key.as_str() == key)
                            .map(|kv| kv.value.to_string())
                    };
                    let class = match (value(attr::OUTCOME_CLASS), value(attr::LIFECYCLE_STATE)) {
                        (Some(class), None) => class,
                        (None, Some(state)) => format!("{}={state}", attr::LIFECYCLE_STATE),
                        other => panic!("a point with class and state {other:?}"),
                    };
                    *totals.entry(class).or_default() += point.value();
                }
            }
        }
        totals
    }
}

fn json(code: u16, body: &str) -> HttpExchange {
    Ok(HttpResponse {
        status: StatusCode::from_u16(code).unwrap(),
        headers: HeaderMap::new(),
        body: Bytes::from(body.to_owned()),
        body_end: BodyEnd::Complete,
        received_at: std::time::SystemTime::UNIX_EPOCH,
    })
}

/// A JSON response whose `X-Request-Id` header is `id`: the envelope's evidence.
fn with_request_id(code: u16, id: &str, body: &str) -> HttpExchange {
    let mut headers = HeaderMap::new();
    headers.insert("x-request-id", HeaderValue::from_str(id).unwrap());
    Ok(HttpResponse {
        status: StatusCode::from_u16(code).unwrap(),
        headers,
        body: Bytes::from(body.to_owned()),
        body_end: BodyEnd::Complete,
        received_at: std::time::SystemTime::UNIX_EPOCH,
    })
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect()
}

fn outcome_events(spans: &[SpanData]) -> Vec<BTreeMap<String, String>> {
    spans
        .iter()
        .flat_map(|span| span.events.iter())
        .filter(|event| event.name == names::OUTCOME_EVENT)
        .map(|event| attributes(&event.attributes))
        .collect()
}

async fn run(
    adapter: &Adapter<HttpClassifier, FakeClock>,
    script: Vec<HttpExchange>,
) -> OutcomeClass {
    let tool = ScriptedTool::returning(script);
    adapter.call(|ctx| tool.attempt(ctx)).await.class()
}

#[tokio::test]
async fn a_failed_attempt_is_logged_when_it_ends_not_when_the_call_does() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let logs = opentelemetry_sdk::logs::InMemoryLogExporter::default();
    let logger_provider = opentelemetry_sdk::logs::SdkLoggerProvider::builder()
        .with_simple_exporter(logs.clone())
        .build();
    let adapter = Adapter::builder("search", "http://search.test/v1")
        .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items"))
        .clock(FakeClock::default())
        .jitter_seed(1)
        .tracer_provider(&sdk.tracer_provider)
        .logger_provider(&logger_provider)
        .build()
        .unwrap();
    // What the pipeline could see while each attempt ran: log records and ended spans.
    let seen = std::sync::Mutex::new(Vec::new());
    let envelope = adapter
        .call(|context| {
            seen.lock().unwrap().push((
                logs.get_emitted_logs().unwrap().len(),
                sdk.finished_spans().len(),
            ));
            std::future::ready(if context.number < 3 {
                json(503, "")
            } else {
                json(500, "")
            })
        })
        .await;
    assert_eq!(envelope.class(), OutcomeClass::AccessFailure);
    assert_eq!(
        *seen.lock().unwrap(),
        [(0, 0), (1, 0), (2, 0)],
        "during the third attempt the first two failures are logged, and no span has ended"
    );
    let spans = sdk.finished_spans();
    assert_eq!(spans.len(), 1);
    let emitted = logs.get_emitted_logs().unwrap();
    assert_eq!(emitted.len(), 2, "the terminal event is the span's only");
    for (log, event) in emitted.iter().zip(outcome_events(&spans)) {
        let record = &log.record;
        assert_eq!(record.event_name(), Some(names::OUTCOME_EVENT));
        let context = record.trace_context().unwrap();
        assert_eq!(context.trace_id, spans[0].span_context.trace_id());
        assert_eq!(context.span_id, spans[0].span_context.span_id());
        let attributes: BTreeMap<String, String> = record
            .attributes_iter()
            .map(|(key, value)| {
                let value = match value {
                    opentelemetry::logs::AnyValue::Int(number) => number.to_string(),
                    opentelemetry::logs::AnyValue::String(text) => text.to_string(),
                    other => format!("{other:?}"),
                };
                (key.to_string(), value)
            })
            .collect();
        assert_eq!(attributes, event, "the log record is the span event");
    }
}

#[tokio::test]
async fn retried_server_errors_emit_one_event_per_failed_attempt() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = sdk.adapter("http://search.test/v1", 3);
    let class = run(
        &adapter,
        vec![json(500, ""), json(500, ""), json(200, r#"{"items":[1]}"#)],
    )
    .await;
    assert_eq!(class, OutcomeClass::Success);

    let spans = sdk.finished_spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].name, names::TOOL_CALL_SPAN);
    let events = outcome_events(&spans);
    assert_eq!(events.len(), 2);
    for (index, event) in events.iter().enumerate() {
        let attempt = (index + 1).to_string();
        let want: BTreeMap<String, String> = [
            (attr::OUTCOME_CLASS, "access_failure"),
            (attr::TOOL_NAME, "search"),
            (attr::TOOL_TARGET, "http://search.test/v1"),
            (attr::FAILURE_KIND, "server_error"),
            (attr::RETRY_ACTION, "retry"),
            (attr::RETRY_ATTEMPT, attempt.as_str()),
            (attr::RETRY_MAX_ATTEMPTS, "3"),
            (attr::HTTP_STATUS_CODE, "500"),
            (attr::ERROR_TYPE, "500"),
            (attr::AUTHORITY, "svc-search"),
            (attr::PROVENANCE_SOURCE_SYSTEM, "search.test"),
            (attr::PROVENANCE_ADAPTER, candor_adapter::ADAPTER_VERSION),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain([(
            attr::RETRY_BACKOFF_MS.to_owned(),
            event[attr::RETRY_BACKOFF_MS].clone(),
        )])
        .collect();
        assert_eq!(event, &want, "event {index}");
        assert!(event[attr::RETRY_BACKOFF_MS].parse::<u64>().unwrap() <= 100 << index);
    }
}

#[tokio::test]
async fn an_exhausted_call_ends_with_an_exhausted_event() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = sdk.adapter("http://search.test/v1", 2);
    let class = run(&adapter, vec![json(503, ""), json(503, "")]).await;
    assert_eq!(class, OutcomeClass::AccessFailure);
    let events = outcome_events(&sdk.finished_spans());
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e[attr::RETRY_ACTION].as_str())
        .collect();
    assert_eq!(actions, ["retry", "exhausted"]);
    assert!(!events[1].contains_key(attr::RETRY_BACKOFF_MS));
}

#[tokio::test]
async fn a_partial_emits_one_event_with_what_it_covered_and_dropped() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = sdk.adapter("http://search.test/v1", 3);
    let class = run(&adapter, vec![json(200, r#"{"items":[1,2,3],"total":10}"#)]).await;
    assert_eq!(class, OutcomeClass::Partial);
    let events = outcome_events(&sdk.finished_spans());
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(event[attr::OUTCOME_CLASS], "partial");
    assert_eq!(event[attr::FAILURE_KIND], "declared_total");
    assert_eq!(event[attr::RETRY_ACTION], "accept_partial");
    assert_eq!(event[attr::PARTIAL_RETURNED], "3");
    assert_eq!(event[attr::PARTIAL_EXPECTED], "10");
    assert_eq!(event[attr::COVERAGE], "items 1-3 of 10");
    assert_eq!(event[attr::DROPPED], "7 item(s)");
    assert!(!event.contains_key(attr::HTTP_STATUS_CODE));
}

#[tokio::test]
async fn only_the_terminal_event_carries_the_evidence() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = sdk.adapter("http://search.test/v1", 2);
    let last_events = || {
        let spans = sdk.finished_spans();
        outcome_events(&spans[spans.len() - 1..])
    };

    let class = run(
        &adapter,
        vec![
            with_request_id(503, "req-1", ""),
            with_request_id(503, "req-2", ""),
        ],
    )
    .await;
    assert_eq!(class, OutcomeClass::AccessFailure);
    let events = last_events();
    assert_eq!(events.len(), 2);
    let (retried, terminal) = (&events[0], &events[1]);
    assert_eq!(retried[attr::RETRY_ACTION], "retry");
    assert!(!retried.contains_key(attr::EVIDENCE_KIND), "{retried:?}");
    assert!(!retried.contains_key(attr::EVIDENCE_VALUE), "{retried:?}");
    assert_eq!(terminal[attr::RETRY_ACTION], "exhausted");
    assert_eq!(terminal[attr::EVIDENCE_KIND], "request_id");
    assert_eq!(terminal[attr::EVIDENCE_VALUE], "req-2");

    // A Partial's event ends the call too.
    let class = run(
        &adapter,
        vec![with_request_id(
            200,
            "req-3",
            r#"{"items":[1,2],"total":5}"#,
        )],
    )
    .await;
    assert_eq!(class, OutcomeClass::Partial);
    let events = last_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0][attr::RETRY_ACTION], "accept_partial");
    assert_eq!(events[0][attr::EVIDENCE_KIND], "request_id");
    assert_eq!(events[0][attr::EVIDENCE_VALUE], "req-3");

    // A call that a retry rescued has evidence but no terminal event: its one event has none.
    let class = run(
        &adapter,
        vec![
            with_request_id(503, "req-4", ""),
            with_request_id(200, "req-5", r#"{"items":[1]}"#),
        ],
    )
    .await;
    assert_eq!(class, OutcomeClass::Success);
    let events = last_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0][attr::RETRY_ACTION], "retry");
    assert!(!events[0].contains_key(attr::EVIDENCE_KIND), "{events:?}");
    assert!(!events[0].contains_key(attr::EVIDENCE_VALUE), "{events:?}");
}

#[tokio::test]
async fn success_and_empty_emit_no_span_and_every_class_is_counted() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = sdk.adapter("http://search.test/v1", 1);
    for _ in 0..2 {
        run(&adapter, vec![json(200, r#"{"items":[1]}"#)]).await;
    }
    run(&adapter, vec![json(200, r#"{"items":[]}"#)]).await;
    assert!(
        sdk.finished_spans().is_empty(),
        "{:?}",
        sdk.finished_spans()
    );

    run(&adapter, vec![json(200, r#"{"items":[1],"total":2}"#)]).await;
    for _ in 0..3 {
        run(&adapter, vec![json(502, "")]).await;
    }
    let counts = sdk.counter(names::OUTCOMES_COUNTER);
    let want: BTreeMap<String, u64> = [
        ("success", 2),
        ("empty", 1),
        ("partial", 1),
        ("access_failure", 3),
    ]
    .into_iter()
    .map(|(class, n)| (class.to_owned(), n))
    .collect();
    assert_eq!(counts, want);
}

/// Work accepted is not work done: a 202 is counted as an acceptance, never as a success, and
/// the acceptances' series appears with the first of them.
#[tokio::test]
async fn an_accepted_operation_is_counted_as_accepted_never_as_a_success() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = sdk.adapter("http://export.test/v1/jobs", 1);
    run(&adapter, vec![json(200, r#"{"items":[1]}"#)]).await;
    let before = sdk.counter(names::OUTCOMES_COUNTER);
    assert_eq!(
        before.len(),
        4,
        "the four classes, no acceptance yet: {before:?}"
    );
    for _ in 0..2 {
        let class = run(&adapter, vec![json(202, r#"{"id":"job-1"}"#)]).await;
        // The envelope's class is still the contract's: the answer arrived whole.
        assert_eq!(class, OutcomeClass::Success);
    }
    let counts = sdk.counter(names::OUTCOMES_COUNTER);
    assert_eq!(counts["success"], 1, "{counts:?}");
    assert_eq!(counts[&format!("{}=accepted", attr::LIFECYCLE_STATE)], 2);
    // An acceptance is no failure: its spans carry the operation's state, and no outcome event.
    let spans = sdk.finished_spans();
    assert_eq!(spans.len(), 2);
    assert!(outcome_events(&spans).is_empty());
    assert!(spans.iter().all(|span| span.status == Status::Unset));
}

#[tokio::test]
async fn trace_every_call_records_success_spans_without_outcome_events() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = Adapter::builder("search", "http://search.test/v1")
        .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items"))
        .clock(FakeClock::default())
        .trace_every_call(true)
        .tracer_provider(&sdk.tracer_provider)
        .meter_provider(&sdk.meter_provider)
        .build()
        .unwrap();
    run(&adapter, vec![json(200, r#"{"items":[1]}"#)]).await;
    run(&adapter, vec![json(200, r#"{"items":[]}"#)]).await;
    let spans = sdk.finished_spans();
    assert_eq!(spans.len(), 2);
    assert!(spans.iter().all(|s| s.name == names::TOOL_CALL_SPAN));
    assert!(outcome_events(&spans).is_empty());

    // Success spans stay subject to the host's sampler; only failures are kept regardless.
    let sampled_out = Sdk::new(Sampler::AlwaysOff, true);
    let adapter = Adapter::builder("search", "http://search.test/v1")
        .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items"))
        .clock(FakeClock::default())
        .trace_every_call(true)
        .tracer_provider(&sampled_out.tracer_provider)
        .meter_provider(&sampled_out.meter_provider)
        .build()
        .unwrap();
    run(&adapter, vec![json(200, r#"{"items":[1]}"#)]).await;
    assert!(sampled_out.finished_spans().is_empty());
}

#[tokio::test]
async fn failure_spans_survive_an_always_off_sampler() {
    let sdk = Sdk::new(Sampler::AlwaysOff, true);
    let adapter = sdk.adapter("http://search.test/v1", 1);
    run(&adapter, vec![json(503, "")]).await;
    run(&adapter, vec![json(200, r#"{"items":[1]}"#)]).await;
    let spans = sdk.finished_spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(outcome_events(&spans).len(), 1);
    assert!(sdk.counter(UNRECORDED_SPANS_COUNTER).is_empty());
}

#[tokio::test]
async fn a_host_sampler_that_drops_failures_is_counted_not_silent() {
    // Without KeepToolFailures the host's AlwaysOff sampler wins; the adapter must say so.
    let sdk = Sdk::new(Sampler::AlwaysOff, false);
    let adapter = sdk.adapter("http://search.test/v1", 1);
    run(&adapter, vec![json(503, "")]).await;
    assert!(sdk.finished_spans().is_empty());
    assert_eq!(
        sdk.counter(UNRECORDED_SPANS_COUNTER).get("access_failure"),
        Some(&1)
    );
}

#[tokio::test]
async fn credentials_in_the_target_never_reach_an_attribute() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let target =
        "http://alice:pa55word@search.test/v1?q=x&token=T0KEN&sig=S1G&X-Amz-Signature=AMZS1G";
    let adapter = sdk.adapter(target, 2);
    run(
        &adapter,
        vec![
            json(500, "token=T0KEN"),
            json(200, r#"{"items":[1],"total":5}"#),
        ],
    )
    .await;
    let spans = sdk.finished_spans();
    let mut seen = Vec::new();
    for span in &spans {
        seen.extend(span.attributes.iter().map(|kv| kv.value.to_string()));
        for event in span.events.iter() {
            seen.extend(event.attributes.iter().map(|kv| kv.value.to_string()));
        }
    }
    assert!(seen.len() > 10, "{seen:?}");
    for secret in ["pa55word", "alice", "T0KEN", "S1G", "AMZS1G"] {
        assert!(
            !seen.iter().any(|v| v.contains(secret)),
            "{secret} leaked: {seen:?}"
        );
    }
    assert!(
        seen.iter().any(|v| v.contains("token=REDACTED")),
        "{seen:?}"
    );
}

#[test]
fn tracing_hosts_get_the_span_in_their_trace_and_no_second_event() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let layer = tracing_opentelemetry::layer().with_tracer(sdk.tracer_provider.tracer("host"));
    let subscriber = tracing_subscriber::registry().with(layer);
    let _default = tracing::subscriber::set_default(subscriber);
    let adapter = sdk.adapter("http://search.test/v1", 2);

    let request = tracing::info_span!("handle_request");
    let request_context = request.context();
    let request_span_id = request_context.span().span_context().span_id();
    let request_trace_id = request_context.span().span_context().trace_id();
    {
        let _entered = request.enter();
        // Two attempts fail: two `tool.outcome` events, each mirrored once through `tracing`.
        let tool = ScriptedTool::returning([json(500, ""), json(500, "")]);
        let envelope = block_on(adapter.call(|ctx| tool.attempt(ctx)));
        assert_eq!(envelope.class(), OutcomeClass::AccessFailure);
    }
    drop(request);

    let spans = sdk.finished_spans();
    let call = spans
        .iter()
        .find(|s| s.name == names::TOOL_CALL_SPAN)
        .expect("a tool.call span");
    assert_eq!(call.span_context.trace_id(), request_trace_id);
    assert_eq!(call.parent_span_id, request_span_id);
    let host = spans.iter().find(|s| s.name == "handle_request").unwrap();
    assert_eq!(outcome_events(&spans).len(), 2, "{spans:#?}");
    assert!(
        host.events.is_empty(),
        "the mirror reached the host span as events: {:?}",
        host.events
    );

    // Control: a contextual event inside the host span does reach it, so the check above
    // would catch a mirror that forgot `parent: None`.
    {
        let request = tracing::info_span!("control_request");
        let _entered = request.enter();
        tracing::warn!(target: "control", "{}", names::OUTCOME_EVENT);
    }
    let spans = sdk.finished_spans();
    let control = spans.iter().find(|s| s.name == "control_request").unwrap();
    assert_eq!(control.events.len(), 1);
    assert_eq!(outcome_events(&spans).len(), 3);
}

/// Runs a future to completion on this thread, inside the caller's subscriber and span.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(future)
}

/// The terminal retry actions: the last attempt of a call that ended as AccessFailure or Partial.
const TERMINAL_ACTIONS: [&str; 3] = ["exhausted", "permanent", "accept_partial"];

fn response(pick: u8) -> HttpExchange {
    match pick % 8 {
        0 => json(200, r#"{"items":[1]}"#),
        1 => json(200, r#"{"items":[]}"#),
        2 => json(200, r#"{"items":[1,2],"total":5}"#),
        3 => json(500, ""),
        4 => json(503, ""),
        5 => json(429, ""),
        6 => json(400, ""),
        _ => json(404, ""),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The identity `candor reconcile` relies on (ARCHITECTURE.md): every call that ends as
    /// AccessFailure or Partial adds exactly one terminal event (the last event of its span, of
    /// the call's class, stamped no later than the span's end) and one to `tool.outcomes` with
    /// that class; a call ending otherwise adds no terminal event.
    #[test]
    fn every_failed_call_has_one_terminal_event_and_one_count_of_its_class(
        calls in proptest::collection::vec(proptest::collection::vec(0u8..8, 3), 1..16),
    ) {
        let sdk = Sdk::new(Sampler::AlwaysOn, true);
        let adapter = sdk.adapter("http://search.test/v1", 3);
        let mut classes = Vec::new();
        block_on(async {
            for script in &calls {
                classes.push(run(&adapter, script.iter().copied().map(response).collect()).await);
            }
        });
        let counts = sdk.counter(names::OUTCOMES_COUNTER);
        let mut terminal: BTreeMap<String, u64> = BTreeMap::new();
        for span in sdk.finished_spans() {
            let span_class = attributes(&span.attributes)[attr::OUTCOME_CLASS].clone();
            let events: Vec<_> = span
                .events
                .iter()
                .filter(|event| event.name == names::OUTCOME_EVENT)
                .collect();
            let ends: Vec<_> = events
                .iter()
                .filter(|event| {
                    let action = &attributes(&event.attributes)[attr::RETRY_ACTION];
                    TERMINAL_ACTIONS.contains(&action.as_str())
                })
                .collect();
            let failed = span_class == "access_failure" || span_class == "partial";
            proptest::prop_assert_eq!(ends.len(), usize::from(failed), "{:?}", span);
            if let Some(end) = ends.first() {
                proptest::prop_assert!(std::ptr::eq(**end, *events.last().unwrap()));
                proptest::prop_assert!(end.timestamp <= span.end_time);
                let class = attributes(&end.attributes)[attr::OUTCOME_CLASS].clone();
                proptest::prop_assert_eq!(&class, &span_class);
                *terminal.entry(class).or_default() += 1;
            }
        }
        for class in [OutcomeClass::AccessFailure, OutcomeClass::Partial] {
            let name = class.as_str();
            let calls = classes.iter().filter(|c| **c == class).count() as u64;
            proptest::prop_assert_eq!(counts.get(name).copied().unwrap_or(0), calls);
            proptest::prop_assert_eq!(terminal.get(name).copied().unwrap_or(0), calls);
        }
    }
}

/// A followed operation is counted once, by how it ended: a verified completion as a success,
/// one that never finished as an access failure with its terminal event, and neither as an
/// acceptance, although both were accepted first.
#[tokio::test]
async fn a_followed_operation_is_counted_by_how_it_ended_never_as_accepted() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = Adapter::builder("export", "http://export.test/v1/jobs")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .follow(StatusUrl::default())
        .clock(FakeClock::default())
        .operation_deadline(Duration::from_secs(60))
        .tracer_provider(&sdk.tracer_provider)
        .meter_provider(&sdk.meter_provider)
        .build()
        .unwrap();
    let accepted = || {
        let mut headers = HeaderMap::new();
        headers.insert(
            "operation-location",
            HeaderValue::from_static("http://export.test/v1/operations/1"),
        );
        Ok(HttpResponse {
            status: StatusCode::ACCEPTED,
            headers,
            body: Bytes::new(),
            body_end: BodyEnd::Complete,
            received_at: std::time::SystemTime::UNIX_EPOCH,
        })
    };
    for status in [r#"{"status":"Succeeded"}"#, r#"{"status":"Running"}"#] {
        let start = ScriptedTool::returning([accepted()]);
        let reads = ScriptedTool::returning(std::iter::repeat_n(json(200, status), 1000));
        adapter
            .call_and_follow(|ctx| start.attempt(ctx), |_, ctx| reads.attempt(ctx))
            .await;
    }

    let counts = sdk.counter(names::OUTCOMES_COUNTER);
    assert_eq!(counts["success"], 1, "{counts:?}");
    assert_eq!(counts["access_failure"], 1, "{counts:?}");
    assert!(
        !counts.contains_key(&format!("{}=accepted", attr::LIFECYCLE_STATE)),
        "{counts:?}"
    );
    let spans = sdk.finished_spans();
    let events = outcome_events(&spans);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0][attr::FAILURE_KIND], "deadline");
    assert_eq!(events[0][attr::RETRY_ACTION], "exhausted");
    // The terminal event stays the last of its span, after the operation's states.
    let deadline = spans.last().unwrap();
    let kinds: Vec<&str> = deadline.events.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(
        kinds,
        [
            names::LIFECYCLE_EVENT,
            names::LIFECYCLE_EVENT,
            names::OUTCOME_EVENT
        ]
    );
}

/// A 202 whose status is read at `status_url`.
fn accepted(status_url: &'static str) -> HttpExchange {
    let mut headers = HeaderMap::new();
    headers.insert("operation-location", HeaderValue::from_static(status_url));
    Ok(HttpResponse {
        status: StatusCode::ACCEPTED,
        headers,
        body: Bytes::new(),
        body_end: BodyEnd::Complete,
        received_at: std::time::SystemTime::UNIX_EPOCH,
    })
}

/// Each state a followed operation went through is one `tool.lifecycle` event, in order, with
/// the operation's id and the call's provenance; a repeated state is no new event, and the
/// completion carries the evidence that verified it.
#[tokio::test]
async fn a_followed_operation_records_each_state_it_went_through() {
    let sdk = Sdk::new(Sampler::AlwaysOff, true);
    let adapter = Adapter::builder("export", "http://export.test/v1/jobs")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .follow(StatusUrl::default())
        .clock(FakeClock::default())
        .actor("billing-agent")
        .tracer_provider(&sdk.tracer_provider)
        .meter_provider(&sdk.meter_provider)
        .build()
        .unwrap();
    let start = ScriptedTool::returning([accepted("http://export.test/v1/operations/7")]);
    let reads = ScriptedTool::returning([
        json(200, r#"{"status":"NotStarted"}"#),
        json(200, r#"{"status":"Running","percentComplete":10}"#),
        json(200, r#"{"status":"Running","percentComplete":90}"#),
        json(
            200,
            r#"{"status":"Succeeded","resourceLocation":"http://export.test/v1/exports/7"}"#,
        ),
    ]);
    let envelope = adapter
        .call_and_follow(|ctx| start.attempt(ctx), |_, ctx| reads.attempt(ctx))
        .await;
    assert_eq!(envelope.class(), OutcomeClass::Success);

    // Kept although the host samples nothing: the span carries an operation's states.
    let spans = sdk.finished_spans();
    assert_eq!(spans.len(), 1);
    let span = attributes(&spans[0].attributes);
    assert_eq!(span[attr::LIFECYCLE_STATE], "completed");
    let events: Vec<BTreeMap<String, String>> = spans[0]
        .events
        .iter()
        .map(|event| {
            assert_eq!(event.name, names::LIFECYCLE_EVENT);
            attributes(&event.attributes)
        })
        .collect();
    let states: Vec<&str> = events
        .iter()
        .map(|event| event[attr::LIFECYCLE_STATE].as_str())
        .collect();
    assert_eq!(states, ["accepted", "queued", "running", "completed"]);
    let times: Vec<_> = spans[0]
        .events
        .iter()
        .map(|event| event.timestamp)
        .collect();
    assert!(times.is_sorted(), "{times:?}");
    for event in &events {
        assert_eq!(
            event[attr::OPERATION_ID],
            "http://export.test/v1/operations/7"
        );
        assert_eq!(event[attr::PROVENANCE_SOURCE_SYSTEM], "export.test");
        assert_eq!(event[attr::PROVENANCE_ACTOR], "billing-agent");
        assert!(event[attr::PROVENANCE_ADAPTER].starts_with("candor-adapter/"));
    }
    assert_eq!(events[0][attr::EVIDENCE_KIND], "job_id");
    assert!(!events[1].contains_key(attr::EVIDENCE_KIND));
    assert_eq!(
        events[3][attr::RESOURCE_ID],
        "http://export.test/v1/exports/7"
    );
    assert!(!events[3].contains_key(attr::RESOURCE_VERSION));
    assert!(
        events[..3]
            .iter()
            .all(|event| !event.contains_key(attr::RESOURCE_ID)),
        "only the end names the resource"
    );
    assert_eq!(events[3][attr::EVIDENCE_KIND], "query");
    assert_eq!(
        events[3][attr::EVIDENCE_VALUE],
        "http://export.test/v1/operations/7"
    );
}

/// A followed operation that failed within a fraction of a millisecond: its terminal
/// `tool.outcome` event (at the following's start plus its whole milliseconds) stays the
/// span's last event, after the `failed` state seen in that same millisecond.
#[tokio::test]
async fn the_terminal_event_stays_last_when_the_end_was_seen_within_a_millisecond() {
    let sdk = Sdk::new(Sampler::AlwaysOn, true);
    let adapter = Adapter::builder("export", "http://export.test/v1/jobs")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .follow(StatusUrl::default())
        .clock(FakeClock::default())
        // The first status read waits 3 ms × 0.5: the end is seen 1.5 ms after the acceptance.
        .retry(
            RetryPolicy::default()
                .with_backoff(Duration::from_millis(3), Duration::from_millis(3))
                .unwrap(),
        )
        .jitter(candor_adapter::Jitter::fixed(0.5))
        .tracer_provider(&sdk.tracer_provider)
        .meter_provider(&sdk.meter_provider)
        .build()
        .unwrap();
    let start = ScriptedTool::returning([accepted("http://export.test/v1/operations/8")]);
    let reads = ScriptedTool::returning([json(
        200,
        r#"{"status":"Failed","error":{"message":"disk full"}}"#,
    )]);
    let envelope = adapter
        .call_and_follow(|ctx| start.attempt(ctx), |_, ctx| reads.attempt(ctx))
        .await;
    assert_eq!(envelope.class(), OutcomeClass::AccessFailure);

    let spans = sdk.finished_spans();
    let kinds: Vec<&str> = spans[0]
        .events
        .iter()
        .map(|event| event.name.as_ref())
        .collect();
    assert_eq!(
        kinds,
        [
            names::LIFECYCLE_EVENT,
            names::LIFECYCLE_EVENT,
            names::OUTCOME_EVENT
        ],
        "accepted, failed, then the terminal event"
    );
    let times: Vec<_> = spans[0]
        .events
        .iter()
        .map(|event| event.timestamp)
        .collect();
    assert!(times.is_sorted(), "{times:?}");
}
