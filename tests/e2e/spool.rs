//! The collector's spool: while the broker is frozen, requests are kept on local disk and
//! acknowledged; the collector is crashed (abort, like `kill -9`) at each step a spooled record
//! goes through, started again on the same directory, and every acknowledged event reaches the
//! topic. A full spool answers UNAVAILABLE and keeps nothing of what it refused.

use std::collections::BTreeSet;
use std::time::Duration;

use candor_collector::sink::kafka::spool::fault::Point;
use candor_e2e::collector::{Collector, Options};
use candor_e2e::tansu::Tansu;
use candor_e2e::{tempdir, wait_for};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

use crate::faults::{assert_all_stored, request_of, targets};

const PER_REQUEST: usize = 5;

fn spooling(dir: &std::path::Path, crash_at: Option<String>) -> Options {
    Options {
        config: Some(format!(
            "[kafka]\ndelivery_timeout = \"1s\"\n[spool]\ndir = \"{}\"\n",
            dir.display()
        )),
        env: crash_at
            .map(|plan| vec![("CANDOR_SPOOL_CRASH_AT".to_owned(), plan)])
            .unwrap_or_default(),
        ..Options::default()
    }
}

/// Sends requests one after another until `requests` were sent or one was not acknowledged;
/// returns the targets of the acknowledged ones.
async fn send(collector: &Collector, round: usize, requests: usize) -> BTreeSet<String> {
    let mut acknowledged = BTreeSet::new();
    let Ok(mut grpc) = TraceServiceClient::connect(collector.grpc_endpoint.clone()).await else {
        return acknowledged;
    };
    for n in 0..requests {
        let targets = targets(round, n, PER_REQUEST);
        match grpc.export(request_of(&targets)).await {
            Ok(_) => acknowledged.extend(targets),
            Err(status) => {
                eprintln!("request {n} of round {round} not acknowledged: {status:?}");
                break;
            }
        }
    }
    acknowledged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_crashed_at_every_step_of_its_spool_loses_no_acknowledged_event() {
    for (round, point) in Point::ALL.into_iter().enumerate() {
        // The appends crash on the fourth commit (heartbeats are appended too), after a request
        // was acknowledged; the drainer's first attempt fails while the broker is frozen, so it
        // crashes on its second.
        let plan = match point {
            Point::Append | Point::Committed => format!("{}:4", point.as_str()),
            Point::Produce => format!("{}:2", point.as_str()),
            Point::Delivered | Point::Removed => point.as_str().to_owned(),
        };
        let tansu = Tansu::start().await;
        let dir = tempdir(&format!("spool-{}", point.as_str()));
        let mut collector =
            Collector::start(&tansu.bootstrap, spooling(&dir, Some(plan.clone()))).await;
        tansu.freeze().await;
        let acknowledged = send(&collector, round, 6).await;
        tansu.thaw().await;
        assert!(
            acknowledged.len() >= PER_REQUEST,
            "{plan}: only {} events acknowledged while spooling:\n{}",
            acknowledged.len(),
            collector.output()
        );
        wait_for(
            &format!("the collector to crash at {plan}"),
            Duration::from_secs(60),
            || {
                let exited = collector.process().exited();
                async move { exited.then_some(()) }
            },
        )
        .await;
        assert!(
            collector
                .output()
                .contains(&format!("crashing at spool point {plan}")),
            "{plan}: the collector ended without reaching its crash point:\n{}",
            collector.output()
        );

        // Started again on the same directory, it drains what the crashed one kept.
        let again = Collector::start(&tansu.bootstrap, spooling(&dir, None)).await;
        assert_all_stored(&tansu.bootstrap, &acknowledged);
        eprintln!(
            "{plan}: {} acknowledged events stored after the crash",
            acknowledged.len()
        );
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_answers_unavailable_and_what_it_acknowledged_is_stored() {
    let tansu = Tansu::start().await;
    let dir = tempdir("spool-full");
    let mut options = spooling(&dir, None);
    if let Some(config) = &mut options.config {
        // About three requests of five events fit.
        config.push_str("max_bytes = 4000\n");
    }
    let collector = Collector::start(&tansu.bootstrap, options).await;
    tansu.freeze().await;
    let mut grpc = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let mut acknowledged = BTreeSet::new();
    let mut refused = None;
    for n in 0..20 {
        let targets = targets(0, n, PER_REQUEST);
        match grpc.export(request_of(&targets)).await {
            Ok(_) => acknowledged.extend(targets),
            Err(status) => {
                refused = Some(status);
                break;
            }
        }
    }
    let refused = refused.expect("a spool of 4000 bytes filled up");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("spool is full"),
        "{}",
        refused.message()
    );
    assert!(!acknowledged.is_empty());
    let spooled = collector
        .sample("candor_collector_spool_records_total{action=\"refused\"}")
        .await;
    assert!(
        spooled.is_some_and(|n| n >= 1.0),
        "{}",
        collector.metrics().await
    );
    tansu.thaw().await;
    assert_all_stored(&tansu.bootstrap, &acknowledged);
    wait_for(
        "the spool to be drained",
        Duration::from_secs(60),
        || async {
            (collector.sample("candor_collector_spool_records").await == Some(0.0)
                && collector
                    .sample("candor_collector_spool_records_total{action=\"drained\"}")
                    .await
                    >= Some(acknowledged.len() as f64))
            .then_some(())
        },
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
