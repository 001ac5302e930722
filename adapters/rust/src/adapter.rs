//! The adapter: a configured tool that runs calls through classification, retry and telemetry.

use std::borrow::Cow;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use candor_schema::{
    AccessFailureKind, Attempt, Authority, Envelope, EnvelopeParts, Evidence, EvidenceKind,
    Failure, Lifecycle, Operation, Outcome, Provenance, RetryAction, Timestamp,
};

use crate::classify::{Classification, Classify};
use crate::clock::{Clock, TokioClock};
use crate::follow::{NoFollow, ReadStatus};
use crate::retry::{Decision, Jitter, RetryPolicy};
use crate::telemetry::{CallTrace, Telemetry, Transition, event_time};

mod builder;
mod following;
mod repeat;

pub use builder::{AdapterBuilder, BuildError, NoClassifier};
use repeat::not_sent_again;
pub use repeat::{IdempotencyKey, NOT_SENT_AGAIN};

/// The adapter and its version, as recorded in every envelope's provenance.
pub const ADAPTER_VERSION: &str = concat!(env!("CARGO_PKG_NAME"), "/", env!("CARGO_PKG_VERSION"));

/// What an operation is told about the attempt it is making.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptContext {
    /// 1-based.
    pub number: u32,
    /// How long this attempt may take before the adapter abandons it.
    pub timeout: Duration,
    /// The call's idempotency key, the same for every attempt of the call, when the adapter
    /// makes one ([`AdapterBuilder::idempotency_key`]): the operation sends it unchanged in the
    /// `Idempotency-Key` header.
    pub idempotency_key: Option<IdempotencyKey>,
}

/// A tool wrapped by Candor: every [`Adapter::call`] returns an [`Envelope`] of exactly one of
/// four classes, after the retry policy has run, with telemetry recorded.
///
/// Build one adapter per tool and share it (it is `Send + Sync` when its classifier is): each
/// build registers the `tool.outcomes` callback with the meter once more.
pub struct Adapter<C, K = TokioClock, S = NoFollow> {
    tool: Arc<str>,
    target: Arc<str>,
    classifier: C,
    clock: K,
    status: S,
    operation_deadline: Duration,
    policy: RetryPolicy,
    attempt_timeout: Duration,
    deadline: Duration,
    source_system: Arc<str>,
    actor: Option<Arc<str>>,
    authority: Option<Authority>,
    jitter: Jitter,
    telemetry: Telemetry,
    /// Whether a call may be sent again after an attempt that may have been applied.
    repeatable: bool,
    idempotency_key: bool,
}

impl<C, K: Clock, S> Adapter<C, K, S> {
    /// The logical tool name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The target, credentials redacted.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Runs one call: attempts `operation` under the retry policy, classifies each result, and
    /// returns the envelope of the final attempt.
    ///
    /// An attempt that outlasts the attempt timeout is an AccessFailure `timeout`; one cut short
    /// by the call's deadline is an AccessFailure `deadline`. A budget that runs out returns the
    /// last AccessFailure with its action `exhausted`, never an Empty. An answer that accepted an
    /// asynchronous operation is returned as it is, a Success whose lifecycle is `accepted`;
    /// [`Adapter::resume`] can follow the operation later.
    pub async fn call<R, F, Fut>(&self, operation: F) -> Envelope<C::Payload>
    where
        C: Classify<R>,
        F: FnMut(AttemptContext) -> Fut,
        Fut: Future<Output = R>,
    {
        let run = self.attempt(operation).await;
        self.finish(run)
    }

    /// Runs one call like [`Adapter::call`] and, when its answer accepted an asynchronous
    /// operation, follows the operation to its end: `read_status` makes one status request, and
    /// the adapter's status reader ([`AdapterBuilder::follow`]) reads its result.
    ///
    /// Status reads wait the retry policy's backoff, never less than the source's `Retry-After`;
    /// a read that fails transiently is tried again, up to the policy's attempts in a row. The
    /// call ends when the operation does, or as an AccessFailure `deadline` carrying the last
    /// state read when the operation deadline runs out first (see [`crate::follow`]). The
    /// envelope's attempts are the start's, then one for the following, from the acceptance to
    /// the end.
    pub async fn call_and_follow<R, F, Fut, Q, QFut, QR>(
        &self,
        operation: F,
        read_status: Q,
    ) -> Envelope<C::Payload>
    where
        C: Classify<R>,
        S: ReadStatus<QR, Payload = C::Payload>,
        F: FnMut(AttemptContext) -> Fut,
        Fut: Future<Output = R>,
        Q: FnMut(&Operation, AttemptContext) -> QFut,
        QFut: Future<Output = QR>,
    {
        let run = self.attempt(operation).await;
        let accepted = match run.last.outcome {
            Outcome::Success { .. } => self.status.accepted(&run.last),
            _ => None,
        };
        let Some(accepted) = accepted else {
            return self.finish(run);
        };
        let first_wait = self
            .poll_wait(1)
            .max(run.last.poll_after.unwrap_or_default());
        let mut transitions = run.transitions;
        let mut trace = run.trace;
        if transitions.is_empty() {
            // An acceptance the classifier did not report as one (an operation resource).
            let acceptance = Transition {
                at: run
                    .attempts
                    .last()
                    .map_or(run.started_wall + run.finished, event_time),
                lifecycle: Lifecycle::Accepted {
                    operation: accepted.clone(),
                },
                evidence: run.last.evidence.clone(),
            };
            self.telemetry.transition(&mut trace, &acceptance);
            transitions.push(acceptance);
        }
        let start = Start {
            started: run.started,
            started_wall: run.started_wall,
            accepted_at: run.finished,
            attempts: run.attempts,
            evidence: run.last.evidence,
            transitions,
            trace,
        };
        let run = self.follow(start, accepted, first_wait, read_status).await;
        self.finish(run)
    }

    /// Follows an operation accepted by an earlier call that did not wait (its envelope's
    /// `lifecycle.operation`) to its end, as [`Adapter::call_and_follow`] does. The first
    /// status read is made at once; the operation deadline counts from now.
    pub async fn resume<Q, QFut, QR>(
        &self,
        operation: Operation,
        read_status: Q,
    ) -> Envelope<S::Payload>
    where
        S: ReadStatus<QR>,
        Q: FnMut(&Operation, AttemptContext) -> QFut,
        QFut: Future<Output = QR>,
    {
        let started_wall = self.clock.wall();
        let start = Start {
            started: self.clock.now(),
            started_wall,
            accepted_at: Duration::ZERO,
            attempts: Vec::with_capacity(1),
            evidence: Some(Evidence {
                kind: EvidenceKind::JobId,
                value: operation.id.clone(),
            }),
            // The acceptance was seen by the call that returned it.
            transitions: Vec::new(),
            trace: CallTrace::new(started_wall),
        };
        let run = self
            .follow(start, operation, Duration::ZERO, read_status)
            .await;
        self.finish(run)
    }

    /// Attempts `operation` under the retry policy, classifying each result.
    async fn attempt<R, F, Fut>(&self, mut operation: F) -> Run<C::Payload>
    where
        C: Classify<R>,
        F: FnMut(AttemptContext) -> Fut,
        Fut: Future<Output = R>,
    {
        // One wall-clock and one monotonic reading start the call; every later time is an offset
        // from them, so that each attempt costs one more monotonic reading and nothing else.
        let started = self.clock.now();
        let started_wall = self.clock.wall();
        let wall_at = |offset: Duration| Timestamp::new(started_wall + offset);
        let mut attempts = Vec::with_capacity(1);
        let mut trace = CallTrace::new(started_wall);
        let mut number = 0;
        let mut attempt_offset = Duration::ZERO;
        let idempotency_key = self.idempotency_key.then(IdempotencyKey::new);
        let (last, finished) = loop {
            number += 1;
            let deadline_left = self.deadline.saturating_sub(attempt_offset);
            let timeout = self.attempt_timeout.min(deadline_left);
            let context = AttemptContext {
                number,
                timeout,
                idempotency_key,
            };
            let raw = race(operation(context), || self.clock.sleep(timeout)).await;
            let mut classification = match raw {
                Some(raw) => self.classifier.classify(raw),
                None => Classification::new(Outcome::AccessFailure {
                    failure: timed_out(timeout, timeout < self.attempt_timeout),
                }),
            };
            if !self.repeatable
                && let Outcome::AccessFailure { failure } = &mut classification.outcome
            {
                not_sent_again(failure);
            }
            let elapsed = self.clock.now().saturating_duration_since(started);
            let mut decision = self.policy.decide(
                number,
                elapsed,
                &classification.outcome,
                self.jitter.next_fraction(),
            );
            if let Decision::Retry { after } = decision
                && elapsed.saturating_add(after) >= self.deadline
            {
                decision = Decision::GiveUp {
                    action: RetryAction::Exhausted,
                };
            }
            let outcome = &classification.outcome;
            let failure = match outcome {
                Outcome::AccessFailure { failure } => Some(failure),
                _ => None,
            };
            attempts.push(Attempt {
                number,
                started_at: wall_at(attempt_offset),
                duration_ms: millis(elapsed.saturating_sub(attempt_offset)),
                class: outcome.class(),
                failure_kind: outcome.failure_kind(),
                status: failure.and_then(|f| f.status),
                retry_action: decision.action(outcome),
                backoff_ms: match decision {
                    Decision::Retry { after } => Some(millis(after)),
                    _ => None,
                },
                error_type: failure.and_then(|f| f.error_type.clone()),
            });
            match decision {
                Decision::Retry { after } => {
                    // The failed attempt's event happens now, not when the call ends.
                    if let Some(attempt) = attempts.last() {
                        self.telemetry
                            .retried(&mut trace, attempt, self.policy.max_attempts());
                    }
                    self.clock.sleep(after).await;
                    attempt_offset = self.clock.now().saturating_duration_since(started);
                }
                Decision::Done | Decision::GiveUp { .. } => break (classification, elapsed),
            }
        };
        // A lifecycle in the answer is a state of an operation the call saw, when it ended.
        let seen_at = attempts.last().map_or(started_wall + finished, event_time);
        let transitions: Vec<Transition> = last
            .lifecycle
            .iter()
            .map(|lifecycle| Transition {
                at: seen_at,
                lifecycle: lifecycle.clone(),
                evidence: last.evidence.clone(),
            })
            .collect();
        for transition in &transitions {
            self.telemetry.transition(&mut trace, transition);
        }
        Run {
            started,
            started_wall,
            last,
            attempts,
            finished,
            transitions,
            trace,
        }
    }

    /// Builds the envelope of a finished run and records its telemetry.
    fn finish<P>(&self, run: Run<P>) -> Envelope<P> {
        let envelope = Envelope::new(EnvelopeParts {
            tool: self.tool.clone(),
            target: self.target.clone(),
            outcome: run.last.outcome,
            authority: self.authority.clone(),
            provenance: Provenance {
                source_system: self.source_system.clone(),
                actor: self.actor.clone(),
                adapter: Cow::Borrowed(ADAPTER_VERSION),
                started_at: Timestamp::new(run.started_wall),
                finished_at: Timestamp::new(run.started_wall + run.finished),
            },
            evidence: run.last.evidence,
            attempts: run.attempts,
            lifecycle: run.last.lifecycle,
        });
        self.telemetry
            .record(&envelope, self.policy.max_attempts(), run.trace);
        envelope
    }
}

/// A call's attempts and where they ended.
struct Run<P> {
    started: Instant,
    started_wall: SystemTime,
    /// The final classification.
    last: Classification<P>,
    attempts: Vec<Attempt>,
    /// From the call's start to its end.
    finished: Duration,
    /// The states of an asynchronous operation the call saw, in order.
    transitions: Vec<Transition>,
    /// The call's span, once it has had an event.
    trace: CallTrace,
}

/// What following an operation starts from: the call that accepted it.
struct Start {
    started: Instant,
    started_wall: SystemTime,
    /// From the call's start to the acceptance.
    accepted_at: Duration,
    attempts: Vec<Attempt>,
    /// The acceptance's evidence (the operation's id).
    evidence: Option<Evidence>,
    /// The states of the operation the call saw before following it.
    transitions: Vec<Transition>,
    /// The call's span, once it has had an event.
    trace: CallTrace,
}

/// Polls `operation` first, then the timer: `Some` with the operation's output, or `None` when
/// the timer completes first. The timer is made only if the operation does not answer on its
/// first poll, so an answer that is ready at once costs no timer.
async fn race<O, T>(operation: O, make_timer: impl FnOnce() -> T) -> Option<O::Output>
where
    O: Future,
    T: Future<Output = ()>,
{
    let mut operation = pin!(operation);
    let mut make_timer = Some(make_timer);
    let mut timer: Option<Pin<Box<T>>> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = operation.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        if let Some(make) = make_timer.take() {
            timer = Some(Box::pin(make()));
        }
        match timer.as_mut() {
            Some(timer) => timer.as_mut().poll(cx).map(|()| None),
            // `make_timer` was taken on the first pending poll and `timer` set with it.
            None => Poll::Pending,
        }
    })
    .await
}

/// The outcome of an attempt that produced no answer in time: labelled from the adapter's own
/// knowledge that a request went out and nothing came back.
fn timed_out(after: Duration, cut_by_deadline: bool) -> Failure {
    let (kind, message, error_type) = if cut_by_deadline {
        (
            AccessFailureKind::Deadline,
            format!("the call's deadline ran out {after:?} into the attempt, with no answer"),
            "deadline",
        )
    } else {
        (
            AccessFailureKind::Timeout,
            format!("no answer within the attempt timeout of {after:?}"),
            "timeout",
        )
    };
    Failure {
        kind,
        retryable: true,
        message,
        status: None,
        error_type: Some(error_type.into()),
        retry_after_ms: None,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The host part of a URL-like target, or the whole target when it is not a URL; cut as the
/// redaction cuts it ([`candor_schema::redact::UrlParts`]).
fn host_of(target: &str) -> &str {
    let parts = candor_schema::redact::UrlParts::of(target);
    if parts.scheme.is_empty() {
        target
    } else {
        parts.host
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn source_system_defaults_to_the_host() {
        assert_eq!(host_of("http://127.0.0.1:8080/x?y"), "127.0.0.1:8080");
        assert_eq!(host_of("https://REDACTED@api.example/v1"), "api.example");
        assert_eq!(host_of("https://bob:pa/ss@api.example/v1"), "api.example");
        assert_eq!(host_of("https://mastodon.example/@me"), "mastodon.example");
        assert_eq!(host_of("https://bob:12#34@api.example/v1"), "api.example");
        assert_eq!(host_of("orders-db"), "orders-db");
    }
}
