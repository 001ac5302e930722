//! The collector's ingest role against a real broker.

use std::io::Write as _;
use std::time::Duration;

use bytes::Bytes;
use candor_adapter::classify::http::{BodyEnd, HttpExchange, HttpResponse};
use candor_adapter::otlp::{OtlpConfig, init};
use candor_adapter::testing::{FakeClock, ScriptedTool};
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::free_port;
use candor_e2e::kafka::{decode_all, event_targets, read_topic};
use candor_e2e::load::one_span_request;
pub(crate) use candor_e2e::load::{kv_int, kv_str};
use candor_e2e::tansu::Tansu;
use candor_records::proto::{Heartbeat, OutcomeCount, OutcomeEvent, Rejected, Temporality};
use candor_schema::names::{self, attr, resource, topic};
use candor_schema::{Outcome, OutcomeClass};
use http_body_util::{BodyExt as _, Full};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span;
use prost::Message as _;

const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A response from a scripted tool.
pub(crate) fn json(status: u16, body: &str) -> HttpExchange {
    Ok(HttpResponse {
        status: http::StatusCode::from_u16(status).unwrap(),
        headers: http::HeaderMap::new(),
        body: Bytes::from(body.to_owned()),
        body_end: BodyEnd::Complete,
        received_at: std::time::SystemTime::UNIX_EPOCH,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapter_failures_reach_kafka_field_for_field() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;

    let mut otlp = OtlpConfig::new(collector.grpc_endpoint.clone(), "e2e-checkout");
    otlp.service_instance_id = Some("instance-1".into());
    let telemetry = init(otlp).unwrap();
    let adapter = Adapter::builder("search", "http://search.test/v1/items?token=S3CRET")
        .classifier(
            HttpClassifier::new(NotFound::Unreachable)
                .items_at("/items")
                .total_at("/total"),
        )
        .clock(FakeClock::default())
        .retry(RetryPolicy::default().with_max_attempts(2).unwrap())
        .build()
        .unwrap();
    let tool = ScriptedTool::returning([
        json(500, ""),
        json(500, ""),
        json(200, r#"{"items":[1,2,3],"total":10}"#),
        json(200, r#"{"items":[1]}"#),
    ]);
    let exhausted = adapter.call(|ctx| tool.attempt(ctx)).await;
    let partial = adapter.call(|ctx| tool.attempt(ctx)).await;
    let success = adapter.call(|ctx| tool.attempt(ctx)).await;
    assert_eq!(
        [exhausted.class(), partial.class(), success.class()],
        [
            OutcomeClass::AccessFailure,
            OutcomeClass::Partial,
            OutcomeClass::Success
        ]
    );
    // Shutdown flushes spans and counters; the collector answers only once Kafka holds them.
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();

    // The retried attempt's event arrives twice: as the log record emitted when the attempt
    // ended (contract rule `TELEMETRY-MOMENT`) and as its span event, one event with one id.
    let mut events: Vec<OutcomeEvent> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        4,
        READ_TIMEOUT,
    ));
    assert_eq!(events.len(), 4, "{events:#?}");
    events.sort_by(|a, b| {
        a.event_id
            .cmp(&b.event_id)
            .then(a.received_time_unix_nano.cmp(&b.received_time_unix_nano))
    });
    let copies: Vec<(&OutcomeEvent, &OutcomeEvent)> = events
        .windows(2)
        .filter(|pair| pair[0].event_id == pair[1].event_id)
        .map(|pair| (&pair[0], &pair[1]))
        .collect();
    let [(logged, spanned)] = copies.as_slice() else {
        panic!("one event twice: {events:#?}");
    };
    assert_eq!(logged.retry_action, "retry");
    assert_eq!(
        OutcomeEvent {
            received_time_unix_nano: 0,
            ..(*logged).clone()
        },
        OutcomeEvent {
            received_time_unix_nano: 0,
            ..(*spanned).clone()
        },
        "the two forms of one event are one record"
    );
    events.dedup_by(|a, b| a.event_id == b.event_id);
    events.sort_by_key(|e| (e.outcome_class.clone(), e.retry_attempt));
    let (first, second, partial_event) = (&events[0], &events[1], &events[2]);
    for (event, attempt) in [
        (first, &exhausted.attempts()[0]),
        (second, &exhausted.attempts()[1]),
    ] {
        assert_eq!(event.outcome_class, "access_failure");
        assert_eq!(event.tool_name, "search");
        assert_eq!(
            event.tool_target,
            "http://search.test/v1/items?token=REDACTED"
        );
        assert_eq!(event.failure_kind, "server_error");
        assert_eq!(event.retry_attempt, attempt.number);
        assert_eq!(event.retry_max_attempts, 2);
        assert_eq!(
            Some(event.retry_action.as_str()),
            attempt.retry_action.map(|a| a.as_str())
        );
        assert_eq!(event.retry_backoff_ms, attempt.backoff_ms);
        assert_eq!(event.http_status_code, Some(500));
        assert_eq!(event.error_type.as_deref(), Some("500"));
        assert_eq!(event.service_name, "e2e-checkout");
        assert_eq!(event.service_instance_id, "instance-1");
        let at = attempt.started_at.since_epoch() + Duration::from_millis(attempt.duration_ms);
        assert_eq!(u128::from(event.event_time_unix_nano), at.as_nanos());
        assert_eq!(event.trace_id.len(), 32);
        assert_eq!(event.span_id.len(), 16);
        assert_eq!(event.event_id.len(), 32);
    }
    assert_eq!(first.retry_action, "retry");
    assert_eq!(second.retry_action, "exhausted");
    assert_eq!(first.trace_id, second.trace_id, "one call, one span");
    assert_ne!(first.event_id, second.event_id);
    let Outcome::Partial { truncation, .. } = partial.outcome() else {
        panic!("{partial:?}");
    };
    assert_eq!(partial_event.outcome_class, "partial");
    assert_eq!(partial_event.failure_kind, "declared_total");
    assert_eq!(partial_event.retry_action, "accept_partial");
    assert_eq!(partial_event.partial_returned, truncation.returned);
    assert_eq!(partial_event.partial_expected, truncation.expected);
    assert_eq!(
        partial_event.coverage.as_deref(),
        Some(truncation.covered.as_str())
    );
    assert_eq!(
        partial_event.dropped.as_deref(),
        Some(truncation.dropped.as_str())
    );

    // The counter: every class, cumulative, with the final totals.
    let counts: Vec<OutcomeCount> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_COUNTS,
        4,
        READ_TIMEOUT,
    ));
    let latest = |class: &str| {
        counts
            .iter()
            .filter(|c| c.outcome_class == class)
            .max_by_key(|c| c.time_unix_nano)
            .unwrap_or_else(|| panic!("no {class} count in {counts:#?}"))
    };
    for (class, total) in [
        ("success", 1),
        ("partial", 1),
        ("access_failure", 1),
        ("empty", 0),
    ] {
        let count = latest(class);
        assert_eq!(count.value, total, "{class}");
        assert_eq!(count.temporality, Temporality::Cumulative as i32);
        assert_eq!(
            count.tool_target,
            "http://search.test/v1/items?token=REDACTED"
        );
        assert_eq!(count.service_instance_id, "instance-1");
    }

    // Heartbeats flow while the collector runs.
    let heartbeats: Vec<Heartbeat> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::HEARTBEATS,
        1,
        READ_TIMEOUT,
    ));
    assert!(heartbeats.iter().all(|h| h.interval_ms == 1000));
    drop(collector);
}

pub fn outcome_event(class: &str, target: &str) -> span::Event {
    span::Event {
        time_unix_nano: 1_800_000_000_000_000_000,
        name: names::OUTCOME_EVENT.to_owned(),
        attributes: vec![
            kv_str(attr::OUTCOME_CLASS, class),
            kv_str(attr::TOOL_NAME, "lookup"),
            kv_str(attr::TOOL_TARGET, target),
            kv_str(attr::FAILURE_KIND, "timeout"),
            kv_str(attr::RETRY_ACTION, "exhausted"),
            kv_int(attr::RETRY_ATTEMPT, 3),
            kv_int(attr::RETRY_MAX_ATTEMPTS, 3),
        ],
        dropped_attributes_count: 0,
    }
}

pub fn trace_request(events: Vec<span::Event>) -> ExportTraceServiceRequest {
    one_span_request(
        vec![kv_str(resource::SERVICE_NAME, "raw-client")],
        vec![7; 16],
        vec![9; 8],
        events,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_events_are_rejected_by_name_and_kept_while_valid_ones_go_through() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let huge = "x".repeat(10_000);
    let request = trace_request(vec![
        outcome_event("access_failure", "../../etc/passwd"),
        outcome_event("maybe", "http://lookup.test"),
        outcome_event("access_failure", &huge),
        outcome_event("access_failure", "检索/😀 \"quoted\""),
    ]);
    let response = client.export(request).await.unwrap().into_inner();
    let partial = response.partial_success.expect("partial success");
    assert_eq!(partial.rejected_spans, 2);
    assert!(
        partial.error_message.contains("unknown_class (1)"),
        "{}",
        partial.error_message
    );
    assert!(
        partial.error_message.contains("value_too_long (1)"),
        "{}",
        partial.error_message
    );

    let targets = event_targets(&tansu.bootstrap, 2, READ_TIMEOUT);
    assert_eq!(targets, ["../../etc/passwd", "检索/😀 \"quoted\""]);

    let mut rejected: Vec<Rejected> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::REJECTED,
        2,
        READ_TIMEOUT,
    ));
    rejected.sort_by(|a, b| a.reason.cmp(&b.reason));
    assert_eq!(rejected.len(), 2);
    assert_eq!(rejected[0].reason, "unknown_class");
    assert!(
        rejected[0].detail.contains("maybe"),
        "{}",
        rejected[0].detail
    );
    assert_eq!(rejected[0].service_name, "raw-client");
    assert!(!rejected[0].input.is_empty());
    assert_eq!(rejected[1].reason, "value_too_long");
    assert!(rejected[1].input.len() <= 4096 && rejected[1].input_truncated);

    let unknown = collector
        .sample("candor_collector_rejected_total{reason=\"unknown_class\"}")
        .await;
    assert_eq!(unknown, Some(1.0));

    // What a person runs to look at the topic. It stops after a second without a record, which
    // a loaded machine can spend joining the topic before the first one: run it until it has
    // read both.
    let reasons = candor_e2e::wait_for(
        "`candor-collector read` to print both rejections",
        Duration::from_secs(60),
        || async {
            let output =
                tokio::process::Command::new(candor_e2e::target_dir().join("candor-collector"))
                    .args([
                        "read",
                        "--topic",
                        topic::REJECTED,
                        "--kafka",
                        &tansu.bootstrap,
                        "--idle",
                        "1s",
                    ])
                    .output()
                    .await
                    .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let mut reasons: Vec<String> = String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .map(|line| {
                    let line: serde_json::Value = serde_json::from_str(line).unwrap();
                    line["record"]["reason"].as_str().unwrap().to_owned()
                })
                .collect();
            reasons.sort();
            (reasons.len() >= 2).then_some(reasons)
        },
    )
    .await;
    assert_eq!(reasons, ["unknown_class", "value_too_long"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_is_required_when_configured() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[otlp]\nauth_token_env = \"CANDOR_E2E_TOKEN\"\n".into()),
            env: vec![("CANDOR_E2E_TOKEN".into(), "s3cret-token".into())],
            ..Options::default()
        },
    )
    .await;
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let status = client
        .export(trace_request(vec![outcome_event("access_failure", "t")]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);

    let mut request =
        tonic::Request::new(trace_request(vec![outcome_event("access_failure", "t")]));
    request
        .metadata_mut()
        .insert("authorization", "Bearer s3cret-token".parse().unwrap());
    let response = client.export(request).await.unwrap().into_inner();
    assert!(response.partial_success.is_none());

    // OTLP/HTTP: refused before the body is read, accepted with the token.
    let body =
        serde_json::to_vec(&trace_request(vec![outcome_event("access_failure", "t")])).unwrap();
    let json = ("content-type", "application/json");
    let (status, _) = post(
        &collector.http_endpoint,
        "/v1/traces",
        &[json],
        body.clone(),
    )
    .await;
    assert_eq!(status, 401);
    let wrong = ("authorization", "Bearer s3cret-tokem");
    let (status, _) = post(
        &collector.http_endpoint,
        "/v1/traces",
        &[json, wrong],
        body.clone(),
    )
    .await;
    assert_eq!(status, 401);
    let right = ("authorization", "Bearer s3cret-token");
    let (status, _) = post(&collector.http_endpoint, "/v1/traces", &[json, right], body).await;
    assert_eq!(status, 200);
    assert_eq!(
        collector
            .sample("candor_collector_unauthenticated_total")
            .await,
        Some(3.0)
    );
    assert!(!collector.output().contains("s3cret-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_gets_a_retryable_answer_never_success() {
    let nothing = format!("127.0.0.1:{}", free_port());
    let collector = Collector::start(
        &nothing,
        Options {
            config: Some("[kafka]\ndelivery_timeout = \"1s\"\n".into()),
            skip_ready: true,
            ..Options::default()
        },
    )
    .await;
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let status = client
        .export(trace_request(vec![outcome_event("access_failure", "t")]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    use tonic_types::StatusExt as _;
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert!(retry.retry_delay.is_some());
}

pub(crate) async fn post(
    endpoint: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, Vec<u8>) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut request = http::Request::post(format!("{endpoint}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_takes_json_and_refuses_a_gzip_bomb_after_decompression() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[otlp]\nmax_request_bytes = 1048576\n".into()),
            ..Options::default()
        },
    )
    .await;
    let request = trace_request(vec![outcome_event("access_failure", "json-target")]);
    let body = serde_json::to_vec(&request).unwrap();
    let (status, response) = post(
        &collector.http_endpoint,
        "/v1/traces",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&response));
    let events: Vec<OutcomeEvent> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        1,
        READ_TIMEOUT,
    ));
    assert_eq!(events[0].tool_target, "json-target");

    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&vec![0u8; 32 << 20]).unwrap();
    let bomb = encoder.finish().unwrap();
    assert!(bomb.len() < 1 << 20);
    let (status, _) = post(
        &collector.http_endpoint,
        "/v1/traces",
        &[
            ("content-type", "application/x-protobuf"),
            ("content-encoding", "gzip"),
        ],
        bomb,
    )
    .await;
    assert_eq!(status, 413);
    assert_eq!(
        collector.sample("candor_collector_too_large_total ").await,
        Some(1.0)
    );

    // An uncompressed body over the cap: refused while it is read, counted, and answered with
    // a google.rpc.Status body.
    let (status, body) = post(
        &collector.http_endpoint,
        "/v1/traces",
        &[("content-type", "application/x-protobuf")],
        vec![0u8; 2 << 20],
    )
    .await;
    assert_eq!(status, 413);
    let rpc_status = tonic_types::pb::Status::decode(body.as_slice()).unwrap();
    assert_eq!(rpc_status.code, tonic::Code::ResourceExhausted as i32);
    assert!(
        rpc_status.message.contains("exceeds"),
        "{}",
        rpc_status.message
    );
    assert_eq!(
        collector.sample("candor_collector_too_large_total ").await,
        Some(2.0)
    );

    // Over gRPC, compressed and not: RESOURCE_EXHAUSTED, counted, without RetryInfo.
    let big = trace_request(vec![outcome_event("access_failure", &"t".repeat(2 << 20))]);
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20);
    let status = client.export(big.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    use tonic_types::StatusExt as _;
    assert!(status.get_details_retry_info().is_none());
    let mut gzip_client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20)
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let status = gzip_client.export(big).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        collector.sample("candor_collector_too_large_total ").await,
        Some(4.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_request_is_refused_and_kept_in_the_rejected_topic() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    // A protobuf string field holding invalid UTF-8: field 1 (resource_spans) → field 1
    // (resource) → field 1 (attributes) → field 1 (key) = 0xFF 0xFE.
    let key = [0x0a, 0x02, 0xff, 0xfe];
    let attribute = [&[0x0a, key.len() as u8][..], &key].concat();
    let resource = [&[0x0a, attribute.len() as u8][..], &attribute].concat();
    let body = [&[0x0a, resource.len() as u8][..], &resource].concat();
    let (status, response) = post(
        &collector.http_endpoint,
        "/v1/traces",
        &[("content-type", "application/x-protobuf")],
        body.clone(),
    )
    .await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&response));
    let (status, _) = post(
        &collector.http_endpoint,
        "/v1/metrics",
        &[("content-type", "application/json")],
        b"{\"resourceMetrics\": [".to_vec(),
    )
    .await;
    assert_eq!(status, 400);

    // The same over gRPC: the collector reads the message as bytes and decodes it itself.
    let status = grpc_raw(
        &collector.grpc_endpoint,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        body.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("undecodable"), "{status:?}");

    let mut rejected: Vec<Rejected> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::REJECTED,
        3,
        READ_TIMEOUT,
    ));
    assert_eq!(
        rejected.iter().filter(|r| r.input == body).count(),
        2,
        "{rejected:#?}"
    );
    rejected.sort_by(|a, b| a.signal.cmp(&b.signal));
    rejected.dedup_by(|a, b| a.input == b.input);
    assert_eq!(rejected.len(), 2, "{rejected:#?}");
    assert!(rejected.iter().all(|r| r.reason == "malformed_request"));
    assert_eq!(rejected[0].signal, "metrics");
    assert_eq!(rejected[1].signal, "traces");
    assert_eq!(
        rejected[1].input, body,
        "the undecodable body is kept as it came"
    );
    assert!(
        rejected[1].detail.to_lowercase().contains("utf-8"),
        "{}",
        rejected[1].detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_accepting_flushes_and_exits_cleanly() {
    let tansu = Tansu::start().await;
    let mut collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    client
        .export(trace_request(vec![outcome_event(
            "access_failure",
            "before-shutdown",
        )]))
        .await
        .unwrap();
    let code = tokio::time::timeout(Duration::from_secs(30), collector.process().terminate())
        .await
        .expect("the collector stopped within 30 s");
    assert_eq!(code, Some(0), "{}", collector.output());
    assert!(
        collector.output().contains("all records delivered"),
        "{}",
        collector.output()
    );
    assert!(
        client
            .export(trace_request(vec![outcome_event(
                "access_failure",
                "after-shutdown"
            )]))
            .await
            .is_err()
    );
    let events: Vec<OutcomeEvent> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        1,
        READ_TIMEOUT,
    ));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].tool_target, "before-shutdown");
    // Every accepted event is in some heartbeat, the last one sent at shutdown included.
    let heartbeats: Vec<Heartbeat> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::HEARTBEATS,
        1,
        READ_TIMEOUT,
    ));
    let accepted: u64 = heartbeats.iter().map(|h| h.accepted_events).sum();
    assert_eq!(accepted, 1, "{heartbeats:#?}");
}

/// One event per rejection reason that an OTLP client can cause through a decodable request.
fn bad_events() -> Vec<(&'static str, span::Event)> {
    let with = |key: &str, value: any_value::Value| {
        let mut event = outcome_event("access_failure", "bad");
        event.attributes.retain(|kv| kv.key != key);
        event.attributes.push(KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue { value: Some(value) }),
            ..KeyValue::default()
        });
        event
    };
    let text = |s: &str| any_value::Value::StringValue(s.to_owned());
    let without = |key: &str| {
        let mut event = outcome_event("access_failure", "bad");
        event.attributes.retain(|kv| kv.key != key);
        event
    };
    let mut duplicate = outcome_event("access_failure", "bad");
    duplicate
        .attributes
        .push(kv_str(attr::OUTCOME_CLASS, "partial"));
    let mut many = outcome_event("access_failure", "bad");
    many.attributes
        .extend((0..10_000).map(|i| kv_int(&format!("extra.{i}"), i)));
    let mut timeless = outcome_event("access_failure", "bad");
    timeless.time_unix_nano = 0;
    vec![
        ("missing_attribute", without(attr::TOOL_TARGET)),
        ("wrong_type", with(attr::RETRY_ATTEMPT, text("three"))),
        ("duplicate_attribute", duplicate),
        (
            "unknown_class",
            with(attr::OUTCOME_CLASS, text("Access_Failure")),
        ),
        (
            "class_not_allowed",
            with(attr::OUTCOME_CLASS, text("empty")),
        ),
        ("unknown_kind", with(attr::FAILURE_KIND, text("gremlins"))),
        ("unknown_action", with(attr::RETRY_ACTION, text("give_up"))),
        (
            "inconsistent",
            with(attr::RETRY_ACTION, text("accept_partial")),
        ),
        (
            "out_of_range",
            with(attr::RETRY_ATTEMPT, any_value::Value::IntValue(0)),
        ),
        (
            "value_too_long",
            with(attr::TOOL_NAME, text(&"n".repeat(5_000))),
        ),
        ("too_many_attributes", many),
        ("missing_time", timeless),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rejection_reason_is_named_counted_and_kept() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let bad = bad_events();
    let mut events: Vec<span::Event> = bad.iter().map(|(_, event)| event.clone()).collect();
    events.push(outcome_event("access_failure", "the-good-one"));
    let mut request = trace_request(events);
    // A second span with an invalid trace id and span id.
    let mut broken = request.resource_spans[0].scope_spans[0].spans[0].clone();
    broken.trace_id = vec![1, 2, 3];
    broken.events = vec![outcome_event("access_failure", "bad")];
    request.resource_spans[0].scope_spans[0].spans.push(broken);
    let mut zero_span = request.resource_spans[0].scope_spans[0].spans[0].clone();
    zero_span.span_id = vec![0; 8];
    zero_span.events = vec![outcome_event("access_failure", "bad")];
    request.resource_spans[0].scope_spans[0]
        .spans
        .push(zero_span);
    let mut reasons: Vec<&str> = bad.iter().map(|(reason, _)| *reason).collect();
    reasons.extend(["invalid_trace_id", "invalid_span_id"]);

    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20);
    let partial = client
        .export(request)
        .await
        .unwrap()
        .into_inner()
        .partial_success
        .unwrap();
    assert_eq!(
        partial.rejected_spans,
        reasons.len() as i64,
        "{}",
        partial.error_message
    );
    for reason in &reasons {
        assert!(
            partial.error_message.contains(&format!("{reason} (1)")),
            "{reason}: {}",
            partial.error_message
        );
        let sample = format!("candor_collector_rejected_total{{reason=\"{reason}\"}}");
        assert_eq!(collector.sample(&sample).await, Some(1.0), "{sample}");
    }
    let stored: Vec<Rejected> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::REJECTED,
        reasons.len(),
        READ_TIMEOUT,
    ));
    let mut stored_reasons: Vec<&str> = stored.iter().map(|r| r.reason.as_str()).collect();
    stored_reasons.sort();
    reasons.sort();
    assert_eq!(stored_reasons, reasons);
    assert!(
        stored
            .iter()
            .all(|r| !r.input.is_empty() && r.input.len() <= 4096)
    );
    let events: Vec<OutcomeEvent> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        1,
        READ_TIMEOUT,
    ));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].tool_target, "the-good-one");
}

/// Sends `message` as the raw body of a unary gRPC call.
async fn grpc_raw(
    endpoint: &str,
    path: &'static str,
    message: Vec<u8>,
) -> Result<Bytes, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(path);
    grpc.unary(tonic::Request::new(Bytes::from(message)), path, BytesCodec)
        .await
        .map(tonic::Response::into_inner)
}

/// A gRPC codec that sends and receives bytes as they are.
#[derive(Clone, Copy)]
struct BytesCodec;

impl tonic::codec::Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;
    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl tonic::codec::Encoder for BytesCodec {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut as _;
        dst.put(item);
        Ok(())
    }
}

impl tonic::codec::Decoder for BytesCodec {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Bytes>, tonic::Status> {
        use bytes::Buf as _;
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_over_tls_on_both_transports() {
    let dir = std::env::temp_dir().join(format!("candor-e2e-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = tokio::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .await
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let tansu = Tansu::start().await;
    let collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some(format!(
                "[otlp]\ntls_cert_path = \"{}\"\ntls_key_path = \"{}\"\n",
                cert.display(),
                key.display()
            )),
            ..Options::default()
        },
    )
    .await;

    let ca = tonic::transport::Certificate::from_pem(std::fs::read(&cert).unwrap());
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(ca)
        .domain_name("localhost");
    let endpoint = collector.grpc_endpoint.replace("http://", "https://");
    let channel = tonic::transport::Endpoint::from_shared(endpoint)
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = TraceServiceClient::new(channel);
    client
        .export(trace_request(vec![outcome_event(
            "access_failure",
            "over-grpc-tls",
        )]))
        .await
        .unwrap();
    // Plain text to the TLS port is refused.
    let mut plain = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    assert!(
        plain
            .export(trace_request(vec![outcome_event(
                "access_failure",
                "plain"
            )]))
            .await
            .is_err()
    );

    let body = dir.join("body.json");
    let request = trace_request(vec![outcome_event("access_failure", "over-http-tls")]);
    std::fs::write(&body, serde_json::to_vec(&request).unwrap()).unwrap();
    let port = collector
        .http_endpoint
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let curl = tokio::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(&cert)
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .args(["-H", "content-type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("https://localhost:{port}/v1/traces"))
        .output()
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&curl.stdout),
        "200",
        "{}",
        String::from_utf8_lossy(&curl.stderr)
    );

    let targets = event_targets(&tansu.bootstrap, 2, READ_TIMEOUT);
    assert_eq!(targets, ["over-grpc-tls", "over-http-tls"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_in_flight_limit_clients_are_told_to_retry() {
    // A broker that is not there keeps the first request open for the delivery timeout.
    let nothing = format!("127.0.0.1:{}", free_port());
    let collector = Collector::start(
        &nothing,
        Options {
            config: Some(
                "[otlp]\nmax_in_flight_requests = 1\n[kafka]\ndelivery_timeout = \"5s\"\n".into(),
            ),
            skip_ready: true,
            ..Options::default()
        },
    )
    .await;
    let endpoint = collector.grpc_endpoint.clone();
    let first = tokio::spawn(async move {
        let mut client = TraceServiceClient::connect(endpoint).await.unwrap();
        client
            .export(trace_request(vec![outcome_event(
                "access_failure",
                "first",
            )]))
            .await
    });
    candor_e2e::wait_for(
        "the first request in flight",
        Duration::from_secs(10),
        || async {
            (collector
                .sample("candor_collector_in_flight_requests ")
                .await
                == Some(1.0))
            .then_some(())
        },
    )
    .await;
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let status = client
        .export(trace_request(vec![outcome_event(
            "access_failure",
            "second",
        )]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("retry later"), "{status:?}");
    use tonic_types::StatusExt as _;
    assert!(status.get_details_retry_info().is_some());
    let first = first.await.unwrap().unwrap_err();
    assert_eq!(first.code(), tonic::Code::Unavailable, "{first:?}");
}
