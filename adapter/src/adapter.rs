//! The adapter: a configured tool that runs calls through classification, retry and telemetry.

use std::borrow::Cow;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use candor_schema::redact::{redact_text, redact_url};
use candor_schema::{
    AccessFailureKind, Attempt, Authority, Envelope, EnvelopeParts, Evidence, EvidenceKind, Extent,
    Failure, Lifecycle, Operation, Outcome, PartialKind, Provenance, RetryAction, Timestamp,
    Truncation,
};
use opentelemetry::metrics::MeterProvider;
use opentelemetry::trace::TracerProvider;

use crate::classify::{Classification, Classify};
use crate::clock::{Clock, TokioClock};
use crate::follow::{NoFollow, OperationStatus, ReadStatus, StatusRead, lifecycle_of};
use crate::retry::{Decision, Jitter, RetryPolicy};
use crate::telemetry::{Telemetry, TelemetryConfig, Transition};

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

/// A call's idempotency key: `candor-` and 32 lowercase hexadecimal digits, new for each call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyKey([u8; IdempotencyKey::LEN]);

impl IdempotencyKey {
    const LEN: usize = 39;

    /// A new key, unique to the call.
    fn new() -> Self {
        let mut key = [0u8; Self::LEN];
        key.copy_from_slice(crate::classify::http::generated_operation_id().as_bytes());
        Self(key)
    }

    /// The key as the header carries it.
    pub fn as_str(&self) -> &str {
        // Made of ASCII only (`new`): always valid UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
/// | status reader | none: an accepted operation is returned as accepted, not followed |
/// | operation deadline | 10 min from the acceptance, for a followed operation |
pub struct AdapterBuilder<C = NoClassifier, K = TokioClock, S = NoFollow> {
    tool: String,
    target: String,
    classifier: C,
    clock: K,
    status: S,
    operation_deadline: Duration,
    policy: RetryPolicy,
    attempt_timeout: Duration,
    deadline: Duration,
    source_system: Option<String>,
    actor: Option<String>,
    authority: Option<Authority>,
    jitter: Option<Jitter>,
    telemetry: TelemetryConfig,
    method: http::Method,
    idempotent: Option<bool>,
    idempotency_key: bool,
}

impl<C, K, S> AdapterBuilder<C, K, S> {
    /// The same settings with the classifier, clock and status reader replaced by `swap`.
    fn swap<C2, K2, S2>(
        self,
        swap: impl FnOnce(C, K, S) -> (C2, K2, S2),
    ) -> AdapterBuilder<C2, K2, S2> {
        let (classifier, clock, status) = swap(self.classifier, self.clock, self.status);
        AdapterBuilder {
            classifier,
            clock,
            status,
            tool: self.tool,
            target: self.target,
            operation_deadline: self.operation_deadline,
            policy: self.policy,
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            source_system: self.source_system,
            actor: self.actor,
            authority: self.authority,
            jitter: self.jitter,
            telemetry: self.telemetry,
            method: self.method,
            idempotent: self.idempotent,
            idempotency_key: self.idempotency_key,
        }
    }

    /// Sets the classifier.
    pub fn classifier<C2>(self, classifier: C2) -> AdapterBuilder<C2, K, S> {
        self.swap(|_, clock, status| (classifier, clock, status))
    }

    /// Sets the clock (tests use a fake one).
    pub fn clock<K2: Clock>(self, clock: K2) -> AdapterBuilder<C, K2, S> {
        self.swap(|classifier, _, status| (classifier, clock, status))
    }

    /// Declares how the tool reports the progress of an operation it accepted, so that
    /// [`Adapter::call_and_follow`] and [`Adapter::resume`] can follow it to its end: a
    /// [`StatusUrl`](crate::follow::http::StatusUrl), a
    /// [`LongRunning`](crate::follow::http::LongRunning) operation resource, or the author's
    /// own [`FnStatus`](crate::follow::FnStatus).
    pub fn follow<S2>(self, status: S2) -> AdapterBuilder<C, K, S2> {
        self.swap(|classifier, clock, _| (classifier, clock, status))
    }

    /// Sets how long a followed operation may take from its acceptance to its end.
    pub fn operation_deadline(mut self, deadline: Duration) -> Self {
        self.operation_deadline = deadline;
        self
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

    /// The request's method (default `GET`): whether a call that may have been applied can be
    /// sent again follows from it, unless [`AdapterBuilder::idempotent`] says (rule
    /// `RETRY-UNSAFE`).
    pub fn method(mut self, method: http::Method) -> Self {
        self.method = method;
        self
    }

    /// Declares whether a call may be made twice with the effect of once, whatever its method.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// Makes one idempotency key per call and gives it to every attempt
    /// ([`AttemptContext::idempotency_key`]), which sends it in the `Idempotency-Key` header: the
    /// call may then be sent again after an attempt that may have been applied.
    pub fn idempotency_key(mut self, on: bool) -> Self {
        self.idempotency_key = on;
        self
    }

    /// Checks the settings and builds the adapter.
    pub fn build(self) -> Result<Adapter<C, K, S>, BuildError> {
        if self.tool.trim().is_empty() {
            return Err(BuildError::EmptyToolName);
        }
        if self.target.trim().is_empty() {
            return Err(BuildError::EmptyTarget);
        }
        for (setting, value) in [
            ("attempt_timeout", self.attempt_timeout),
            ("deadline", self.deadline),
            ("operation_deadline", self.operation_deadline),
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
            status: self.status,
            operation_deadline: self.operation_deadline,
            policy: self.policy,
            attempt_timeout: self.attempt_timeout,
            deadline: self.deadline,
            source_system: Arc::from(source_system),
            actor: self.actor.map(Arc::from),
            authority: self.authority,
            jitter: self.jitter.unwrap_or_else(Jitter::from_entropy),
            telemetry,
            repeatable: self.idempotency_key
                || self
                    .idempotent
                    .unwrap_or_else(|| is_idempotent_method(&self.method)),
            idempotency_key: self.idempotency_key,
        })
    }
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
            status: NoFollow,
            operation_deadline: Duration::from_secs(600),
            policy: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
            source_system: None,
            actor: None,
            authority: None,
            jitter: None,
            telemetry: TelemetryConfig::default(),
            method: http::Method::GET,
            idempotent: None,
            idempotency_key: false,
        }
    }
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
        if transitions.is_empty() {
            // An acceptance the classifier did not report as one (an operation resource).
            transitions.push(Transition {
                at: run.started_wall + run.finished,
                lifecycle: Lifecycle::Accepted {
                    operation: accepted.clone(),
                },
                evidence: run.last.evidence.clone(),
            });
        }
        let start = Start {
            started: run.started,
            started_wall: run.started_wall,
            accepted_at: run.finished,
            attempts: run.attempts,
            evidence: run.last.evidence,
            transitions,
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
        let start = Start {
            started: self.clock.now(),
            started_wall: self.clock.wall(),
            accepted_at: Duration::ZERO,
            attempts: Vec::with_capacity(1),
            evidence: Some(Evidence {
                kind: EvidenceKind::JobId,
                value: operation.id.clone(),
            }),
            // The acceptance was seen by the call that returned it.
            transitions: Vec::new(),
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
                    self.clock.sleep(after).await;
                    attempt_offset = self.clock.now().saturating_duration_since(started);
                }
                Decision::Done | Decision::GiveUp { .. } => break (classification, elapsed),
            }
        };
        // A lifecycle in the answer is a state of an operation the call saw, when it ended.
        let transitions = last
            .lifecycle
            .iter()
            .map(|lifecycle| Transition {
                at: started_wall + finished,
                lifecycle: lifecycle.clone(),
                evidence: last.evidence.clone(),
            })
            .collect();
        Run {
            started,
            started_wall,
            last,
            attempts,
            finished,
            transitions,
        }
    }

    /// Reads `operation`'s status until it ends, the reads fail past the policy, or the
    /// operation deadline runs out; the ending becomes the run's last classification and one
    /// more attempt.
    async fn follow<P, Q, QFut, QR>(
        &self,
        start: Start,
        operation: Operation,
        mut wait: Duration,
        mut read_status: Q,
    ) -> Run<P>
    where
        S: ReadStatus<QR, Payload = P>,
        Q: FnMut(&Operation, AttemptContext) -> QFut,
        QFut: Future<Output = QR>,
    {
        let since_acceptance = || {
            self.clock
                .now()
                .saturating_duration_since(start.started)
                .saturating_sub(start.accepted_at)
        };
        // The last state read, until the end: the lifecycle is built once, not on every read.
        let mut last_read: Option<OperationStatus<P>> = None;
        let mut transitions = start.transitions;
        let mut seen = transitions
            .last()
            .map(|transition| transition.lifecycle.state());
        let mut reads = 0;
        let mut failed_reads = 0;
        let ending = match self.status.refuse(&operation) {
            Some(failure) => Ending::Unreadable {
                failure,
                action: RetryAction::Permanent,
            },
            None => loop {
                if since_acceptance().saturating_add(wait) >= self.operation_deadline {
                    break Ending::Deadline;
                }
                if !wait.is_zero() {
                    self.clock.sleep(wait).await;
                }
                reads += 1;
                let left = self.operation_deadline.saturating_sub(since_acceptance());
                let timeout = self.attempt_timeout.min(left);
                let context = AttemptContext {
                    number: reads,
                    timeout,
                    idempotency_key: None,
                };
                let raw = race(read_status(&operation, context), || {
                    self.clock.sleep(timeout)
                })
                .await;
                let read = match raw {
                    Some(raw) => self.status.read(&operation, raw),
                    None => {
                        StatusRead::unreadable(timed_out(timeout, timeout < self.attempt_timeout))
                    }
                };
                if let Ok(status) = &read.status
                    && seen != Some(status.state())
                {
                    seen = Some(status.state());
                    transitions.push(Transition {
                        at: start.started_wall + start.accepted_at + since_acceptance(),
                        lifecycle: lifecycle_of(&operation, status),
                        evidence: None,
                    });
                }
                match read.status {
                    Ok(status) if status.is_terminal() => break Ending::Ended(status),
                    Ok(status) => {
                        last_read = Some(status);
                        failed_reads = 0;
                    }
                    Err(failure) => {
                        failed_reads += 1;
                        if !failure.retryable {
                            break Ending::Unreadable {
                                failure,
                                action: RetryAction::Permanent,
                            };
                        }
                        if failed_reads >= self.policy.max_attempts() {
                            break Ending::Unreadable {
                                failure,
                                action: RetryAction::Exhausted,
                            };
                        }
                    }
                }
                wait = self
                    .poll_wait(reads)
                    .max(read.retry_after.unwrap_or_default());
            },
        };
        let last_state = match &last_read {
            Some(status) => lifecycle_of(&operation, status),
            None => Lifecycle::Accepted {
                operation: operation.clone(),
            },
        };
        let (last, action) = ending.classify(
            &operation,
            last_state,
            start.evidence,
            reads,
            self.operation_deadline,
        );
        let finished = start.accepted_at + since_acceptance();
        let mut attempts = start.attempts;
        let outcome = &last.outcome;
        let failure = match outcome {
            Outcome::AccessFailure { failure } => Some(failure),
            _ => None,
        };
        attempts.push(Attempt {
            number: u32::try_from(attempts.len() + 1).unwrap_or(u32::MAX),
            started_at: Timestamp::new(start.started_wall + start.accepted_at),
            duration_ms: millis(finished.saturating_sub(start.accepted_at)),
            class: outcome.class(),
            failure_kind: outcome.failure_kind(),
            status: failure.and_then(|f| f.status),
            retry_action: action,
            backoff_ms: None,
            error_type: failure.and_then(|f| f.error_type.clone()),
        });
        Run {
            started: start.started,
            started_wall: start.started_wall,
            last,
            attempts,
            finished,
            transitions,
        }
    }

    /// The wait before status read `read` (1-based) and after the one before it: the retry
    /// policy's backoff for that attempt, with jitter.
    fn poll_wait(&self, read: u32) -> Duration {
        self.policy
            .backoff_ceiling(read)
            .mul_f64(self.jitter.next_fraction().clamp(0.0, 1.0))
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
            .record(&envelope, self.policy.max_attempts(), &run.transitions);
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
}

/// How following an operation ended.
enum Ending<P> {
    /// The operation ended.
    Ended(OperationStatus<P>),
    /// The operation deadline ran out first.
    Deadline,
    /// The status could not be read.
    Unreadable {
        failure: Failure,
        action: RetryAction,
    },
}

impl<P> Ending<P> {
    /// The call's final classification and the following attempt's retry action.
    fn classify(
        self,
        operation: &Operation,
        last_state: Lifecycle,
        acceptance: Option<Evidence>,
        reads: u32,
        deadline: Duration,
    ) -> (Classification<P>, Option<RetryAction>) {
        let id = redact_text(&operation.id);
        let failed = |kind, retryable, message: String, error_type: &str| Outcome::AccessFailure {
            failure: Failure {
                kind,
                retryable,
                message,
                status: None,
                error_type: Some(error_type.into()),
                retry_after_ms: None,
            },
        };
        let (outcome, lifecycle, action) = match self {
            Ending::Ended(status) => {
                let lifecycle = lifecycle_of(operation, &status);
                let (outcome, action) = match status {
                    OperationStatus::Completed {
                        result,
                        verified_by,
                        ..
                    } => {
                        let outcome = Outcome::Success {
                            payload: result,
                            extent: Extent::default(),
                        };
                        return (
                            Classification {
                                outcome,
                                evidence: Some(verified_by),
                                lifecycle: Some(lifecycle),
                                poll_after: None,
                            },
                            None,
                        );
                    }
                    OperationStatus::Partial {
                        result,
                        covered,
                        dropped,
                        ..
                    } => (
                        Outcome::Partial {
                            payload: result,
                            truncation: Truncation {
                                kind: PartialKind::OperationPartial,
                                covered,
                                dropped,
                                returned: None,
                                expected: None,
                            },
                        },
                        RetryAction::AcceptPartial,
                    ),
                    OperationStatus::Failed { reason } => (
                        failed(
                            AccessFailureKind::ToolError,
                            false,
                            format!("operation {id} failed: {}", redact_text(&reason)),
                            "operation_failed",
                        ),
                        RetryAction::Permanent,
                    ),
                    OperationStatus::Cancelled => (
                        failed(
                            AccessFailureKind::Cancelled,
                            false,
                            format!("operation {id} was cancelled before it finished"),
                            "operation_cancelled",
                        ),
                        RetryAction::Permanent,
                    ),
                    // Not reached: the loop ends only on a terminal status.
                    OperationStatus::Queued | OperationStatus::Running { .. } => (
                        failed(
                            AccessFailureKind::Protocol,
                            false,
                            format!("operation {id} ended without a terminal state"),
                            "malformed_response",
                        ),
                        RetryAction::Permanent,
                    ),
                };
                (outcome, lifecycle, action)
            }
            Ending::Deadline => (
                failed(
                    AccessFailureKind::Deadline,
                    true,
                    format!(
                        "operation {id} was still {} when the operation deadline of {deadline:?} \
                         ran out, after {reads} status read(s)",
                        last_state.state()
                    ),
                    "deadline",
                ),
                last_state,
                RetryAction::Exhausted,
            ),
            Ending::Unreadable {
                mut failure,
                action,
            } => {
                failure.message = format!(
                    "reading the status of operation {id}, last seen {}: {}",
                    last_state.state(),
                    failure.message
                );
                (Outcome::AccessFailure { failure }, last_state, action)
            }
        };
        (
            Classification {
                outcome,
                evidence: acceptance,
                lifecycle: Some(lifecycle),
                poll_after: None,
            },
            Some(action),
        )
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
/// What precedes the message of a failure that may have been applied, of a call not safe to
/// repeat (rule `RETRY-UNSAFE`).
pub const NOT_SENT_AGAIN: &str = "the request may have been applied, so it was not sent again: ";

/// Makes `failure` not retryable when it may have been applied (rule `RETRY-UNSAFE`), for a call
/// that is not safe to repeat.
fn not_sent_again(failure: &mut Failure) {
    if failure.retryable && crate::retry::may_have_been_applied(failure) {
        failure.retryable = false;
        failure.message.insert_str(0, NOT_SENT_AGAIN);
    }
}

/// Whether RFC 9110 (section 9.2.2) defines `method` as idempotent.
fn is_idempotent_method(method: &http::Method) -> bool {
    use http::Method;
    [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::TRACE,
        Method::PUT,
        Method::DELETE,
    ]
    .contains(method)
}

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
