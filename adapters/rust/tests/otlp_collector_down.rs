//! With the `otlp` setup pointed at a collector that takes nothing (its port holds a listener
//! that closes every connection at once), calls still complete, the telemetry waits in a bounded
//! queue to be sent again, and what the queue cannot keep is dropped and counted.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::time::Duration;

use candor_adapter::otlp::{OtlpConfig, OtlpError, ResendConfig, init, providers};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, FnClassifier, RetryPolicy};
use candor_schema::{AccessFailureKind, Failure, Outcome, OutcomeClass};

/// An endpoint whose every connection is closed as soon as it is accepted. The port stays held,
/// so no other process of a parallel test run can take it and answer.
fn missing_collector() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for connection in listener.incoming() {
            drop(connection);
        }
    });
    endpoint
}

fn unreachable((): ()) -> Outcome<()> {
    Outcome::AccessFailure {
        failure: Failure {
            kind: AccessFailureKind::Connect,
            retryable: false,
            message: "broker unreachable".into(),
            status: None,
            error_type: Some("connect".into()),
            retry_after_ms: None,
        },
    }
}

type Unreachable = FnClassifier<fn(()) -> Outcome<()>>;

fn failing_adapter(tracer: &opentelemetry_sdk::trace::SdkTracerProvider) -> Adapter<Unreachable> {
    Adapter::builder("queue", "queue://orders")
        .classifier(FnClassifier::new(unreachable as fn(()) -> Outcome<()>))
        .retry(RetryPolicy::no_retry())
        .attempt_timeout(Duration::from_secs(1))
        .tracer_provider(tracer)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_never_wait_on_a_missing_collector_and_their_spans_wait_to_be_sent_again() {
    let telemetry = init(OtlpConfig::new(missing_collector(), "collector-down-test")).unwrap();
    let adapter = failing_adapter(telemetry.tracer_provider());
    let calls = 200;
    let tool = ScriptedTool::returning(vec![(); calls]);
    for _ in 0..calls {
        let envelope = adapter.call(|ctx| tool.attempt(ctx)).await;
        assert_eq!(envelope.class(), OutcomeClass::AccessFailure);
    }
    assert_eq!(tool.attempts() as usize, calls);

    let flushed = tokio::task::spawn_blocking({
        let provider = telemetry.tracer_provider().clone();
        move || provider.force_flush()
    })
    .await
    .unwrap();
    assert!(
        flushed.is_err(),
        "the flush to a missing collector cannot succeed"
    );
    let stats = telemetry.stats();
    assert!(stats.refused_sends > 0, "{stats:?}");
    assert!(stats.queued_batches > 0, "{stats:?}");
    assert_eq!((stats.sent_batches, stats.lost_spans), (0, 0), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_returns_keeps_the_queue_within_its_bounds_and_counts_every_drop() {
    const ROUNDS: u64 = 6;
    const CALLS: usize = 10;
    let mut config = OtlpConfig::new(missing_collector(), "collector-never-returns");
    // Only the flushes below export, one span batch each.
    config.span_interval = Duration::from_secs(3600);
    config.metric_interval = Duration::from_secs(3600);
    config.resend = ResendConfig {
        max_batches: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        // A send on a connection the far end closed can hang until this timeout.
        attempt_timeout: Duration::from_millis(200),
        ..ResendConfig::default()
    };
    config.shutdown_timeout = Duration::ZERO;
    let telemetry = providers(config).unwrap();
    let adapter = failing_adapter(telemetry.tracer_provider());
    for round in 1..=ROUNDS {
        let tool = ScriptedTool::returning(vec![(); CALLS]);
        for _ in 0..CALLS {
            adapter.call(|ctx| tool.attempt(ctx)).await;
        }
        let provider = telemetry.tracer_provider().clone();
        let flushed = tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .unwrap();
        assert!(flushed.is_err());
        let stats = telemetry.stats();
        // Two batches queued and one being sent again at most; the older ones are dropped.
        assert!(stats.queued_batches <= 3, "round {round}: {stats:?}");
        assert_eq!(
            stats.dropped_span_batches + stats.queued_batches,
            round,
            "round {round}: a batch is neither queued nor counted: {stats:?}"
        );
    }
    let before_shutdown = telemetry.stats();
    assert!(
        before_shutdown.dropped_span_batches >= ROUNDS - 3,
        "{before_shutdown:?}"
    );
    assert!(before_shutdown.lost_spans > 0, "{before_shutdown:?}");

    let shutdown = tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap();
    let Err(OtlpError::Shutdown { stats, .. }) = shutdown else {
        panic!("a shutdown that dropped batches must say so: {shutdown:?}");
    };
    // Every batch ended counted: dropped when the queue overflowed, the rest at shutdown.
    assert_eq!(stats.dropped_span_batches, ROUNDS, "{stats:?}");
    assert_eq!(
        (stats.queued_batches, stats.sent_batches),
        (0, 0),
        "{stats:?}"
    );
    assert!(stats.lost_spans >= ROUNDS * CALLS as u64, "{stats:?}");
}
