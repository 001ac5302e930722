//! The dashboards' history across a restart: the counters they serve continue where they were
//! (a real Prometheus scraping every second sees no reset and no phantom surge), and the panels
//! are built from the tables when the brokers hold nothing of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor, read_table};
use candor_e2e::dashboards::{self, Dashboards};
use candor_e2e::prometheus::Prometheus;
use candor_e2e::tansu::Tansu;
use candor_e2e::{free_port, tempdir, wait_for};
use serde_json::Value;

use crate::dashboards::{fast_args, target_row, wait_hop_within};
use crate::ingest::json;

const SERVICE: &str = "e2e-history";
const TARGET: &str = "http://history.test/v1/items";

/// The shipped Prometheus rules, whose spike alert reads the dashboards' counters.
fn shipped_rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/prometheus/candor.rules.yml")
}

/// An adapter instance exporting its counters every half second to `collector`.
fn telemetry(collector: &Collector) -> candor_adapter::otlp::OtlpGuard {
    let mut otlp = candor_adapter::otlp::OtlpConfig::new(collector.grpc_endpoint.clone(), SERVICE);
    otlp.service_instance_id = Some("history-1".into());
    otlp.metric_interval = Duration::from_millis(500);
    candor_adapter::otlp::init(otlp).unwrap()
}

fn adapter() -> Adapter<HttpClassifier> {
    Adapter::builder("search", TARGET)
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .retry(RetryPolicy::default().with_max_attempts(1).unwrap())
        .build()
        .unwrap()
}

/// One call: a 200, or a 503 when `failing`.
async fn call(adapter: &Adapter<HttpClassifier>, failing: bool) {
    let answer = if failing {
        json(503, "")
    } else {
        json(200, r#"{"items":[1]}"#)
    };
    let tool = ScriptedTool::returning([answer]);
    adapter.call(|ctx| tool.attempt(ctx)).await;
}

fn outcomes(class: &str) -> String {
    format!(
        "candor_tool_outcomes_total{{service=\"{SERVICE}\",tool=\"search\",target=\"{TARGET}\",\
         class=\"{class}\",source=\"adapter\"}}"
    )
}

/// How Prometheus counts the increase of the counters of a range query's answer from their
/// samples, summed, without extrapolation: each fall is a reset, after which the new value is
/// all new.
fn counted(answer: &Value) -> f64 {
    answer
        .as_array()
        .expect("a list of series")
        .iter()
        .map(counted_one)
        .sum()
}

fn counted_one(samples: &Value) -> f64 {
    let values: Vec<f64> = samples["values"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(|pair| pair[1].as_str()?.parse().ok())
        .collect();
    let first = values.first().copied().unwrap_or(0.0);
    let later: f64 = values
        .windows(2)
        .map(|pair| {
            if pair[1] >= pair[0] {
                pair[1] - pair[0]
            } else {
                pair[1]
            }
        })
        .sum();
    // A series is new at its first sample: what it holds then was counted from zero.
    first + later
}

/// Records of 50 other targets, failure events and their counter points over the last day,
/// produced straight to the brokers: a history long enough that reading it again takes seconds.
async fn preload_history(bootstrap: &str, records: u64) {
    let status = tokio::process::Command::new(candor_e2e::target_dir().join("candor-loadgen"))
        .args(["--raw-kafka", bootstrap, "--preload", &records.to_string()])
        .args(["--spread-s", "86400", "--counts"])
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .expect("candor-loadgen runs");
    assert!(status.success(), "candor-loadgen: {status}");
}

/// Calls at a steady rate, with a day of other targets' history produced between them, while
/// the dashboards are killed with SIGKILL and started again: under a real Prometheus scraping
/// every second, the counters never fall (a restart that served them while it read the history
/// again would serve less for seconds: a reset), what Prometheus counts over the run is the
/// calls made, and the shipped spike alert (10 failures in 5 minutes) is never pending for the
/// 7 failures made, as it would be were the history counted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counters_continue_across_a_kill_9_under_a_real_prometheus() {
    const CALLS: u64 = 210;
    const FAILURES: u64 = 7;
    const HISTORY: u64 = 300_000;
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("monitor-history");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let options = dashboards::Options {
        args: fast_args(),
        state_dir: Some(tempdir("monitor-history-state")),
        port: Some(free_port()),
        ..dashboards::Options::default()
    };
    let mut dashboards = Dashboards::start(&tansu.bootstrap, &root, options.clone()).await;
    // The dashboards hold the stream from the collector's first heartbeat before the calls
    // start, so that the adapter's counter counts from its first point.
    wait_hop_within(&dashboards, "collector", "live", Duration::from_secs(60)).await;
    let prometheus = Prometheus::start(&[&dashboards.address], &[&shipped_rules()]).await;

    let telemetry = telemetry(&collector);
    let adapter = adapter();
    for i in 0..CALLS {
        // The failures spread over the run, before and after the restart.
        call(&adapter, i % (CALLS / FAILURES) == 0).await;
        if i == CALLS / 6 {
            // Between this run's calls: replayed, they come before and after it.
            preload_history(&tansu.bootstrap, HISTORY).await;
        }
        if i == CALLS / 3 {
            wait_for(
                "the dashboards past the history",
                Duration::from_secs(120),
                || async {
                    let read = dashboards
                        .sample(
                            "candor_dashboards_records_total{topic=\"candor.outcome-events.v1\"}",
                        )
                        .await?;
                    (read >= HISTORY as f64).then_some(())
                },
            )
            .await;
            dashboards.kill().await;
        }
        if i == CALLS / 2 {
            dashboards = Dashboards::start(&tansu.bootstrap, &root, options.clone()).await;
        }
        // A steady rate of calls over about ten seconds, not a wait for anything.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let provider = telemetry.tracer_provider().clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();

    let succeeded = (CALLS - FAILURES) as f64;
    let seen = std::sync::Mutex::new((None, None));
    let counted_all = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let ok = dashboards.sample(&outcomes("success")).await;
            let failed = dashboards.sample(&outcomes("access_failure")).await;
            *seen.lock().unwrap() = (ok, failed);
            if ok == Some(succeeded) && failed == Some(FAILURES as f64) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    if counted_all.is_err() {
        let metrics = dashboards.get("/metrics").await.1;
        let set_aside: Vec<&str> = metrics
            .lines()
            .filter(|line| line.starts_with("candor_dashboards_points_set_aside_total"))
            .collect();
        let served = prometheus
            .query(&format!("{}[10m]", outcomes("success")))
            .await;
        panic!(
            "every call counted on /metrics: (success, access_failure) last served {:?}, \
             {succeeded} and {FAILURES} made; {set_aside:?}; Prometheus saw {served}",
            seen.lock().unwrap()
        );
    }
    wait_for(
        "every call seen by Prometheus",
        Duration::from_secs(30),
        || async {
            let ok = prometheus.scalar(&outcomes("success")).await;
            let failed = prometheus.scalar(&outcomes("access_failure")).await;
            (ok == Some(succeeded) && failed == Some(FAILURES as f64)).then_some(())
        },
    )
    .await;

    for (class, made) in [("success", succeeded), ("access_failure", FAILURES as f64)] {
        let series = outcomes(class);
        assert_eq!(
            prometheus.scalar(&format!("resets({series}[10m])")).await,
            Some(0.0),
            "{class}: the counter fell across the restart"
        );
        let samples = prometheus.query(&format!("{series}[10m]")).await;
        assert_eq!(
            counted(&samples),
            made,
            "{class}: Prometheus counted other than the calls made: {samples}"
        );
    }
    let failure_events =
        format!("candor_failure_events_total{{service=\"{SERVICE}\",target=\"{TARGET}\"}}");
    assert_eq!(
        prometheus
            .scalar(&format!("sum(resets({failure_events}[10m]))"))
            .await,
        Some(0.0),
        "the failure events' counter fell across the restart"
    );
    let samples = prometheus.query(&format!("{failure_events}[10m]")).await;
    assert_eq!(counted(&samples), FAILURES as f64, "{samples}");
    let spike = prometheus
        .query(&format!(
            "ALERTS{{alertname=\"CandorAccessFailureSpike\",target=\"{TARGET}\"}}[10m]"
        ))
        .await;
    assert_eq!(spike, Value::Array(Vec::new()), "the restart made a spike");
}

/// With the brokers out of reach, a start builds its panels from the tables alone: every call
/// the compactor stored is on the overview and in the counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panels_come_from_the_tables_when_kafka_holds_none_of_it() {
    const OK: u64 = 20;
    const FAILING: u64 = 5;
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("monitor-history-tables");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let telemetry = telemetry(&collector);
    let adapter = adapter();
    for i in 0..OK + FAILING {
        call(&adapter, i < FAILING).await;
    }
    let provider = telemetry.tracer_provider().clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();
    // The compactor stores the failure events and a counter point holding every call.
    wait_for(
        "the calls in the tables",
        Duration::from_secs(90),
        || async {
            let stored = |table: &str| -> Vec<Value> {
                if root.join(table).join("_delta_log").exists() {
                    read_table(&root, table)
                } else {
                    Vec::new()
                }
            };
            let events = stored("outcome_events").len();
            let newest_ok = stored("outcome_counts")
                .iter()
                .filter(|row| row["outcome_class"] == "success")
                .filter_map(|row| row["value"].as_u64())
                .max();
            (events == FAILING as usize && newest_ok == Some(OK)).then_some(())
        },
    )
    .await;

    // Nothing listens at the brokers' address: whatever the panels show came from the tables.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let dashboards = Dashboards::start(
        &nowhere,
        &root,
        dashboards::Options {
            args: fast_args(),
            ..dashboards::Options::default()
        },
    )
    .await;
    let row = wait_for(
        "the stored calls on the overview",
        Duration::from_secs(60),
        || async {
            let overview = dashboards.json("/api/overview?range=15m").await;
            let row = target_row(&overview, TARGET)?.clone();
            (row["counts"]["success"] == OK && row["counts"]["access_failure"] == FAILING)
                .then_some(row)
        },
    )
    .await;
    assert_eq!(row["counts"]["access_failure"], FAILING, "{row}");
    // The counters are served once the brokers have been out of reach for the Kafka hop's
    // staleness: they hold what the tables hold.
    wait_for(
        "the counters from the tables",
        Duration::from_secs(30),
        || async {
            let ok = dashboards.sample(&outcomes("success")).await;
            let failed = dashboards.sample(&outcomes("access_failure")).await;
            (ok == Some(OK as f64) && failed == Some(FAILING as f64)).then_some(())
        },
    )
    .await;
}
