//! The dashboards over the real pipeline: traffic from real adapters shows on the panels, the
//! API and `/metrics` with the numbers sent; a spike fires its alert and the webhook receives it;
//! hostile values render as text; each stopped hop turns the banner and the panels STALE and
//! fires the pipeline-stale alert, and a restart brings them back to LIVE; a notification that
//! reached nobody is shown undelivered, retried, and delivered once the receiver is up.

use std::time::{Duration, Instant};

use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::dashboards::{self, Dashboards, Receiver};
use candor_e2e::query::candor;
use candor_e2e::tansu::Tansu;
use candor_e2e::{free_port, run_python_client, tempdir, wait_for};
use serde_json::Value;

use crate::ingest::json;

const OK_TARGET: &str = "http://search.test/v1/items";
const FAILING_TARGET: &str = "http://lookup.test/v1/users";
const HOSTILE_TARGET: &str = "<script>alert(1)</script>";

/// Rules with short windows and thresholds, so that a test sees every state change.
pub(crate) const RULES: &str = r#"
[[rule]]
name = "CandorAccessFailureSpike"
kind = "spike"
window = "5m"
baseline = "1h"
factor = 3.0
min_events = 5

[[rule]]
name = "CandorPipelineStale"
kind = "pipeline_stale"
after = "3s"

[[rule]]
name = "CandorWatchdog"
kind = "watchdog"
severity = "none"
"#;

/// [`fast_args`] with a firing alert sent again only every `resend`.
pub(crate) fn fast_args_resending_every(resend: &str) -> Vec<String> {
    let mut args = fast_args();
    if let Some(at) = args.iter().position(|arg| arg == "--resend") {
        args[at + 1] = resend.to_owned();
    }
    args
}

/// Short intervals and thresholds for the hops.
pub(crate) fn fast_args() -> Vec<String> {
    [
        "--evaluate-every",
        "500ms",
        "--table-poll",
        "500ms",
        "--resend",
        "1s",
        "--collector-stale-after",
        "3s",
        "--kafka-stale-after",
        "3s",
        "--table-stale-after",
        "4s",
        "--webhook-attempts",
        "2",
        "--webhook-timeout",
        "1s",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn hop_state(health: &Value, hop: &str) -> Option<String> {
    health["hops"]
        .as_array()?
        .iter()
        .find(|h| h["hop"] == hop)
        .and_then(|h| h["freshness"]["state"].as_str())
        .map(str::to_owned)
}

pub(crate) fn target_row<'a>(overview: &'a Value, target: &str) -> Option<&'a Value> {
    overview["by_target"]
        .as_array()?
        .iter()
        .find(|row| row["group"] == target)
}

async fn wait_hop(dashboards: &Dashboards, hop: &str, state: &str) {
    wait_hop_within(dashboards, hop, state, Duration::from_secs(60)).await;
}

/// Waits until the dashboards show `hop` in `state`, for up to `patience`.
pub(crate) async fn wait_hop_within(
    dashboards: &Dashboards,
    hop: &str,
    state: &str,
    patience: Duration,
) {
    wait_for(
        &format!("the {hop} hop to be {state}"),
        patience,
        || async {
            let health = dashboards.json("/api/health").await;
            (hop_state(&health, hop).as_deref() == Some(state)).then_some(())
        },
    )
    .await;
}

/// A page that must not claim a confirmed zero anywhere.
pub(crate) fn assert_no_confirmed_zero(page: &str) {
    assert!(
        !page.contains("data-confirmed=\"true\""),
        "a panel claims a confirmed empty answer while a hop is not live:\n{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapter_traffic_shows_fires_a_spike_and_every_stopped_hop_turns_stale() {
    let broker_dir = tempdir("dashboards-broker");
    let mut tansu = Tansu::start_durable(&broker_dir).await;
    let mut collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("dashboards");
    let mut compactor =
        Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let receiver = Receiver::start(None).await;
    let dashboards = Dashboards::start(
        &tansu.bootstrap,
        &root,
        dashboards::Options {
            rules: Some(RULES.into()),
            webhooks: vec![receiver.url.clone()],
            args: fast_args(),
            ..dashboards::Options::default()
        },
    )
    .await;
    for hop in ["collector", "kafka", "table"] {
        wait_hop(&dashboards, hop, "live").await;
    }

    // Real adapters export their events and counters to the collector.
    let mut otlp =
        candor_adapter::otlp::OtlpConfig::new(collector.grpc_endpoint.clone(), "e2e-shop");
    otlp.service_instance_id = Some("shop-1".into());
    otlp.metric_interval = Duration::from_millis(500);
    let telemetry = candor_adapter::otlp::init(otlp).unwrap();
    let adapter = |target: &str| {
        Adapter::builder("search", target)
            .classifier(HttpClassifier::new(NotFound::Unreachable))
            .retry(RetryPolicy::default().with_max_attempts(1).unwrap())
            .build()
            .unwrap()
    };
    let (ok, failing, hostile) = (
        adapter(OK_TARGET),
        adapter(FAILING_TARGET),
        adapter(HOSTILE_TARGET),
    );
    for _ in 0..20 {
        let tool = ScriptedTool::returning([json(200, r#"{"items":[1]}"#)]);
        ok.call(|ctx| tool.attempt(ctx)).await;
    }
    for _ in 0..8 {
        let tool = ScriptedTool::returning([json(503, "")]);
        failing.call(|ctx| tool.attempt(ctx)).await;
    }
    for _ in 0..2 {
        let tool = ScriptedTool::returning([json(200, r#"{"items":[1]}"#)]);
        hostile.call(|ctx| tool.attempt(ctx)).await;
    }
    let provider = telemetry.tracer_provider().clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();

    // The panels' numbers are the calls made.
    let overview = wait_for(
        "the calls on the overview",
        Duration::from_secs(60),
        || async {
            let overview = dashboards.json("/api/overview?range=15m").await;
            let done = [(OK_TARGET, 20), (FAILING_TARGET, 8), (HOSTILE_TARGET, 2)]
                .iter()
                .all(|(target, calls)| {
                    target_row(&overview, target).is_some_and(|row| {
                        row["counts"]
                            .as_object()
                            .map(|c| c.values().filter_map(Value::as_u64).sum::<u64>())
                            == Some(*calls)
                    })
                });
            done.then_some(overview)
        },
    )
    .await;
    let failing_row = target_row(&overview, FAILING_TARGET).unwrap();
    assert_eq!(failing_row["counts"]["access_failure"], 8, "{failing_row}");
    assert_eq!(failing_row["counts"]["success"], 0, "{failing_row}");
    assert_eq!(failing_row["silent_failure_rate"], 1.0, "{failing_row}");
    assert_eq!(
        target_row(&overview, OK_TARGET).unwrap()["counts"]["success"],
        20
    );
    assert_eq!(
        overview["coverage"]["freshness"]["state"], "live",
        "{}",
        overview["coverage"]
    );
    let metric = format!(
        "candor_tool_outcomes_total{{service=\"e2e-shop\",tool=\"search\",target=\"{FAILING_TARGET}\",class=\"access_failure\",source=\"adapter\"}}"
    );
    assert_eq!(dashboards.sample(&metric).await, Some(8.0));
    // The terminal events arrive with the spans.
    wait_for(
        "8 terminal failure events",
        Duration::from_secs(30),
        || async {
            let overview = dashboards.json("/api/overview?range=15m").await;
            (overview["failures"]["by_target"][FAILING_TARGET] == 8).then_some(())
        },
    )
    .await;

    // The spike fires and reaches the receiver.
    wait_for(
        "the spike alert at the receiver",
        Duration::from_secs(30),
        || async {
            receiver
                .alerts()
                .iter()
                .any(|alert| {
                    alert["labels"]["alertname"] == "CandorAccessFailureSpike"
                        && alert["labels"]["target"] == FAILING_TARGET
                })
                .then_some(())
        },
    )
    .await;
    dashboards
        .wait_alert("the spike shown as delivered", |a| {
            a["name"] == "CandorAccessFailureSpike" && a["delivery"] == "delivered"
        })
        .await;
    let alerts = dashboards.json("/api/alerts").await;
    assert!(
        alerts
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "CandorWatchdog" && a["state"] == "firing"),
        "{alerts:#}"
    );

    // In a real browser: the banner, the hops, the numbers, the spike, the hostile target as
    // text, and no script.
    let expect = serde_json::json!({
        "banner": "live",
        "hops": { "collector": "live", "kafka": "live", "table": "live" },
        "panels": { "panel-rates-target": "live", "panel-spikes": "live" },
        "targets": {
            OK_TARGET: { "calls": 20, "success": 20, "access_failure": 0 },
            FAILING_TARGET: { "calls": 8, "access_failure": 8, "rate": "100.0 %", "terminal": 8 },
            HOSTILE_TARGET: { "calls": 2, "success": 2 },
        },
        "text_present": [HOSTILE_TARGET],
        "alerts": { "CandorAccessFailureSpike": { "state": "firing", "delivery": "delivered" } },
    });
    dashboards::assert_in_browser(&dashboards, expect, "dashboards-live").await;

    // The shipped Grafana dashboards read only series this /metrics serves (or the shipped
    // recording rules make), with labels those series carry, and never sum declared and
    // derived calls together.
    let (_, served) = dashboards.get("/metrics").await;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec = serde_json::json!({
        "dashboards": [
            repo.join("dashboards/grafana/candor-overview.json"),
            repo.join("dashboards/grafana/candor-pipeline.json"),
        ],
        "rules": [repo.join("dashboards/prometheus/candor.rules.yml")],
        "metrics": [served],
    });
    let checked = run_python_client("grafana_queries.py", &spec, Duration::from_secs(60)).await;
    assert!(checked["queries"].as_u64() > Some(40), "{checked}");
    assert_eq!(checked["problems"], serde_json::json!([]), "{checked:#}");

    // A hostile target renders as text.
    let (status, page) = dashboards.get("/").await;
    assert_eq!(status, Some(200));
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(
        !page.contains(HOSTILE_TARGET),
        "the hostile target is in the page unescaped"
    );
    assert!(
        !page.contains("<script"),
        "the page carries a script element"
    );

    // The forensic view reads the table and the tail, as `candor incident` does.
    let events = dashboards
        .json(&format!(
            "/api/events?target={}&since=15m",
            FAILING_TARGET.replace(':', "%3A").replace('/', "%2F")
        ))
        .await;
    let rows = events["envelope"]["outcome"]["payload"]["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rows.len(), 8, "{events:#}");
    // Filtered to a class none of them has, the page shows no row and no summary of them.
    let encoded = FAILING_TARGET.replace(':', "%3A").replace('/', "%2F");
    let (status, page) = dashboards
        .get(&format!("/events?target={encoded}&since=15m&class=partial"))
        .await;
    assert_eq!(status, Some(200), "{page}");
    assert!(page.contains("0 event(s)"), "{page}");
    assert!(
        !page.contains("8 exhausted"),
        "the summary counts rows filtered out:\n{page}"
    );

    // Stop the collector: its hop and the panels go STALE, the pipeline-stale alert fires. The
    // times are printed for RELIABILITY.md.
    let stopped = Instant::now();
    collector.process().terminate().await;
    wait_hop(&dashboards, "collector", "stale").await;
    let stale_after = stopped.elapsed();
    let overview = dashboards.json("/api/overview?range=15m").await;
    assert_eq!(
        overview["coverage"]["freshness"]["state"], "stale",
        "{}",
        overview["coverage"]
    );
    let (_, page) = dashboards.get("/").await;
    assert!(page.contains("data-state=\"stale\""), "{page}");
    assert_no_confirmed_zero(&page);
    wait_for(
        "the collector's stale alert at the receiver",
        Duration::from_secs(30),
        || async {
            receiver
                .alerts()
                .iter()
                .any(|alert| {
                    alert["labels"]["alertname"] == "CandorPipelineStale"
                        && alert["labels"]["hop"] == "collector"
                })
                .then_some(())
        },
    )
    .await;
    eprintln!(
        "collector stopped: STALE after {stale_after:?}, CandorPipelineStale at the receiver \
         after {:?}",
        stopped.elapsed()
    );
    // The CLI does not call the stretch since the collector stopped "no failures" either.
    let silent = candor(
        &root,
        &[
            "incident",
            "--target",
            "never-called",
            "--since",
            "2m",
            "--kafka",
            &tansu.bootstrap,
        ],
    );
    assert_eq!(silent.code, 3, "{}\n{}", silent.stdout, silent.stderr);
    assert!(!silent.stdout.contains("No failures"), "{}", silent.stdout);

    // Then the compactor: the table's watermark stops.
    let stopped = Instant::now();
    compactor.process().terminate().await;
    wait_hop(&dashboards, "table", "stale").await;
    eprintln!(
        "compactor stopped: table STALE after {:?}",
        stopped.elapsed()
    );

    // Then Kafka.
    let stopped = Instant::now();
    tansu.stop().await;
    wait_hop(&dashboards, "kafka", "stale").await;
    eprintln!("Kafka stopped: STALE after {:?}", stopped.elapsed());
    let (_, page) = dashboards.get("/").await;
    assert_no_confirmed_zero(&page);
    let expect = serde_json::json!({
        "banner": "stale",
        "hops": { "collector": "stale", "kafka": "stale", "table": "stale" },
        "panels": { "panel-rates-target": "stale", "panel-failures": "stale", "panel-spikes": "stale" },
        "no_confirmed_zero": true,
    });
    dashboards::assert_in_browser(&dashboards, expect, "dashboards-stale").await;

    // Everything back: LIVE again.
    tansu.restart().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    for hop in ["kafka", "collector", "table"] {
        wait_hop(&dashboards, hop, "live").await;
    }
    drop(collector);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&broker_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_that_reached_nobody_is_shown_undelivered_then_retried() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("dashboards-undelivered");
    // Nothing listens on the receiver's port yet.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/api/v2/alerts");
    let mut args = fast_args();
    // The notifier's adapter reports its own failures to the pipeline.
    args.extend([
        "--otlp-endpoint".to_owned(),
        collector.grpc_endpoint.clone(),
    ]);
    let dashboards = Dashboards::start(
        &tansu.bootstrap,
        &root,
        dashboards::Options {
            rules: Some(RULES.into()),
            webhooks: vec![url.clone()],
            args,
            ..dashboards::Options::default()
        },
    )
    .await;
    let watchdog = |alerts: &Value| -> Option<Value> {
        alerts
            .as_array()?
            .iter()
            .find(|a| a["name"] == "CandorWatchdog")
            .cloned()
    };
    let undelivered = wait_for(
        "the watchdog shown undelivered",
        Duration::from_secs(30),
        || async {
            let alerts = dashboards.json("/api/alerts").await;
            watchdog(&alerts).filter(|alert| alert["delivery"] == "undelivered")
        },
    )
    .await;
    assert!(
        undelivered["reason"].as_str().unwrap().contains("connect"),
        "{undelivered:#}"
    );
    assert!(
        dashboards
            .sample("candor_notifications_total{result=\"failed\"}")
            .await
            >= Some(1.0)
    );
    let (_, page) = dashboards.get("/").await;
    assert!(page.contains("UNDELIVERED"), "{page}");
    // The failed delivery is itself an AccessFailure event: through the collector and Kafka it
    // comes back to the dashboards' own failure panel, under the webhook's URL.
    wait_for(
        "the undelivered notification as a failure event",
        Duration::from_secs(60),
        || async {
            let overview = dashboards.json("/api/overview?range=15m").await;
            (overview["failures"]["by_target"][url.as_str()].as_u64() >= Some(1)).then_some(())
        },
    )
    .await;

    // The receiver comes up: the next resend is delivered.
    let receiver = Receiver::start(Some(port)).await;
    wait_for(
        "the watchdog delivered",
        Duration::from_secs(30),
        || async {
            let alerts = dashboards.json("/api/alerts").await;
            watchdog(&alerts).filter(|alert| alert["delivery"] == "delivered")
        },
    )
    .await;
    assert!(
        receiver
            .alerts()
            .iter()
            .any(|alert| alert["labels"]["alertname"] == "CandorWatchdog"),
        "{:?}",
        receiver.alerts()
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_browser_client_fails_on_wrong_numbers_confirmed_zeros_and_scripts() {
    // browser.py against pages deliberately broken in each way it must catch.
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/clients/browser_selftest.py");
    let output = std::process::Command::new(candor_e2e::python())
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("6 passed, 0 failed"), "{stdout}");
}

/// An alert nobody acknowledged within `alerts.escalate_after` of firing goes to the escalation
/// receiver too, once; one acknowledged in time never does, and the first receiver hears of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_nobody_acknowledged_in_time_reaches_the_escalation_receiver() {
    let first = Receiver::start(None).await;
    let escalation = Receiver::start(None).await;
    let rules = "[[rule]]\nname = \"Unattended\"\nkind = \"watchdog\"\n\
                 [[rule]]\nname = \"TakenOn\"\nkind = \"watchdog\"\n";
    // Nothing is sent again on its own within the test; the rules run without a broker once
    // Kafka has not been reached for fast_args' kafka-stale-after.
    let mut args = fast_args_resending_every("10m");
    args.extend(
        [
            "--escalation-webhook",
            &escalation.url,
            "--escalate-after",
            "4s",
        ]
        .map(str::to_owned),
    );
    let dashboards = Dashboards::start(
        "127.0.0.1:1",
        &tempdir("escalation"),
        dashboards::Options {
            rules: Some(rules.into()),
            webhooks: vec![first.url.clone()],
            args,
            ..dashboards::Options::default()
        },
    )
    .await;
    dashboards
        .wait_alert("TakenOn firing", |a| {
            a["name"] == "TakenOn" && a["state"] == "firing"
        })
        .await;
    let (status, body) = candor_e2e::collector::post_json(
        &dashboards.address,
        "/api/alerts/ack",
        r#"{"name": "TakenOn", "labels": {}}"#,
    )
    .await;
    assert_eq!(status, Some(200), "{body}");
    let escalated = dashboards
        .wait_alert("Unattended escalated and delivered", |a| {
            a["name"] == "Unattended" && a["escalated"]["delivery"] == "delivered"
        })
        .await;
    assert!(escalated["acknowledged"].is_null(), "{escalated}");
    // Through more evaluations, nothing else is escalated or sent again.
    crate::monitor_restart::wait_saves(&dashboards, 4.0).await;
    let alerts = dashboards.json("/api/alerts").await;
    let taken = alerts
        .as_array()
        .and_then(|all| all.iter().find(|a| a["name"] == "TakenOn"))
        .expect("TakenOn");
    assert!(taken["escalated"].is_null(), "{taken}");
    let names = |receiver: &Receiver| -> Vec<String> {
        let mut names: Vec<String> = receiver
            .alerts()
            .iter()
            .filter_map(|alert| alert["labels"]["alertname"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&escalation), ["Unattended"]);
    assert_eq!(names(&first), ["TakenOn", "Unattended"]);
}
