//! Faults under load: the collector killed -9, the broker restarted. An acknowledged event is
//! never lost.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::kafka::event_targets;
use candor_e2e::tansu::Tansu;
use candor_e2e::wait_for;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

use crate::ingest::{outcome_event, trace_request};

/// Targets of the events in request `n` of client `client`.
fn targets(client: usize, n: usize, per_request: usize) -> Vec<String> {
    (0..per_request)
        .map(|i| format!("c{client}-r{n}-e{i}"))
        .collect()
}

fn request_of(
    targets: &[String],
) -> opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
    trace_request(
        targets
            .iter()
            .map(|t| outcome_event("access_failure", t))
            .collect(),
    )
}

/// Fails naming what is missing when an acknowledged event is not in the events topic.
fn assert_all_stored(bootstrap: &str, acknowledged: &BTreeSet<String>) {
    let stored: BTreeSet<String> =
        event_targets(bootstrap, acknowledged.len(), Duration::from_secs(60))
            .into_iter()
            .collect();
    let missing: Vec<&String> = acknowledged.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged events missing, e.g. {:?}",
        missing.len(),
        acknowledged.len(),
        &missing[..missing.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_event_survives_a_kill_9_of_the_collector() {
    const CLIENTS: usize = 4;
    const PER_REQUEST: usize = 20;
    let tansu = Tansu::start().await;
    let mut collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let endpoint = collector.grpc_endpoint.clone();
        let acknowledged = acknowledged.clone();
        clients.push(tokio::spawn(async move {
            let Ok(mut grpc) = TraceServiceClient::connect(endpoint).await else {
                return;
            };
            for n in 0..10_000 {
                let targets = targets(client, n, PER_REQUEST);
                match grpc.export(request_of(&targets)).await {
                    Ok(_) => acknowledged.lock().unwrap().extend(targets),
                    Err(_) => return,
                }
            }
        }));
    }
    // Kill the collector once it has acknowledged a fair amount, mid-stream.
    let counter = acknowledged.clone();
    wait_for("400 acknowledged events", Duration::from_secs(60), || {
        let counter = counter.clone();
        async move { (counter.lock().unwrap().len() >= 400).then_some(()) }
    })
    .await;
    collector.process().kill().await;
    for client in clients {
        client.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_all_stored(&tansu.bootstrap, &acknowledged);
}

/// Ignored: Tansu 0.6's SQLite engine panics in `idempotent_message_check` ("more or less than
/// one row") on the first idempotent produce after a restart, and from then on times every
/// produce out. The collector does what it must (UNAVAILABLE with RetryInfo, nothing
/// acknowledged), but the run cannot complete. Run it with `--run-ignored all` against a broker
/// that keeps idempotent producer state across restarts.
#[ignore = "Tansu 0.6's SQLite engine loses idempotent producer state on restart"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_loses_no_acknowledged_event() {
    const REQUESTS: usize = 60;
    const PER_REQUEST: usize = 10;
    let dir = std::env::temp_dir().join(format!("candor-e2e-tansu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut tansu = Tansu::start_durable(&dir).await;
    let collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[kafka]\ndelivery_timeout = \"2s\"\n".into()),
            ..Options::default()
        },
    )
    .await;
    let mut grpc = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let mut acknowledged = BTreeSet::new();
    let mut unavailable = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    for n in 0..REQUESTS {
        if n == REQUESTS / 3 {
            tansu.stop().await;
        }
        let targets = targets(0, n, PER_REQUEST);
        loop {
            match grpc.export(request_of(&targets)).await {
                Ok(_) => break,
                Err(status) => {
                    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                    assert!(
                        std::time::Instant::now() < deadline,
                        "request {n} still unavailable at the deadline: {status:?}"
                    );
                    unavailable += 1;
                    if unavailable == 1 {
                        // The collector has noticed; bring the broker back.
                        tansu.restart().await;
                    }
                    // A client honouring RetryInfo waits as long as it says before sending again.
                    use tonic_types::StatusExt as _;
                    let delay = status
                        .get_details_retry_info()
                        .and_then(|info| info.retry_delay)
                        .expect("UNAVAILABLE carries RetryInfo");
                    tokio::time::sleep(delay).await;
                }
            }
        }
        acknowledged.extend(targets);
    }
    assert!(unavailable > 0, "the broker outage was never noticed");
    assert_all_stored(&tansu.bootstrap, &acknowledged);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_crash_mid_stream_gets_retryable_answers_and_loses_no_acknowledged_event() {
    const PER_REQUEST: usize = 10;
    let dir = std::env::temp_dir().join(format!("candor-e2e-tansu-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut tansu = Tansu::start_durable(&dir).await;
    let mut collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[kafka]\ndelivery_timeout = \"2s\"\n".into()),
            ..Options::default()
        },
    )
    .await;
    let mut grpc = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let mut acknowledged = BTreeSet::new();
    let mut unavailable = 0;
    for n in 0..200 {
        if n == 20 {
            tansu.kill().await;
        }
        let targets = targets(0, n, PER_REQUEST);
        match grpc.export(request_of(&targets)).await {
            Ok(_) => acknowledged.extend(targets),
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                use tonic_types::StatusExt as _;
                assert!(status.get_details_retry_info().is_some(), "{status:?}");
                unavailable += 1;
                if unavailable == 3 {
                    break;
                }
            }
        }
    }
    assert!(
        unavailable == 3,
        "the broker crash was never answered as unavailable"
    );
    assert!(acknowledged.len() >= 20 * PER_REQUEST);
    // The collector goes first, so that nothing is produced into the restarted broker.
    collector.process().kill().await;
    tansu.restart().await;
    assert_all_stored(&tansu.bootstrap, &acknowledged);
    let _ = std::fs::remove_dir_all(&dir);
}
