//! With the `otlp` setup pointed at a collector that is not there, calls still complete and the
//! lost telemetry is counted.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::time::Duration;

use candor_adapter::otlp::{OtlpConfig, init};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, FnClassifier, RetryPolicy};
use candor_schema::{AccessFailureKind, Failure, Outcome, OutcomeClass};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_never_wait_on_a_missing_collector_and_failed_exports_are_counted() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let telemetry = init(OtlpConfig::new(endpoint, "collector-down-test")).unwrap();

    let adapter = Adapter::builder("queue", "queue://orders")
        .classifier(FnClassifier::new(|(): ()| Outcome::<()>::AccessFailure {
            failure: Failure {
                kind: AccessFailureKind::Connect,
                retryable: false,
                message: "broker unreachable".into(),
                status: None,
                error_type: Some("connect".into()),
                retry_after_ms: None,
            },
        }))
        .retry(RetryPolicy::no_retry())
        .attempt_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
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
    assert!(
        telemetry.failed_span_exports() > 0,
        "spans lost to the missing collector were not counted"
    );
}
