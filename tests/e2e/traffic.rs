//! The traffic commands through the real pipeline: `candor canary` sends one call of each class
//! per round, and `candor demo`'s services show every failure kind on the dashboards, whose spike
//! alert fires when the spike scenario is switched on.

use std::process::{Command, Stdio};
use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::dashboards::{self, Dashboards};
use candor_e2e::kafka::read_topic;
use candor_e2e::tansu::Tansu;
use candor_e2e::{free_port, target_dir, tempdir, wait_for};
use candor_records::proto::{OutcomeCount, OutcomeEvent};
use candor_schema::names::topic;
use prost::Message as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_sends_one_call_of_each_class_per_round() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let output = Command::new(target_dir().join("candor"))
        .args([
            "canary",
            "--interval",
            "200ms",
            "--rounds",
            "2",
            "--otlp-endpoint",
        ])
        .arg(&collector.grpc_endpoint)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("round 2: success, empty, partial, access_failure"),
        "{stderr}"
    );
    // Two rounds: a Partial and an AccessFailure event each.
    let events = read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        4,
        Duration::from_secs(30),
    );
    let mut classes: Vec<String> = events
        .iter()
        .map(|record| OutcomeEvent::decode(record.payload.as_slice()).unwrap())
        .inspect(|event| {
            assert_eq!(event.tool_target, "candor://canary");
            assert_eq!(event.service_name, "candor-canary");
        })
        .map(|event| event.outcome_class)
        .collect();
    classes.sort();
    assert_eq!(
        classes,
        ["access_failure", "access_failure", "partial", "partial"]
    );
    // The counters count every class, two calls each.
    let points = read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_COUNTS,
        4,
        Duration::from_secs(30),
    );
    let mut newest = std::collections::BTreeMap::new();
    for record in &points {
        let point = OutcomeCount::decode(record.payload.as_slice()).unwrap();
        let value = newest.entry(point.outcome_class.clone()).or_insert(0);
        *value = (*value).max(point.value);
    }
    assert_eq!(
        newest.into_iter().collect::<Vec<_>>(),
        [
            ("access_failure".to_owned(), 2),
            ("empty".to_owned(), 2),
            ("partial".to_owned(), 2),
            ("success".to_owned(), 2)
        ]
    );
}

/// Kills the demo when the test ends, however it ends.
struct Demo(std::process::Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_every_failure_kind_and_its_spike_fires_the_alert() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("demo");
    let dashboards = Dashboards::start(
        &tansu.bootstrap,
        &root,
        dashboards::Options {
            rules: Some(
                "[[rule]]\nname = \"CandorAccessFailureSpike\"\nkind = \"spike\"\nmin_events = 5\n"
                    .into(),
            ),
            args: vec!["--evaluate-every".into(), "500ms".into()],
            ..dashboards::Options::default()
        },
    )
    .await;
    let (tools, control) = (free_port(), free_port());
    let _demo = Demo(
        Command::new(target_dir().join("candor"))
            .args(["demo", "--rate", "4", "--metric-interval", "1s"])
            .args(["--tools-addr", &format!("127.0.0.1:{tools}")])
            .args(["--control-addr", &format!("127.0.0.1:{control}")])
            .args(["--otlp-endpoint", &collector.grpc_endpoint])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Every failure kind, and an adapter instance of each of the demo's three services (each
    // reports with its own first export, which may come after the others' failures).
    let services_of = |overview: &serde_json::Value| -> Vec<String> {
        let services: std::collections::BTreeSet<String> = overview["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|instance| instance["service"].as_str().map(str::to_owned))
            .collect();
        services.into_iter().collect()
    };
    wait_for(
        "every failure kind and every demo service on the dashboards",
        Duration::from_secs(90),
        || async {
            let overview = dashboards.json("/api/overview?range=15m").await;
            (dashboards::shows_failure_kinds(&overview, &dashboards::DEMO_FAILURE_KINDS)
                && services_of(&overview) == ["checkout", "reporting", "support-bot"])
            .then_some(())
        },
    )
    .await;

    // The spike scenario: the healthy catalog starts failing, and the spike alert fires for it.
    let catalog = format!("http://127.0.0.1:{tools}/catalog");
    let (status, body) =
        candor_e2e::collector::post(&format!("127.0.0.1:{control}"), "/scenario/spike").await;
    assert_eq!(status, Some(200), "{body}");
    wait_for(
        "the spike alert on the catalog",
        Duration::from_secs(90),
        || async {
            let alerts = dashboards.json("/api/alerts").await;
            alerts
                .as_array()?
                .iter()
                .any(|alert| {
                    alert["name"] == "CandorAccessFailureSpike"
                        && alert["labels"]["target"] == catalog.as_str()
                        && alert["state"] == "firing"
                })
                .then_some(())
        },
    )
    .await;
    let _ = std::fs::remove_dir_all(&root);
}
