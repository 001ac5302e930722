//! Asynchronous operations end to end: the Rust adapter follows operations to their end (and
//! returns one without waiting), its `tool.lifecycle` events pass through the collector, Kafka
//! and the compactor, and `candor operations` lists the operations that never finished.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use candor_adapter::classify::http::{BodyEnd, HttpExchange, HttpResponse};
use candor_adapter::follow::http::StatusUrl;
use candor_adapter::otlp::{self, OtlpConfig};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::query::candor;
use candor_e2e::tansu::Tansu;
use candor_e2e::{rfc3339, tempdir, wait_for};
use candor_schema::OutcomeClass;
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::ingest::json;

/// A 202 whose status is read at `/v1/operations/{id}`.
fn accepted(id: &str) -> HttpExchange {
    let mut headers = HeaderMap::new();
    let location = format!("http://exports.test/v1/operations/{id}");
    headers.insert(
        "operation-location",
        HeaderValue::from_str(&location).unwrap(),
    );
    Ok(HttpResponse {
        status: StatusCode::ACCEPTED,
        headers,
        body: Bytes::new(),
        body_end: BodyEnd::Complete,
        received_at: SystemTime::now(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_that_never_finished_are_listed_and_finished_ones_are_counted() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("operations");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);

    let mut config = OtlpConfig::new(collector.grpc_endpoint.clone(), "exporter");
    config.service_instance_id = Some("exporter-1".into());
    config.metric_interval = Duration::from_millis(300);
    config.span_interval = Duration::from_millis(100);
    let telemetry = otlp::providers(config).unwrap();
    let adapter = Adapter::builder("export", "http://exports.test/v1/exports?token=s3cret")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .follow(StatusUrl::default())
        .retry(
            RetryPolicy::default()
                .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
                .unwrap(),
        )
        .operation_deadline(Duration::from_millis(200))
        .actor("billing-agent")
        .tracer_provider(telemetry.tracer_provider())
        .meter_provider(telemetry.meter_provider())
        .build()
        .unwrap();
    let follow = |id: &'static str, statuses: Vec<HttpExchange>| {
        let adapter = &adapter;
        async move {
            let start = ScriptedTool::returning([accepted(id)]);
            let reads = ScriptedTool::returning(statuses);
            adapter
                .call_and_follow(|ctx| start.attempt(ctx), |_, ctx| reads.attempt(ctx))
                .await
                .class()
        }
    };
    let running = || json(200, r#"{"status":"Running","percentComplete":20}"#);
    // Completed, with the status URL as evidence.
    let done = follow(
        "op-done",
        vec![running(), json(200, r#"{"status":"Succeeded"}"#)],
    )
    .await;
    assert_eq!(done, OutcomeClass::Success);
    // Failed by the operation itself.
    let failed = follow(
        "op-failed",
        vec![json(
            200,
            r#"{"status":"Failed","error":{"message":"disk full"}}"#,
        )],
    )
    .await;
    assert_eq!(failed, OutcomeClass::AccessFailure);
    // Still running at the operation deadline: the adapter gives up, the operation stays open.
    let given_up = follow("op-running", (0..1000).map(|_| running()).collect()).await;
    assert_eq!(given_up, OutcomeClass::AccessFailure);
    // Accepted and returned at once: nobody followed it.
    let start = ScriptedTool::returning([accepted("op-accepted")]);
    adapter.call(|ctx| start.attempt(ctx)).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();
    let until = rfc3339(SystemTime::now());
    collector.heartbeat_after_now().await;

    let answer = wait_for(
        "the two open operations in `candor operations`, over a covered window",
        Duration::from_secs(90),
        || async {
            let answer = candor(
                &root,
                &[
                    "operations",
                    "--since",
                    &since,
                    "--until",
                    &until,
                    "--stuck-after",
                    "1ms",
                    "--no-live",
                ],
            );
            (answer.class() == "success" && answer.rows().len() == 2).then_some(answer)
        },
    )
    .await;
    let rows = answer.rows();
    let listed: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|row| {
            (
                row["operation_id"].as_str().unwrap(),
                row["state"].as_str().unwrap(),
                row["status"].as_str().unwrap(),
            )
        })
        .collect();
    // Oldest first; each open past the threshold while its adapter instance kept reporting.
    assert_eq!(
        listed,
        [
            (
                "http://exports.test/v1/operations/op-running",
                "running",
                "stuck"
            ),
            (
                "http://exports.test/v1/operations/op-accepted",
                "accepted",
                "stuck"
            ),
        ]
    );
    for row in &rows {
        assert_eq!(row["service"], "exporter");
        assert_eq!(row["instance"], "exporter-1");
        assert_eq!(
            row["target"],
            "http://exports.test/v1/exports?token=REDACTED"
        );
        assert_eq!(row["actor"], "billing-agent");
        assert_eq!(row["source_system"], "exports.test");
    }
    let summary = answer.json()["summary"].to_string();
    assert!(
        summary
            .contains("operations seen: 4; ended: 1 completed, 0 partial, 0 cancelled, 1 failed"),
        "{summary}"
    );
    assert!(summary.contains("never completed: 3 of 4"), "{summary}");
}
