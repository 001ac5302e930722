//! Secrets planted where a client may put them — user-info, `sig=`, `X-Amz-Signature=` and
//! `access_token=` in a target URL, a bearer token in an error text, in an invalid event, in a
//! counter point, in a body that does not decode, and in the request headers (the collector's own
//! token, a wrong one, an API key) — never reach a topic, a table (rows or Delta log) or a log.
//! The client here is a raw OTLP client, not the adapter, which redacts its own values: the
//! collector must not rely on that.

use std::path::Path;
use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor, read_table};
use candor_e2e::kafka::read_topic;
use candor_e2e::tansu::Tansu;
use candor_e2e::{tempdir, wait_for};
use candor_schema::names::{self, attr, resource, table, topic};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, metric,
    number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::Value;

use crate::ingest::{kv_str, outcome_event, post, trace_request};

const TOKEN: &str = "collectortokenplanted";
const TARGET: &str = "https://bob:hunter2planted@api.test/v1/q?sig=sigplanted&\
                      X-Amz-Signature=amzplanted&access_token=accessplanted&q=cats";
/// Every planted secret; none may appear anywhere the pipeline writes.
const PLANTED: [&str; 8] = [
    TOKEN,
    "hunter2planted",
    "sigplanted",
    "amzplanted",
    "accessplanted",
    "bearerplanted",
    "wrongtokenplanted",
    "apikeyplanted",
];

fn with_headers<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    metadata.insert("x-api-key", "apikeyplanted".parse().unwrap());
    request
}

fn counter_request() -> ExportMetricsServiceRequest {
    let point = NumberDataPoint {
        attributes: vec![
            kv_str(attr::OUTCOME_CLASS, "access_failure"),
            kv_str(attr::TOOL_NAME, "lookup"),
            kv_str(attr::TOOL_TARGET, TARGET),
        ],
        start_time_unix_nano: 1_799_999_000_000_000_000,
        time_unix_nano: 1_800_000_000_000_000_000,
        value: Some(number_data_point::Value::AsInt(1)),
        ..NumberDataPoint::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv_str(resource::SERVICE_NAME, "raw-client")],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: names::OUTCOMES_COUNTER.into(),
                    data: Some(metric::Data::Sum(Sum {
                        data_points: vec![point],
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                        is_monotonic: true,
                    })),
                    ..Metric::default()
                }],
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

/// The planted secrets found in `text`, for a failure message naming where.
fn found_in(text: &str) -> Vec<&'static str> {
    PLANTED
        .into_iter()
        .filter(|secret| text.contains(secret))
        .collect()
}

/// A table's rows as text, with every hex-printed binary value (the kept copies of refused
/// input) decoded too, so that a secret inside them is seen.
fn table_text(root: &Path, name: &str) -> (usize, String) {
    let rows = read_table(root, name);
    let mut text = String::new();
    for row in &rows {
        text.push_str(&row.to_string());
        if let Value::Object(fields) = row {
            for value in fields.values() {
                if let Some(hex) = value.as_str().filter(|s| {
                    s.len() % 2 == 0 && !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
                }) {
                    let bytes: Vec<u8> = (0..hex.len())
                        .step_by(2)
                        .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
                        .collect();
                    text.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        }
    }
    (rows.len(), text)
}

/// Every Delta log file under the root, as text (its statistics hold column values).
fn delta_logs(root: &Path) -> String {
    let mut text = String::new();
    for name in [
        table::OUTCOME_EVENTS,
        table::OUTCOME_COUNTS,
        table::REJECTED,
        table::HEARTBEATS,
        table::OPERATION_EVENTS,
    ] {
        let log = root.join(name).join("_delta_log");
        for entry in std::fs::read_dir(&log).into_iter().flatten().flatten() {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_never_reach_a_topic_a_table_or_a_log() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[otlp]\nauth_token_env = \"CANDOR_E2E_TOKEN\"\n".into()),
            env: vec![("CANDOR_E2E_TOKEN".into(), TOKEN.into())],
            ..Options::default()
        },
    )
    .await;
    let root = tempdir("secrets");
    let mut compactor =
        Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;

    // A valid event whose target and error text carry credentials, and an invalid one (its copy
    // is kept in rejected) with the same target.
    let mut valid = outcome_event("access_failure", TARGET);
    valid.attributes.push(kv_str(
        attr::ERROR_TYPE,
        "upstream said: Authorization: Bearer bearerplanted",
    ));
    let invalid = outcome_event("maybe", TARGET);
    let mut traces = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let answer = traces
        .export(with_headers(trace_request(vec![valid, invalid])))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.partial_success.unwrap().rejected_spans, 1);
    let mut metrics = MetricsServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    metrics
        .export(with_headers(counter_request()))
        .await
        .unwrap();
    // A body that does not decode, with the target's text inside, is kept as it came (less the
    // credentials).
    let mut body = vec![0xff, 0xff, 0xff];
    body.extend_from_slice(TARGET.as_bytes());
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("content-type", "application/x-protobuf"),
        ("authorization", bearer.as_str()),
    ];
    let (status, _) = post(&collector.http_endpoint, "/v1/traces", &headers, body).await;
    assert_eq!(status, 400);
    // A wrong token is refused and not written down.
    let wrong = [
        ("content-type", "application/x-protobuf"),
        ("authorization", "Bearer wrongtokenplanted"),
    ];
    let (status, _) = post(&collector.http_endpoint, "/v1/traces", &wrong, vec![]).await;
    assert_eq!(status, 401);

    // Kafka: keys and payloads of every record of every topic.
    for (name, at_least) in [
        (topic::OUTCOME_EVENTS, 1),
        (topic::OUTCOME_COUNTS, 1),
        (topic::REJECTED, 2),
        (topic::HEARTBEATS, 0),
        (topic::OPERATION_EVENTS, 0),
    ] {
        let records = read_topic(&tansu.bootstrap, name, at_least, Duration::from_secs(30));
        assert!(records.len() >= at_least, "{name}: {}", records.len());
        for record in records {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&record.key),
                String::from_utf8_lossy(&record.payload)
            );
            assert_eq!(found_in(&text), Vec::<&str>::new(), "{name}: {text}");
        }
    }

    // The tables, read by the independent reader, once the compactor stored what was sent.
    wait_for(
        "the compactor to store everything sent",
        Duration::from_secs(60),
        || {
            let root = root.clone();
            async move {
                let events = read_table(&root, table::OUTCOME_EVENTS).len();
                let counts = read_table(&root, table::OUTCOME_COUNTS).len();
                let rejected = read_table(&root, table::REJECTED).len();
                (events >= 1 && counts >= 1 && rejected >= 2).then_some(())
            }
        },
    )
    .await;
    for name in [
        table::OUTCOME_EVENTS,
        table::OUTCOME_COUNTS,
        table::REJECTED,
        table::HEARTBEATS,
        table::OPERATION_EVENTS,
    ] {
        let (rows, text) = table_text(&root, name);
        assert_eq!(
            found_in(&text),
            Vec::<&str>::new(),
            "{name} ({rows} rows): {text}"
        );
    }
    let (_, events) = table_text(&root, table::OUTCOME_EVENTS);
    assert!(
        events.contains("https://REDACTED@api.test/v1/q?sig=REDACTED"),
        "the target is kept, redacted: {events}"
    );
    let logs = delta_logs(&root);
    assert_eq!(found_in(&logs), Vec::<&str>::new(), "Delta logs: {logs}");

    // Nothing silent: each value a credential was removed from is counted.
    assert!(
        collector
            .sample("candor_collector_redacted_values_total")
            .await
            .unwrap_or(0.0)
            >= 4.0,
        "the redactions are counted"
    );

    // The services' logs.
    let logs = format!("{}{}", collector.output(), compactor.output());
    assert_eq!(found_in(&logs), Vec::<&str>::new(), "logs: {logs}");
    compactor.process().terminate().await;
    let _ = std::fs::remove_dir_all(&root);
}
