//! `candor reconcile` over records that went the whole way: adapters exporting OTLP to the real
//! collector, Kafka, the real compactor and its tail. One instance's records all arrive and every
//! window matches; another's span exports go nowhere while its counter arrives, and every call
//! it failed is reported missing, in the windows where it failed.

use std::time::{Duration, SystemTime};

use candor_adapter::otlp::{self, OtlpConfig, OtlpGuard};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::dashboards::{self, Dashboards};
use candor_e2e::query::candor;
use candor_e2e::tansu::Tansu;
use candor_e2e::{free_port, rfc3339, tempdir, wait_for};
use candor_schema::OutcomeClass;
use serde_json::Value;

use crate::ingest::json;

const HEALTHY: &str = "http://inventory.test/v1/healthy";
const LOSSY: &str = "http://inventory.test/v1/lossy";

fn config(endpoint: &str, instance: &str) -> OtlpConfig {
    let mut config = OtlpConfig::new(endpoint, "checkout");
    config.service_instance_id = Some(instance.into());
    // Many counter points, so that calls end close to collections and many windows close.
    config.metric_interval = Duration::from_millis(300);
    config.span_interval = Duration::from_millis(100);
    config
}

pub(crate) fn adapter(
    target: &str,
    spans: &OtlpGuard,
    counters: &OtlpGuard,
) -> Adapter<HttpClassifier> {
    Adapter::builder("inventory", target)
        .classifier(
            HttpClassifier::new(NotFound::Unreachable)
                .items_at("/items")
                .total_at("/total"),
        )
        .retry(RetryPolicy::default().with_max_attempts(2).unwrap())
        .tracer_provider(spans.tracer_provider())
        .meter_provider(counters.meter_provider())
        .build()
        .unwrap()
}

/// The n-th call's script: successes, partials, exhausted and permanent AccessFailures.
fn script(n: usize) -> Vec<candor_adapter::classify::http::HttpExchange> {
    match n % 5 {
        0 => vec![json(200, r#"{"items":[1]}"#)],
        1 => vec![json(200, r#"{"items":[1],"total":3}"#)],
        2 => vec![json(503, ""), json(503, "")],
        3 => vec![json(400, "")],
        _ => vec![json(503, ""), json(200, r#"{"items":[2]}"#)],
    }
}

/// Flushes both signals of `guard`, off the async threads (the SDK blocks while it exports).
pub(crate) async fn flush(guard: &OtlpGuard) {
    let tracer = guard.tracer_provider().clone();
    let meter = guard.meter_provider().clone();
    tokio::task::spawn_blocking(move || {
        tracer.force_flush().unwrap();
        meter.force_flush().unwrap();
    })
    .await
    .unwrap();
}

fn sum(rows: &[Value], class: &str, column: &str) -> u64 {
    rows.iter()
        .filter(|row| row["class"] == class)
        .map(|row| row[column].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_matches_every_window_of_a_whole_pipeline_and_sizes_each_loss() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("reconcile");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = collector.covered_since().await;

    let healthy = otlp::providers(config(&collector.grpc_endpoint, "checkout-1")).unwrap();
    // The second instance's spans go to a port nobody listens on; its counter reaches the
    // collector: every event of its failed calls is lost between adapter and table.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let lost_spans = otlp::providers(config(&nowhere, "checkout-2")).unwrap();
    let counted = otlp::providers(config(&collector.grpc_endpoint, "checkout-2")).unwrap();
    let healthy_adapter = adapter(HEALTHY, &healthy, &healthy);
    let lossy_adapter = adapter(LOSSY, &lost_spans, &counted);

    // Calls spread over a few seconds, so that they end on both sides of many collections. The
    // lossy instance fails only in the middle second; before and after it only succeeds.
    let mut lossy_failed = [0u64; 2]; // access_failure, partial
    for n in 0..120 {
        let tool = ScriptedTool::returning(script(n));
        healthy_adapter.call(|ctx| tool.attempt(ctx)).await;
        let failing = (40..80).contains(&n);
        let tool = ScriptedTool::returning(if failing { script(n) } else { script(0) });
        match lossy_adapter.call(|ctx| tool.attempt(ctx)).await.class() {
            OutcomeClass::AccessFailure => lossy_failed[0] += 1,
            OutcomeClass::Partial => lossy_failed[1] += 1,
            OutcomeClass::Success | OutcomeClass::Empty => {}
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    flush(&healthy).await;
    let counter = counted.meter_provider().clone();
    tokio::task::spawn_blocking(move || counter.force_flush().unwrap())
        .await
        .unwrap();
    let until = SystemTime::now();
    // The answers below claim the window only once a heartbeat shows the pipeline reached its end.
    collector.heartbeat_after_now().await;
    assert_eq!(lossy_failed, [16, 8], "the scripts' classes changed");

    let window = |target: &str| {
        vec![
            "reconcile".to_owned(),
            "--since".into(),
            rfc3339(since),
            "--until".into(),
            rfc3339(until),
            "--slack".into(),
            "50ms".into(),
            "--target".into(),
            target.to_owned(),
            "--kafka".into(),
            tansu.bootstrap.clone(),
            "--live".into(),
        ]
    };
    let args = window(HEALTHY);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let matched = candor(&root, &args);
    assert_eq!(
        (matched.code, matched.class().as_str()),
        (1, "empty"),
        "{}\n{}",
        matched.stdout,
        matched.stderr
    );
    let summary = matched.json()["summary"][0].as_str().unwrap().to_owned();
    // Two series (access_failure, partial), each collected about every 300 ms for 3 s or more.
    assert!(summary.starts_with("2 counter series, "), "{summary}");
    let windows: u64 = summary
        .split(", ")
        .nth(1)
        .and_then(|part| part.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(windows >= 10, "{summary}");
    assert!(
        summary.contains(&format!(
            "{windows} matched, 0 with a gap; 0 event(s) missing"
        )),
        "{summary}"
    );

    let args = window(LOSSY);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lossy = candor(&root, &args);
    assert_eq!(lossy.code, 0, "{}\n{}", lossy.stdout, lossy.stderr);
    let rows = lossy.rows();
    assert!(
        rows.iter().all(|row| row["instance"] == "checkout-2"
            && row["target"] == LOSSY
            && row["extra"] == 0
            && row["missing"].as_u64().unwrap() > 0),
        "{rows:#?}"
    );
    assert_eq!(sum(&rows, "access_failure", "missing"), lossy_failed[0]);
    assert_eq!(sum(&rows, "partial", "missing"), lossy_failed[1]);
    // Each gap is reported in the window it appeared in: there, the counter counted what was
    // missing and no event arrived.
    for row in &rows {
        assert_eq!(row["counted"], row["missing"], "{row:#}");
        assert_eq!(row["events"], 0, "{row:#}");
    }
    let summary = lossy.json()["summary"][0].as_str().unwrap().to_owned();
    assert!(
        summary.contains(&format!(
            "{} event(s) missing",
            lossy_failed[0] + lossy_failed[1]
        )),
        "{summary}"
    );

    // The dashboards' scheduled reconciliation finds the same gap over the whole pipeline, and
    // the events-lost alert fires on it.
    let dashboards = Dashboards::start(
        &tansu.bootstrap,
        &root,
        dashboards::Options {
            rules: Some(
                "[[rule]]\nname = \"CandorEventsLost\"\nkind = \"reconcile_mismatch\"\n\
                 for = \"0s\"\nafter = \"15m\"\n"
                    .into(),
            ),
            args: [
                "--reconcile-every",
                "1s",
                "--reconcile-range",
                "10m",
                "--reconcile-settle",
                "1s",
                "--evaluate-every",
                "500ms",
            ]
            .map(str::to_owned)
            .to_vec(),
            ..dashboards::Options::default()
        },
    )
    .await;
    let missing = lossy_failed[0] + lossy_failed[1];
    wait_for(
        "the dashboards' reconciliation to cover its window",
        Duration::from_secs(60),
        || async {
            (dashboards.sample("candor_reconcile_covered").await == Some(1.0)).then_some(())
        },
    )
    .await;
    let found = dashboards
        .sample("candor_reconcile_events{gap=\"missing\"}")
        .await;
    assert_eq!(found, Some(missing as f64));
    assert_eq!(
        dashboards
            .sample("candor_reconcile_events{gap=\"extra\"}")
            .await,
        Some(0.0)
    );
    dashboards
        .wait_alert(
            "the events-lost alert firing on the missing events",
            |alert| {
                alert["name"] == "CandorEventsLost"
                    && alert["state"] == "firing"
                    && alert["labels"]["gap"] == "missing"
            },
        )
        .await;

    healthy.shutdown().unwrap();
    counted.shutdown().unwrap();
    drop(lost_spans);
    let _ = std::fs::remove_dir_all(&root);
}
