//! The adapter: a configured tool that runs calls through classification, retry and telemetry.

use std::borrow::Cow;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use candor_schema::redact::redact_url;
use candor_schema::{
    AccessFailureKind, Attempt, Authority, Envelope, EnvelopeParts, Failure, Outcome, Provenance,
    Timestamp,
};
use opentelemetry::metrics::MeterProvider;
use opentelemetry::trace::TracerProvider;

use crate::classify::{Classification, Classify};
use crate::clock::{Clock, TokioClock};
use crate::retry::{Decision, Jitter, RetryPolicy};
use crate::telemetry::{Telemetry, TelemetryConfig};

/// The adapter and its version, as recorded in every envelope's provenance.
pub const ADAPTER_VERSION: &str = concat!(env!("CARGO_PKG_NAME"), "/", env!("CARGO_PKG_VERSION"));

/// What an operation is told about the attempt it is making.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptContext {
    /// 1-based.
    pub number: u32,
    /// How long this attempt may take before the adapter abandons it.
    pub timeout: Duration,
}

/// Placeholder for a builder that has not been given a classifier yet; an adapter built with it
/// has no `call`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoClassifier;

/// A refused adapter setting, naming the setting and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The tool name is empty.
    #[error("tool name must not be empty")]
    EmptyToolName,
    /// The target is empty.
    #[error("target must not be empty")]
    EmptyTarget,
    /// A duration setting is zero.
    #[error("{setting} must be positive, got {value:?}")]
    ZeroDuration {
        /// Which setting.
        setting: &'static str,
        /// The value given.
        value: Duration,
    },
}

/// Configures an [`Adapter`].
///
/// | setting | default |
/// |---|---|
/// | classifier | required |
/// | retry policy | [`RetryPolicy::default`] (3 attempts, 100 ms–5 s full-jitter backoff) |
/// | attempt timeout | 10 s |
/// | deadline (whole call) | 30 s |
/// | source system | the target's host |
/// | tracer and meter | the global providers |
/// | trace every call | off: spans only for AccessFailure and Partial |
pub struct AdapterBuilder<C = NoClassifier, K = TokioClock> {
    tool: String,
    target: String,
    classifier: C,
    clock: K,
    policy: RetryPolicy,
    attempt_timeout: Duration,
    deadline: Duration,
    source_system: Option<String>,
    actor: Option<String>,
    authority: Option<Authority>,
    jitter: Option<Jitter>,
    telemetry: TelemetryConfig,
}

impl<C, K> AdapterBuilder<C, K> {
    /// Sets the classifier.
    pub fn classifier<C2>(self, classifier: C2) -> AdapterBuilder<C2, K> {
        AdapterBuilder {
            classifier,
            tool: self.tool,
            target: self.target,
            clock: self.clock,
            policy: self.policy,
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            source_system: self.source_system,
            actor: self.actor,
            authority: self.authority,
            jitter: self.jitter,
            telemetry: self.telemetry,
        }
    }

    /// Sets the clock (tests use a fake one).
    pub fn clock<K2: Clock>(self, clock: K2) -> AdapterBuilder<C, K2> {
        AdapterBuilder {
            clock,
            tool: self.tool,
            target: self.target,
            classifier: self.classifier,
            policy: self.policy,
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            source_system: self.source_system,
            actor: self.actor,
            authority: self.authority,
            jitter: self.jitter,
            telemetry: self.telemetry,
        }
    }

    /// Sets the retry policy.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets how long one attempt may take.
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// Sets how long the whole call, retries included, may take.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Names the system that answers (default: the target's host).
    pub fn source_system(mut self, source: impl Into<String>) -> Self {
        self.source_system = Some(source.into());
        self
    }

    /// Names who makes the calls, e.g. the hosting service or agent.
    pub fn actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Records the authority calls run under. Never put a secret here.
    pub fn authority(mut self, authority: Authority) -> Self {
        self.authority = Some(authority);
        self
    }

    /// Seeds the backoff jitter, for replayable schedules.
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Some(Jitter::seeded(seed));
        self
    }

    /// Sets the source of the backoff jitter (default: seeded from the process's random keys).
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// Sends spans to this provider instead of the global one.
    pub fn tracer_provider<P>(mut self, provider: &P) -> Self
    where
        P: TracerProvider,
        P::Tracer: Send + Sync + 'static,
        <P::Tracer as opentelemetry::trace::Tracer>::Span: Send + Sync + 'static,
    {
        self.telemetry.tracer_provider(provider);
        self
    }

    /// Sends counters to this provider instead of the global one.
    pub fn meter_provider(mut self, provider: &dyn MeterProvider) -> Self {
        self.telemetry.meter_provider(provider);
        self
    }

    /// Records a `tool.call` span for every call, Success and Empty included.
    pub fn trace_every_call(mut self, on: bool) -> Self {
        self.telemetry.trace_every_call = on;
        self
    }

    /// Checks the settings and builds the adapter.
    pub fn build(self) -> Result<Adapter<C, K>, BuildError> {
        if self.tool.trim().is_empty() {
            return Err(BuildError::EmptyToolName);
        }
        if self.target.trim().is_empty() {
            return Err(BuildError::EmptyTarget);
        }
        for (setting, value) in [
            ("attempt_timeout", self.attempt_timeout),
            ("deadline", self.deadline),
        ] {
            if value.is_zero() {
                return Err(BuildError::ZeroDuration { setting, value });
            }
        }
        let tool: Arc<str> = Arc::from(self.tool);
        let target: Arc<str> = Arc::from(redact_url(&self.target).as_ref());
        let source_system = self
            .source_system
            .unwrap_or_else(|| host_of(&target).to_owned());
        let authority_line = self.authority.as_ref().and_then(Authority::describe);
        let telemetry = Telemetry::new(self.telemetry, &tool, &target, authority_line);
        Ok(Adapter {
            tool,
            target,
            classifier: self.classifier,
            clock: self.clock,
            policy: self.policy,
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            source_system: Arc::from(source_system),
            actor: self.actor.map(Arc::from),
            authority: self.authority,
            jitter: self.jitter.unwrap_or_else(Jitter::from_entropy),
            telemetry,
        })
    }
}

/// A tool wrapped by Candor: every [`Adapter::call`] returns an [`Envelope`] of exactly one of
/// four classes, after the retry policy has run, with telemetry recorded.
///
/// Build one adapter per tool and share it (it is `Send + Sync` when its classifier is): each
/// build registers the `tool.outcomes` callback with the meter once more.
pub struct Adapter<C, K = TokioClock> {
    tool: Arc<str>,
    target: Arc<str>,
    classifier: C,
    clock: K,
    policy: RetryPolicy,
    attempt_timeout: Duration,
    deadline: Duration,
    source_system: Arc<str>,
    actor: Option<Arc<str>>,
    authority: Option<Authority>,
    jitter: Jitter,
    telemetry: Telemetry,
}

impl Adapter<NoClassifier, TokioClock> {
    /// Starts configuring an adapter for the tool `tool` reaching for `target`.
    ///
    /// Credentials in `target` (user-info, token or signature parameters) are redacted before
    /// it is stored anywhere.
    pub fn builder(tool: impl Into<String>, target: impl Into<String>) -> AdapterBuilder {
        AdapterBuilder {
            tool: tool.into(),
            target: target.into(),
            classifier: NoClassifier,
            clock: TokioClock,
            policy: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
            source_system: None,
            actor: None,
            authority: None,
            jitter: None,
            telemetry: TelemetryConfig::default(),
        }
    }
}

impl<C, K: Clock> Adapter<C, K> {
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
    /// last AccessFailure with its action `exhausted`, never an Empty.
    pub async fn call<R, F, Fut>(&self, mut operation: F) -> Envelope<C::Payload>
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
        let mut number = 0;
        let mut attempt_offset = Duration::ZERO;
        let (last, finished) = loop {
            number += 1;
            let deadline_left = self.deadline.saturating_sub(attempt_offset);
            let timeout = self.attempt_timeout.min(deadline_left);
            let context = AttemptContext { number, timeout };
            let raw = race(operation(context), || self.clock.sleep(timeout)).await;
            let classification = match raw {
                Some(raw) => self.classifier.classify(raw),
                None => Classification::new(timed_out(timeout, timeout < self.attempt_timeout)),
            };
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
                    action: candor_schema::RetryAction::Exhausted,
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
                    self.clock.sleep(after).await;
                    attempt_offset = self.clock.now().saturating_duration_since(started);
                }
                Decision::Done | Decision::GiveUp { .. } => break (classification, elapsed),
            }
        };
        let envelope = Envelope::new(EnvelopeParts {
            tool: self.tool.clone(),
            target: self.target.clone(),
            outcome: last.outcome,
            authority: self.authority.clone(),
            provenance: Provenance {
                source_system: self.source_system.clone(),
                actor: self.actor.clone(),
                adapter: Cow::Borrowed(ADAPTER_VERSION),
                started_at: Timestamp::new(started_wall),
                finished_at: wall_at(finished),
            },
            evidence: last.evidence,
            attempts,
            lifecycle: last.lifecycle,
        });
        self.telemetry.record(&envelope, self.policy.max_attempts());
        envelope
    }
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
fn timed_out<P>(after: Duration, cut_by_deadline: bool) -> Outcome<P> {
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
    Outcome::AccessFailure {
        failure: Failure {
            kind,
            retryable: true,
            message,
            status: None,
            error_type: Some(error_type.into()),
            retry_after_ms: None,
        },
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The host part of a URL-like target, or the whole target when it is not a URL.
fn host_of(target: &str) -> &str {
    let Some((_, rest)) = target.split_once("://") else {
        return target;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority.rsplit('@').next().unwrap_or(authority)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn source_system_defaults_to_the_host() {
        assert_eq!(host_of("http://127.0.0.1:8080/x?y"), "127.0.0.1:8080");
        assert_eq!(host_of("https://REDACTED@api.example/v1"), "api.example");
        assert_eq!(host_of("orders-db"), "orders-db");
    }
}
