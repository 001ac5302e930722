//! A sampler wrapper that keeps the adapter's failure and operation spans whatever the host's
//! sampler says.

use candor_schema::OutcomeClass;
use candor_schema::names::{self, attr};
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SamplingDecision, SamplingResult, ShouldSample};

/// Wraps the host application's sampler: a `tool.call` span that records an AccessFailure or a
/// Partial, or the states of an asynchronous operation, is always recorded and sampled; every
/// other span is left to the wrapped sampler.
///
/// ```
/// use candor_adapter::KeepToolFailures;
/// use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
///
/// let provider = SdkTracerProvider::builder()
///     .with_sampler(KeepToolFailures::new(Sampler::TraceIdRatioBased(0.01)))
///     .build();
/// # drop(provider);
/// ```
#[derive(Debug, Clone)]
pub struct KeepToolFailures<S> {
    inner: S,
}

impl<S> KeepToolFailures<S> {
    /// Wraps `inner`.
    pub const fn new(inner: S) -> Self {
        Self { inner }
    }
}

/// Whether a span is an adapter span that carries a failure event or an operation's states.
fn must_keep(name: &str, attributes: &[KeyValue]) -> bool {
    name == names::TOOL_CALL_SPAN
        && attributes.iter().any(|kv| {
            kv.key.as_str() == attr::FAILURE_KIND
                || kv.key.as_str() == attr::LIFECYCLE_STATE
                || (kv.key.as_str() == attr::OUTCOME_CLASS
                    && matches!(
                        kv.value.as_str().parse::<OutcomeClass>(),
                        Ok(OutcomeClass::AccessFailure | OutcomeClass::Partial)
                    ))
        })
}

impl<S: ShouldSample + Clone + 'static> ShouldSample for KeepToolFailures<S> {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        span_kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        if must_keep(name, attributes) {
            let trace_state = parent_context
                .map(|cx| cx.span().span_context().trace_state().clone())
                .unwrap_or_default();
            return SamplingResult {
                decision: SamplingDecision::RecordAndSample,
                attributes: Vec::new(),
                trace_state,
            };
        }
        self.inner
            .should_sample(parent_context, trace_id, name, span_kind, attributes, links)
    }
}
