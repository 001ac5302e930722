//! Each stage of the pipeline killed -9 in turn while `candor canary` runs: how long until its
//! hop turns STALE and `CandorPipelineStale` reaches the receiver, and that neither a panel nor a
//! `candor` answer says "no failures" for the stretch nobody saw. Each stage is started again and
//! every hop is LIVE, with no stale alert firing, before the next one is killed.
//!
//! By default the thresholds are short (hops STALE after 3–4 s, the alert after 3 s, a canary
//! round every 500 ms). `CANDOR_STAGE_THRESHOLDS=shipped` runs with the shipped ones instead
//! (the dashboards' default STALE thresholds, `dashboards/rules.toml`, a canary round a minute,
//! files every 60 s), about 20 minutes; the times printed are the figures in RELIABILITY.md.

use std::path::Path;
use std::time::{Duration, Instant};

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::dashboards::{self, Dashboards, Receiver};
use candor_e2e::process::Running;
use candor_e2e::query::{Answer, candor};
use candor_e2e::tansu::Tansu;
use candor_e2e::{target_dir, tempdir, wait_for};

use crate::dashboards::{RULES, assert_no_confirmed_zero, fast_args, wait_hop_within};

/// The canary's target (`candor canary`).
const CANARY: &str = "candor://canary";

/// The thresholds of one run.
struct Thresholds {
    /// What the run is called in its output.
    name: &'static str,
    /// The dashboards' rules file.
    rules: String,
    /// Extra dashboards flags.
    args: Vec<String>,
    /// Time between two canary rounds.
    canary_every: &'static str,
    /// The compactor's `files.max_age`.
    max_age: &'static str,
    /// The longest any wait of the run may take.
    patience: Duration,
}

fn thresholds() -> Thresholds {
    match std::env::var("CANDOR_STAGE_THRESHOLDS").as_deref() {
        Ok("shipped") => Thresholds {
            name: "shipped",
            rules: std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/rules.toml"),
            )
            .unwrap(),
            args: Vec::new(),
            canary_every: "60s",
            max_age: "60s",
            patience: Duration::from_secs(10 * 60),
        },
        Ok("fast") | Err(_) => Thresholds {
            name: "fast",
            rules: RULES.into(),
            args: fast_args(),
            canary_every: "500ms",
            max_age: "500ms",
            patience: Duration::from_secs(60),
        },
        Ok(other) => panic!("CANDOR_STAGE_THRESHOLDS={other}: expected fast or shipped"),
    }
}

/// Starts `candor canary` against the collector; it runs until dropped.
fn start_canary(collector: &Collector, every: &str) -> Running {
    let args = [
        "canary".to_owned(),
        "--interval".into(),
        every.into(),
        "--otlp-endpoint".into(),
        collector.grpc_endpoint.clone(),
    ];
    Running::spawn("canary", &target_dir().join("candor"), &args, &[])
}

/// Waits until no `CandorPipelineStale` instance is pending or firing.
async fn wait_no_stale_alert(dashboards: &Dashboards, patience: Duration) {
    wait_for("no pipeline-stale alert", patience, || async {
        let alerts = dashboards.json("/api/alerts").await;
        let active = alerts.as_array()?.iter().any(|a| {
            a["name"] == "CandorPipelineStale"
                && (a["state"] == "firing" || a["state"] == "pending")
        });
        (!active).then_some(())
    })
    .await;
}

/// Waits until the receiver got a firing `CandorPipelineStale` for `hop` among the alerts
/// after the first `seen`.
async fn wait_stale_alert_received(
    receiver: &Receiver,
    seen: usize,
    hop: &str,
    patience: Duration,
) {
    let what = format!("CandorPipelineStale for the {hop} hop at the receiver");
    wait_for(&what, patience, || async {
        receiver
            .alerts()
            .iter()
            .skip(seen)
            .any(|alert| {
                alert["labels"]["alertname"] == "CandorPipelineStale"
                    && alert["labels"]["hop"] == hop
                    && alert.get("endsAt").is_none()
            })
            .then_some(())
    })
    .await;
}

/// `candor incident` for the canary over the stretch since `since`.
fn incident_since(root: &Path, bootstrap: &str, since: Instant) -> Answer {
    let since = format!("{}ms", since.elapsed().as_millis());
    candor(
        root,
        &[
            "incident", "--target", CANARY, "--since", &since, "--kafka", bootstrap,
        ],
    )
}

/// What one killed stage showed.
struct Stage {
    stage: &'static str,
    stale_after: Duration,
    alert_after: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stage_killed_in_turn_under_the_canary_turns_stale_and_alerts_never_zero() {
    let thresholds = thresholds();
    let patience = thresholds.patience;
    let broker_dir = tempdir("stages-broker");
    let mut tansu = Tansu::start_durable(&broker_dir).await;
    let mut collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("stages");
    let compactor_options = compactor::Options {
        max_age: thresholds.max_age.into(),
        ..compactor::Options::default()
    };
    let mut compactor = Compactor::start(&tansu.bootstrap, &root, compactor_options.clone()).await;
    let receiver = Receiver::start(None).await;
    let dashboards = Dashboards::start(
        &tansu.bootstrap,
        &root,
        dashboards::Options {
            rules: Some(thresholds.rules.clone()),
            webhooks: vec![receiver.url.clone()],
            args: thresholds.args.clone(),
            ..dashboards::Options::default()
        },
    )
    .await;
    let mut canary = start_canary(&collector, thresholds.canary_every);
    let mut stages = Vec::new();

    for stage in ["collector", "compactor", "kafka"] {
        let hop = if stage == "compactor" { "table" } else { stage };
        for hop in ["collector", "kafka", "table"] {
            wait_hop_within(&dashboards, hop, "live", patience).await;
        }
        wait_no_stale_alert(&dashboards, patience).await;
        let seen = receiver.alerts().len();

        let killed = Instant::now();
        match stage {
            "collector" => collector.process().kill().await,
            "compactor" => compactor.process().kill().await,
            _ => tansu.kill().await,
        }
        wait_hop_within(&dashboards, hop, "stale", patience).await;
        let stale_after = killed.elapsed();
        // The panels read Kafka themselves: without the compactor they stay LIVE; without the
        // collector or Kafka they cannot.
        let overview = dashboards.json("/api/overview?range=15m").await;
        let freshness = &overview["coverage"]["freshness"]["state"];
        assert_eq!(
            freshness == "live",
            stage == "compactor",
            "{stage} killed: {}",
            overview["coverage"]
        );
        let (_, page) = dashboards.get("/").await;
        assert!(page.contains("data-state=\"stale\""), "{page}");
        assert_no_confirmed_zero(&page);
        wait_stale_alert_received(&receiver, seen, hop, patience).await;
        let alert_after = killed.elapsed();
        eprintln!(
            "[{}] {stage} killed: {hop} hop STALE after {stale_after:?}, CandorPipelineStale \
             at the receiver after {alert_after:?}",
            thresholds.name
        );

        // The CLI over the stretch since the kill.
        let answer = incident_since(&root, &tansu.bootstrap, killed);
        assert!(
            !answer.stdout.contains("No failures"),
            "{stage} killed: {}\n{}",
            answer.stdout,
            answer.stderr
        );
        if stage == "compactor" {
            // Kafka still holds what the canary sent: the tail finds its failures.
            assert_eq!(answer.code, 0, "{}\n{}", answer.stdout, answer.stderr);
        } else {
            // No heartbeats (a silent collector) or no Kafka: the stretch is not covered.
            assert_eq!(answer.code, 3, "{}\n{}", answer.stdout, answer.stderr);
        }
        stages.push(Stage {
            stage,
            stale_after,
            alert_after,
        });

        if stage == "kafka" {
            // The last stage: a browser sees every hop STALE and no confirmed zero.
            let expect = serde_json::json!({
                "banner": "stale",
                "hops": { "kafka": "stale" },
                "no_confirmed_zero": true,
            });
            dashboards::assert_in_browser(&dashboards, expect, "stages-kafka-killed").await;
            break;
        }
        // Started again: the canary's events flow once more.
        match stage {
            "collector" => {
                collector = Collector::start(&tansu.bootstrap, Options::default()).await;
                canary = start_canary(&collector, thresholds.canary_every);
            }
            _ => {
                // In the same group, at once: Tansu 0.6 expires the killed member only after
                // the new one joined and then leaves the group forming; the compactor notices
                // it is alone with no partition and joins again.
                compactor =
                    Compactor::start(&tansu.bootstrap, &root, compactor_options.clone()).await;
            }
        }
    }
    drop(canary);
    let summary: Vec<String> = stages
        .iter()
        .map(|s| {
            format!(
                "{} STALE {:.1} s, alert {:.1} s",
                s.stage,
                s.stale_after.as_secs_f64(),
                s.alert_after.as_secs_f64()
            )
        })
        .collect();
    eprintln!("[{}] {}", thresholds.name, summary.join("; "));
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&broker_dir);
}
