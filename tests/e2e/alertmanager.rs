//! Alertmanager as the receiver: the dashboards' notifications reach a real Alertmanager, and a
//! silence created there acknowledges the alert it covers, by the silence's author, so that it is
//! not escalated; an alert no silence covers escalates as before.

use std::time::Duration;

use candor_e2e::alertmanager::Alertmanager;
use candor_e2e::dashboards::{self, Dashboards, Receiver};
use candor_e2e::{tempdir, wait_for};

use crate::dashboards::fast_args_resending_every;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_in_alertmanager_acknowledges_the_alert_and_stops_its_escalation() {
    let alertmanager = Alertmanager::start().await;
    let escalation = Receiver::start(None).await;
    let rules = "[[rule]]\nname = \"Silenced\"\nkind = \"watchdog\"\n\
                 [[rule]]\nname = \"Unattended\"\nkind = \"watchdog\"\n";
    let mut args = fast_args_resending_every("10m");
    args.extend(
        [
            "--escalation-webhook",
            &escalation.url,
            "--escalate-after",
            "8s",
        ]
        .map(str::to_owned),
    );
    // No broker: the rules run once Kafka has not been reached for fast_args' kafka-stale-after.
    let dashboards = Dashboards::start(
        "127.0.0.1:1",
        &tempdir("alertmanager-ack"),
        dashboards::Options {
            rules: Some(rules.into()),
            webhooks: vec![alertmanager.alerts_url()],
            args,
            ..dashboards::Options::default()
        },
    )
    .await;
    wait_for(
        "both alerts at Alertmanager",
        Duration::from_secs(60),
        || async {
            let held = alertmanager.alerts().await;
            let names: Vec<&str> = held
                .as_array()?
                .iter()
                .filter_map(|alert| alert["labels"]["alertname"].as_str())
                .collect();
            (names.contains(&"Silenced") && names.contains(&"Unattended")).then_some(())
        },
    )
    .await;
    let silence = alertmanager.silence("Silenced", "sre-on-call").await;

    let acknowledged = dashboards
        .wait_alert("Silenced acknowledged", |a| {
            a["name"] == "Silenced" && !a["acknowledged"].is_null()
        })
        .await;
    assert_eq!(
        acknowledged["acknowledged"]["by"],
        format!("sre-on-call (Alertmanager silence {silence})"),
        "{acknowledged}"
    );
    dashboards
        .wait_alert("Unattended escalated and delivered", |a| {
            a["name"] == "Unattended" && a["escalated"]["delivery"] == "delivered"
        })
        .await;
    // Past the escalation time of both, through more evaluations: only the one nobody
    // acknowledged reached the escalation receiver.
    crate::monitor_restart::wait_saves(&dashboards, 4.0).await;
    let names: Vec<String> = escalation
        .alerts()
        .iter()
        .filter_map(|alert| alert["labels"]["alertname"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(names, ["Unattended"]);
    assert!(
        dashboards
            .sample("candor_dashboards_silence_reads_total{result=\"read\"}")
            .await
            .is_some_and(|reads| reads >= 1.0)
    );
}
