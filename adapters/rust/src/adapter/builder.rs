//! Configuring an [`Adapter`]: its settings, their defaults, and the checks `build` makes.

use std::sync::Arc;
use std::time::Duration;

use candor_schema::Authority;
use candor_schema::redact::redact_url;
use opentelemetry::metrics::MeterProvider;
use opentelemetry::trace::TracerProvider;

use super::repeat::is_idempotent_method;
use super::{Adapter, host_of};
use crate::clock::{Clock, TokioClock};
use crate::follow::NoFollow;
use crate::retry::{Jitter, RetryPolicy};
use crate::telemetry::{Telemetry, TelemetryConfig};

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

    /// Sends spans, the events recorded at the moment they happen, and counters to the
    /// providers of [`crate::otlp::providers`] (one service's, in a process that reports as
    /// several).
    #[cfg(feature = "otlp")]
    pub fn otlp(self, guard: &crate::otlp::OtlpGuard) -> Self {
        self.tracer_provider(guard.tracer_provider())
            .logger_provider(guard.logger_provider())
            .meter_provider(guard.meter_provider())
    }

    /// Emits the log-based form of events (contract rule `TELEMETRY-MOMENT`) through this
    /// provider instead of the one set with [`crate::telemetry::set_logger_provider`].
    pub fn logger_provider<P>(mut self, provider: &P) -> Self
    where
        P: opentelemetry::logs::LoggerProvider,
        P::Logger: Send + Sync + 'static,
    {
        self.telemetry.logger_provider(provider);
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
    /// ([`AttemptContext::idempotency_key`](super::AttemptContext::idempotency_key)), which sends it in the `Idempotency-Key` header: the
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
        let source_system: Arc<str> = self
            .source_system
            .map_or_else(|| Arc::from(host_of(&target)), Arc::from);
        let actor: Option<Arc<str>> = self.actor.map(Arc::from);
        let authority_line = self.authority.as_ref().and_then(Authority::describe);
        let telemetry = Telemetry::new(
            self.telemetry,
            &tool,
            &target,
            authority_line,
            &source_system,
            actor.as_ref(),
        );
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
            source_system,
            actor,
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
