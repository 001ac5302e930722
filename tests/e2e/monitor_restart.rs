//! The dashboards' own restart: killed with SIGKILL and started again over the same state
//! directory, they keep what was firing without notifying it a second time, and an alert whose
//! condition ended while they were down resolves with one resolve. A webhook receiver counts
//! every notification across both kills.

use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::dashboards::{self, Dashboards, Receiver};
use candor_e2e::tansu::Tansu;
use candor_e2e::{tempdir, wait_for};
use serde_json::Value;

use crate::dashboards::{fast_args_resending_every, wait_hop_within};

/// The pipeline-stale rule alone, with a short `after`, and a `for` that outlasts the hop's
/// flapping when the collector's last heartbeats are read a moment late.
const RULES: &str = r#"
[[rule]]
name = "CandorPipelineStale"
kind = "pipeline_stale"
after = "3s"
for = "2s"
"#;

/// The notifications of the collector hop's stale alert: (firing, resolved).
fn collector_notifications(receiver: &Receiver) -> (usize, usize) {
    let ours: Vec<Value> = receiver
        .alerts()
        .into_iter()
        .filter(|alert| {
            alert["labels"]["alertname"] == "CandorPipelineStale"
                && alert["labels"]["hop"] == "collector"
        })
        .collect();
    let resolved = ours.iter().filter(|a| a.get("endsAt").is_some()).count();
    (ours.len() - resolved, resolved)
}

/// The collector hop's alert instance on `/api/alerts`, when it is there.
async fn collector_alert(dashboards: &Dashboards) -> Option<Value> {
    dashboards
        .json("/api/alerts")
        .await
        .as_array()?
        .iter()
        .find(|alert| {
            alert["name"] == "CandorPipelineStale" && alert["labels"]["hop"] == "collector"
        })
        .cloned()
}

/// Writes of the alert instances to the state store so far.
async fn saves(dashboards: &Dashboards) -> f64 {
    dashboards
        .sample("candor_dashboards_state_saves_total{result=\"saved\"}")
        .await
        .unwrap_or(0.0)
}

/// Waits until the dashboards have saved `more` times after now: as many evaluations ran.
pub(crate) async fn wait_saves(dashboards: &Dashboards, more: f64) {
    let from = saves(dashboards).await;
    wait_for(
        &format!("{more} more saves of the alert state"),
        Duration::from_secs(60),
        || async { (saves(dashboards).await >= from + more).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firing_alert_survives_kill_9_unrepeated_and_resolves_once_after_the_next() {
    let tansu = Tansu::start().await;
    let mut collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("monitor-restart");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let receiver = Receiver::start(None).await;
    // A firing alert is sent again only after ten minutes: any repeat in this test is the
    // restart's.
    let options = dashboards::Options {
        rules: Some(RULES.into()),
        webhooks: vec![receiver.url.clone()],
        args: fast_args_resending_every("10m"),
        state_dir: Some(tempdir("monitor-restart-state")),
        ..dashboards::Options::default()
    };
    let mut dashboards = Dashboards::start(&tansu.bootstrap, &root, options.clone()).await;
    wait_hop_within(&dashboards, "collector", "live", Duration::from_secs(60)).await;

    // The collector stops: its hop's alert fires and reaches the receiver once.
    collector.process().kill().await;
    wait_for(
        "the collector's stale alert at the receiver",
        Duration::from_secs(60),
        || async { (collector_notifications(&receiver).0 == 1).then_some(()) },
    )
    .await;
    wait_for(
        "the notification shown as delivered",
        Duration::from_secs(30),
        || async {
            let alert = collector_alert(&dashboards).await?;
            (alert["delivery"] == "delivered").then_some(())
        },
    )
    .await;
    wait_saves(&dashboards, 1.0).await;

    // Killed and started again: the alert is still firing, and through several evaluations
    // after the stream caught up nothing is sent again.
    dashboards.kill().await;
    let mut dashboards = Dashboards::start(&tansu.bootstrap, &root, options.clone()).await;
    let restored = collector_alert(&dashboards)
        .await
        .expect("the alert restored at start");
    assert_eq!(restored["state"], "firing", "{restored}");
    assert_eq!(restored["delivery"], "delivered", "{restored}");
    wait_saves(&dashboards, 6.0).await;
    let after = collector_alert(&dashboards).await.expect("the alert");
    assert_eq!(after["state"], "firing", "{after}");
    assert_eq!(
        after["fired_at"], restored["fired_at"],
        "the same episode: {after}"
    );
    assert_eq!(
        collector_notifications(&receiver),
        (1, 0),
        "a restart notified again: {:#?}",
        receiver.alerts()
    );

    // Killed again; the collector comes back while the dashboards are down. Started again,
    // they resolve the alert and send one resolve.
    dashboards.kill().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    collector.heartbeat_after_now().await;
    let dashboards = Dashboards::start(&tansu.bootstrap, &root, options).await;
    wait_for(
        "the resolve at the receiver",
        Duration::from_secs(60),
        || async { (collector_notifications(&receiver).1 >= 1).then_some(()) },
    )
    .await;
    wait_saves(&dashboards, 6.0).await;
    assert_eq!(
        collector_notifications(&receiver),
        (1, 1),
        "one firing and one resolve: {:#?}",
        receiver.alerts()
    );
    let resolved = collector_alert(&dashboards).await.expect("the alert");
    assert_eq!(resolved["state"], "resolved", "{resolved}");
}
