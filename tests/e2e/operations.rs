//! Asynchronous operations end to end: the Rust adapter follows operations to their end (and
//! returns one without waiting), its `tool.lifecycle` events pass through the collector, Kafka
//! and the compactor, and `candor operations` lists the operations that never finished. On the
//! dashboards an operation that never ends turns stuck and fires `CandorOperationsStuck`, and
//! one whose adapter instance went silent is unknown, there and in `candor operations`.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use candor_adapter::classify::http::{BodyEnd, HttpExchange, HttpResponse};
use candor_adapter::clock::TokioClock;
use candor_adapter::follow::http::StatusUrl;
use candor_adapter::otlp::{self, OtlpConfig};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, AdapterBuilder, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::dashboards::{self, Dashboards};
use candor_e2e::query::candor;
use candor_e2e::tansu::Tansu;
use candor_e2e::{rfc3339, tempdir, wait_for};
use candor_schema::OutcomeClass;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use crate::dashboards::fast_args;
use crate::ingest::json;

/// A 202 of `exports.test` whose status is read at `/v1/operations/{id}`.
fn accepted(id: &str) -> HttpExchange {
    accepted_by("exports.test", id)
}

/// A 202 of `host` whose status is read at `/v1/operations/{id}`.
fn accepted_by(host: &str, id: &str) -> HttpExchange {
    let mut headers = HeaderMap::new();
    let location = format!("http://{host}/v1/operations/{id}");
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

/// An adapter for calls to `target` that reports to `endpoint` as `service`, instance
/// `{service}-1` (counters every 300 ms, spans every 100 ms), with an HTTP classifier and the
/// settings `configure` adds (a status reader, a retry policy, an actor).
fn reporting_adapter<S>(
    endpoint: &str,
    service: &str,
    target: &str,
    configure: impl FnOnce(
        AdapterBuilder<HttpClassifier>,
    ) -> AdapterBuilder<HttpClassifier, TokioClock, S>,
) -> (Adapter<HttpClassifier, TokioClock, S>, otlp::OtlpGuard) {
    let mut config = OtlpConfig::new(endpoint.to_owned(), service);
    config.service_instance_id = Some(format!("{service}-1"));
    config.metric_interval = Duration::from_millis(300);
    config.span_interval = Duration::from_millis(100);
    let telemetry = otlp::providers(config).unwrap();
    let builder =
        Adapter::builder("export", target).classifier(HttpClassifier::new(NotFound::Unreachable));
    let adapter = configure(builder).otlp(&telemetry).build().unwrap();
    (adapter, telemetry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_that_never_finished_are_listed_and_finished_ones_are_counted() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("operations");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);

    let (adapter, telemetry) = reporting_adapter(
        &collector.grpc_endpoint,
        "exporter",
        "http://exports.test/v1/exports?token=s3cret",
        |builder| {
            builder
                .follow(StatusUrl::default())
                .retry(
                    RetryPolicy::default()
                        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
                        .unwrap(),
                )
                .operation_deadline(Duration::from_millis(200))
                .actor("billing-agent")
        },
    );
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
    // Completed: the status URL answers with the export itself, whose ETag is its version. The
    // status URL is the evidence and the resource.
    let mut exported = json(200, r#"{"rows":1200}"#);
    if let Ok(response) = &mut exported {
        response
            .headers
            .insert("etag", HeaderValue::from_static("\"v7\""));
    }
    let done = follow("op-done", vec![running(), exported]).await;
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

    // The completion's resource and version are columns of their own.
    let resources = candor(
        &root,
        &[
            "sql",
            "SELECT lifecycle_state, resource_id, resource_version FROM operation_events \
             WHERE resource_id IS NOT NULL",
            "--no-live",
        ],
    );
    let rows = resources.rows();
    assert_eq!(rows.len(), 1, "{}", resources.stdout);
    assert_eq!(rows[0]["lifecycle_state"], "completed");
    assert_eq!(
        rows[0]["resource_id"],
        "http://exports.test/v1/operations/op-done"
    );
    assert_eq!(rows[0]["resource_version"], "\"v7\"");
}

/// The dashboards' rules for [`a_stuck_operation_fires_its_alert_and_one_whose_adapter_died_is_unknown`]:
/// stuck after 8 s, long beside the second or so an instance takes to be judged silent.
const STUCK_RULES: &str = r#"
[[rule]]
name = "CandorPipelineStale"
kind = "pipeline_stale"
after = "30s"

[[rule]]
name = "CandorOperationsStuck"
kind = "stuck_operations"
severity = "ticket"
after = "8s"
"#;

/// An adapter that reports to `endpoint` as `service`/`instance`, for calls to `target`, which
/// answers with an acceptance that it does not follow.
fn accepting_adapter(
    endpoint: &str,
    service: &str,
    target: &str,
) -> (Adapter<HttpClassifier>, otlp::OtlpGuard) {
    reporting_adapter(endpoint, service, target, |builder| builder)
}

/// The open operation of the overview's operations panel whose id ends with `id`.
fn open_operation<'a>(overview: &'a Value, id: &str) -> Option<&'a Value> {
    overview["operations"]["open"]
        .as_array()?
        .iter()
        .find(|row| {
            row["operation_id"]
                .as_str()
                .is_some_and(|op| op.ends_with(id))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_operation_fires_its_alert_and_one_whose_adapter_died_is_unknown() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    // The collector of the adapter that dies: killed with it, so that nothing of that instance
    // arrives after its last export, as when its process is killed.
    let mut doomed_collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("operations-dashboards");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let dashboards = Dashboards::start(
        &tansu.bootstrap,
        &root,
        dashboards::Options {
            rules: Some(STUCK_RULES.into()),
            args: fast_args(),
            ..dashboards::Options::default()
        },
    )
    .await;
    let since = rfc3339(collector.covered_since().await);

    // The reporter's instance dies after its operation was accepted.
    let (reporter, doomed) = accepting_adapter(
        &doomed_collector.grpc_endpoint,
        "reporter",
        "http://reports.test/v1/reports",
    );
    let start = ScriptedTool::returning([accepted_by("reports.test", "op-orphan")]);
    reporter.call(|ctx| start.attempt(ctx)).await;
    wait_for(
        "the reporter's operation on the dashboards",
        Duration::from_secs(30),
        || async {
            open_operation(&dashboards.json("/api/overview").await, "op-orphan").map(|_| ())
        },
    )
    .await;
    doomed_collector.process().kill().await;
    // The process it stands for died: there is no shutdown, and no final export.
    std::mem::forget(doomed);

    // The exporter's instance keeps reporting; its operation never ends.
    let (exporter, telemetry) = accepting_adapter(
        &collector.grpc_endpoint,
        "exporter",
        "http://exports.test/v1/exports",
    );
    let start = ScriptedTool::returning([accepted("op-never")]);
    exporter.call(|ctx| start.attempt(ctx)).await;

    let alert = dashboards
        .wait_alert("CandorOperationsStuck for exports.test", |alert| {
            alert["name"] == "CandorOperationsStuck" && alert["state"] == "firing"
        })
        .await;
    assert_eq!(alert["labels"]["target"], "http://exports.test/v1/exports");
    let description = alert["description"].as_str().unwrap();
    assert!(
        description.starts_with("1 operation open for 8s or longer")
            && description.contains("op-never"),
        "{description}"
    );
    let overview = dashboards.json("/api/overview").await;
    let stuck = open_operation(&overview, "op-never").expect("the stuck operation is listed");
    assert_eq!(stuck["status"], "stuck", "{stuck}");
    assert_eq!(stuck["state"], "accepted", "{stuck}");
    let orphan = open_operation(&overview, "op-orphan").expect("the orphan is listed");
    assert_eq!(orphan["status"], "unknown", "{orphan}");
    let totals = &overview["operations"]["totals"];
    assert_eq!(
        (totals["stuck"].as_u64(), totals["unknown"].as_u64()),
        (Some(1), Some(1))
    );
    // Stuck first.
    assert!(
        overview["operations"]["open"][0]["operation_id"]
            .as_str()
            .is_some_and(|id| id.ends_with("op-never")),
        "{overview}"
    );
    // An operation whose adapter went silent is no stuck operation: no alert holds for it.
    let alerts = dashboards.json("/api/alerts").await;
    assert!(
        alerts.as_array().unwrap().iter().all(|alert| {
            alert["labels"]["target"] != "http://reports.test/v1/reports"
                || alert["state"] == "resolved"
        }),
        "{alerts}"
    );
    // The Prometheus form reads the oldest open operation whose adapter still reports.
    let exports = "candor_operation_oldest_open_timestamp_seconds{service=\"exporter\",tool=\"export\",target=\"http://exports.test/v1/exports\"}";
    assert!(dashboards.sample(exports).await.is_some(), "{exports}");
    let silent = "candor_operations_open{service=\"reporter\",tool=\"export\",target=\"http://reports.test/v1/reports\",adapter=\"silent\"}";
    assert_eq!(dashboards.sample(silent).await, Some(1.0), "{silent}");

    // `candor operations` over the tables judges them the same way.
    let answer = wait_for(
        "both open operations in `candor operations`",
        Duration::from_secs(90),
        || async {
            let answer = candor(
                &root,
                &[
                    "operations",
                    "--since",
                    &since,
                    "--stuck-after",
                    "8s",
                    "--no-live",
                ],
            );
            (answer.rows().len() == 2).then_some(answer)
        },
    )
    .await;
    let statuses: Vec<(String, String)> = answer
        .rows()
        .iter()
        .map(|row| {
            (
                row["service"].as_str().unwrap().to_owned(),
                row["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        statuses.contains(&("reporter".to_owned(), "unknown".to_owned())),
        "{statuses:?}"
    );
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();
}
