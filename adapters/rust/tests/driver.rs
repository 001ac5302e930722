//! The retry driver on a fake clock: schedules, `Retry-After`, budgets, and what the envelope
//! records.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::time::Duration;

use bytes::Bytes;
use candor_adapter::classify::http::{
    BodyEnd, HttpExchange, HttpResponse, TransportError, TransportErrorKind,
};
use candor_adapter::testing::{FakeClock, ScriptedTool, Step};
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_schema::{
    AccessFailureKind, FailureKind, NextAction, Outcome, OutcomeClass, RetryAction,
};
use http::{HeaderMap, HeaderValue, StatusCode};
use opentelemetry::metrics::noop::NoopMeterProvider;
use opentelemetry::trace::noop::NoopTracerProvider;

fn status(code: u16) -> HttpExchange {
    status_with(code, &[], "")
}

fn status_with(code: u16, headers: &[(&'static str, &str)], body: &str) -> HttpExchange {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    Ok(HttpResponse {
        status: StatusCode::from_u16(code).unwrap(),
        headers: map,
        body: Bytes::from(body.to_owned()),
        body_end: BodyEnd::Complete,
        received_at: std::time::SystemTime::UNIX_EPOCH,
    })
}

fn refused() -> HttpExchange {
    Err(TransportError {
        kind: TransportErrorKind::Connect,
        message: "connection refused".into(),
    })
}

struct Harness {
    clock: FakeClock,
    adapter: Adapter<HttpClassifier, FakeClock>,
}

fn harness(policy: RetryPolicy, deadline: Duration) -> Harness {
    let clock = FakeClock::default();
    let adapter = Adapter::builder("search", "http://search.test/v1")
        .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items"))
        .clock(clock.clone())
        .retry(policy)
        .attempt_timeout(Duration::from_secs(2))
        .deadline(deadline)
        .jitter_seed(42)
        .tracer_provider(&NoopTracerProvider::new())
        .meter_provider(&NoopMeterProvider::new())
        .build()
        .unwrap();
    Harness { clock, adapter }
}

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(max_attempts)
        .unwrap()
        .with_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .unwrap()
}

#[tokio::test]
async fn transient_failures_are_retried_with_the_seeded_full_jitter_schedule() {
    let run = || async {
        let h = harness(policy(4), Duration::from_secs(60));
        let tool = ScriptedTool::returning([
            status(500),
            status(502),
            refused(),
            status_with(200, &[], r#"{"items":[1]}"#),
        ]);
        let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
        (envelope, h.clock.slept(), tool.attempts())
    };
    let (envelope, slept, attempts) = run().await;
    assert_eq!(envelope.class(), OutcomeClass::Success);
    assert_eq!(attempts, 4);
    let actions: Vec<_> = envelope.attempts().iter().map(|a| a.retry_action).collect();
    assert_eq!(
        actions,
        [
            Some(RetryAction::Retry),
            Some(RetryAction::Retry),
            Some(RetryAction::Retry),
            None
        ]
    );
    // The waits are the recorded backoffs, each under its doubling ceiling.
    let backoffs: Vec<Duration> = envelope
        .attempts()
        .iter()
        .filter_map(|a| a.backoff_ms.map(Duration::from_millis))
        .collect();
    assert_eq!(backoffs.len(), 3);
    for (index, (backoff, ceiling)) in backoffs.iter().zip([100, 200, 400]).enumerate() {
        assert!(
            *backoff <= Duration::from_millis(ceiling),
            "wait {index}: {backoff:?}"
        );
    }
    assert_eq!(
        slept
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect::<Vec<_>>(),
        backoffs
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect::<Vec<_>>()
    );
    // The same seed replays the same schedule.
    let (_, replayed, _) = run().await;
    assert_eq!(replayed, slept);
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let h = harness(policy(3), Duration::from_secs(60));
    let tool = ScriptedTool::returning([
        status_with(429, &[("retry-after", "3")], ""),
        status_with(200, &[], r#"{"items":[1,2]}"#),
    ]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    assert_eq!(envelope.class(), OutcomeClass::Success);
    assert_eq!(h.clock.slept(), [Duration::from_secs(3)]);
    assert_eq!(envelope.attempts()[0].backoff_ms, Some(3000));
    assert_eq!(
        envelope.attempts()[0].failure_kind,
        Some(FailureKind::RateLimited)
    );
}

#[tokio::test]
async fn an_exhausted_budget_is_an_access_failure_never_empty() {
    let h = harness(policy(3), Duration::from_secs(60));
    let tool = ScriptedTool::returning([status(503), status(503), status(503)]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    assert_eq!(envelope.class(), OutcomeClass::AccessFailure);
    assert_eq!(tool.attempts(), 3);
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.final_action(), RetryAction::Exhausted);
    assert_eq!(
        envelope.attempts().last().unwrap().retry_action,
        Some(RetryAction::Exhausted)
    );
    assert_eq!(
        envelope.next_actions(),
        [NextAction::Retry, NextAction::Escalate]
    );
}

#[tokio::test]
async fn empty_is_never_retried() {
    let h = harness(policy(5), Duration::from_secs(60));
    let tool = ScriptedTool::returning([status_with(200, &[], r#"{"items":[]}"#)]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    assert_eq!(envelope.class(), OutcomeClass::Empty);
    assert_eq!(tool.attempts(), 1);
    assert!(h.clock.slept().is_empty());
    assert_eq!(envelope.attempts()[0].retry_action, None);
}

#[tokio::test]
async fn permanent_failures_are_not_retried() {
    for code in [400, 401, 403, 404] {
        let h = harness(policy(5), Duration::from_secs(60));
        let tool = ScriptedTool::returning([status(code)]);
        let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
        assert_eq!(envelope.class(), OutcomeClass::AccessFailure, "{code}");
        assert_eq!(tool.attempts(), 1, "{code}");
        assert_eq!(
            envelope.attempts()[0].retry_action,
            Some(RetryAction::Permanent),
            "{code}"
        );
        assert_eq!(envelope.next_actions(), [NextAction::Escalate], "{code}");
    }
}

#[tokio::test]
async fn a_hanging_attempt_times_out_and_is_labelled_by_the_adapter() {
    let h = harness(policy(2), Duration::from_secs(60));
    let tool = ScriptedTool::new([Step::Hang, Step::Hang]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Timeout);
    assert_eq!(failure.status, None);
    assert_eq!(failure.final_action(), RetryAction::Exhausted);
    assert_eq!(envelope.attempts().len(), 2);
    assert!(envelope.attempts().iter().all(|a| a.duration_ms == 2000));
}

#[tokio::test]
async fn the_deadline_cuts_an_attempt_short_and_ends_the_call() {
    // Attempt timeout 2 s, deadline 3 s: the second attempt gets what is left of the deadline.
    let h = harness(policy(5), Duration::from_secs(3));
    let tool = ScriptedTool::new([Step::Hang, Step::Hang, Step::Hang]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Deadline);
    assert_eq!(failure.final_action(), RetryAction::Exhausted);
    assert!(
        h.clock.elapsed() <= Duration::from_secs(3),
        "{:?}",
        h.clock.elapsed()
    );
    assert_eq!(
        envelope.attempts().last().unwrap().retry_action,
        Some(RetryAction::Exhausted)
    );
}

#[tokio::test]
async fn a_partial_is_accepted_not_retried() {
    let h = harness(policy(3), Duration::from_secs(60));
    let tool = ScriptedTool::returning([status_with(
        200,
        &[("x-total-count", "9")],
        r#"{"items":[1,2]}"#,
    )]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    assert_eq!(envelope.class(), OutcomeClass::Partial);
    assert_eq!(tool.attempts(), 1);
    assert_eq!(
        envelope.attempts()[0].retry_action,
        Some(RetryAction::AcceptPartial)
    );
}

#[tokio::test]
async fn the_envelope_records_every_attempt_and_its_provenance() {
    let h = harness(policy(3), Duration::from_secs(60));
    let tool = ScriptedTool::returning([
        status(500),
        status_with(200, &[("x-request-id", "req-9")], r#"{"items":[7]}"#),
    ]);
    let envelope = h.adapter.call(|ctx| tool.attempt(ctx)).await;
    let attempts = envelope.attempts();
    assert_eq!(
        attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(attempts[0].class, OutcomeClass::AccessFailure);
    assert_eq!(attempts[0].status, Some(500));
    assert_eq!(attempts[0].error_type.as_deref(), Some("500"));
    assert_eq!(attempts[1].class, OutcomeClass::Success);
    assert!(attempts[1].started_at >= attempts[0].started_at);
    let provenance = envelope.provenance();
    assert_eq!(&*provenance.source_system, "search.test");
    assert_eq!(&*provenance.adapter, candor_adapter::ADAPTER_VERSION);
    assert!(provenance.finished_at >= provenance.started_at);
    assert_eq!(envelope.evidence().unwrap().value, "req-9");
}

#[test]
fn invalid_settings_are_refused_by_name() {
    let err = Adapter::builder("", "x")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .build()
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "tool name must not be empty");
    let err = Adapter::builder("t", "x")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .attempt_timeout(Duration::ZERO)
        .build()
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "attempt_timeout must be positive, got 0ns");
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Every future here completes on its first poll: the fake clock's sleeps and the scripted
    /// tool's answers are immediate.
    fn now<F: std::future::Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        match future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("a fake-clock call did not complete at once"),
        }
    }

    fn exchange(choice: u8) -> HttpExchange {
        match choice % 9 {
            0 => status(500),
            1 => status_with(429, &[("retry-after", "1")], ""),
            2 => status(401),
            3 => status_with(200, &[], r#"{"items":[]}"#),
            4 => status_with(200, &[], r#"{"items":[1]}"#),
            5 => refused(),
            6 => status_with(200, &[], r#"{"items":[1],"total":3}"#),
            7 => status(408),
            _ => status_with(200, &[], "not json"),
        }
    }

    proptest! {
        #[test]
        fn no_call_ends_empty_after_an_access_failure(
            script in prop::collection::vec(any::<u8>(), 1..8),
            max_attempts in 1u32..6,
            seed in any::<u64>(),
        ) {
            let clock = FakeClock::default();
            let adapter = Adapter::builder("search", "http://search.test/v1")
                .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items").total_at("/total"))
                .clock(clock)
                .retry(policy(max_attempts))
                .jitter_seed(seed)
                .tracer_provider(&NoopTracerProvider::new())
                .meter_provider(&NoopMeterProvider::new())
                .build()
                .unwrap();
            // Padded so that the tool never runs out before the policy does.
            let padded = ScriptedTool::returning(
                script.iter().copied().map(exchange).chain((0..8).map(|_| status(500))),
            );
            let envelope = now(adapter.call(|ctx| padded.attempt(ctx)));
            let attempts = envelope.attempts();
            let last = attempts.last().unwrap();

            prop_assert!(attempts.len() as u32 <= max_attempts);
            prop_assert_eq!(last.class, envelope.class());
            prop_assert_eq!(padded.attempts() as usize, attempts.len());
            if last.class == OutcomeClass::AccessFailure {
                prop_assert_ne!(envelope.class(), OutcomeClass::Empty);
                prop_assert!(matches!(
                    last.retry_action,
                    Some(RetryAction::Exhausted | RetryAction::Permanent)
                ));
            }
            // Every attempt before the last was a transient failure that was retried.
            for attempt in &attempts[..attempts.len() - 1] {
                prop_assert_eq!(attempt.class, OutcomeClass::AccessFailure);
                prop_assert_eq!(attempt.retry_action, Some(RetryAction::Retry));
            }
        }
    }
}
