//! Classification: a total, synchronous function from what a tool returned to one of four
//! outcomes.
//!
//! [`http::HttpClassifier`] implements the rules for HTTP APIs; [`FnClassifier`] takes a tool
//! author's own mapping for anything else.

pub mod http;

use std::time::Duration;

use candor_schema::{Evidence, Lifecycle, Outcome};

/// What one attempt's raw result was classified as.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification<P> {
    /// The outcome of the attempt.
    pub outcome: Outcome<P>,
    /// A handle that verifies the outcome, when the response carried one.
    pub evidence: Option<Evidence>,
    /// The state of an asynchronous operation the response reported on.
    pub lifecycle: Option<Lifecycle>,
    /// How long the source asked to wait before reading the operation's status
    /// (`Retry-After` on an acceptance).
    pub poll_after: Option<Duration>,
}

impl<P> Classification<P> {
    /// An outcome with no evidence and no lifecycle.
    pub fn new(outcome: Outcome<P>) -> Self {
        Self {
            outcome,
            evidence: None,
            lifecycle: None,
            poll_after: None,
        }
    }
}

impl<P> From<Outcome<P>> for Classification<P> {
    fn from(outcome: Outcome<P>) -> Self {
        Self::new(outcome)
    }
}

/// Classifies the raw result `R` of one attempt.
///
/// Implementations must be total (every `R` gets exactly one outcome) and deterministic.
pub trait Classify<R>: Send + Sync {
    /// What a Success or a Partial carries.
    type Payload;

    /// Classifies one attempt's raw result.
    fn classify(&self, raw: R) -> Classification<Self::Payload>;
}

/// A classifier made of the tool author's own mapping, for tools that are not HTTP.
///
/// ```
/// use candor_adapter::classify::{Classify, FnClassifier};
/// use candor_schema::{AccessFailureKind, Extent, Failure, Outcome, OutcomeClass};
///
/// // A queue client that returns `Err` when it cannot reach the broker.
/// let classifier = FnClassifier::new(|raw: Result<Vec<u32>, String>| match raw {
///     Ok(items) if items.is_empty() => Outcome::Empty { extent: Extent::default() },
///     Ok(items) => Outcome::Success { extent: Extent { items: Some(items.len() as u64), ..Extent::default() }, payload: items },
///     Err(message) => Outcome::AccessFailure { failure: Failure {
///         kind: AccessFailureKind::Connect, retryable: true, message,
///         status: None, error_type: Some("connect".into()), retry_after_ms: None,
///     } },
/// });
/// assert_eq!(classifier.classify(Err("refused".into())).outcome.class(), OutcomeClass::AccessFailure);
/// ```
pub struct FnClassifier<F> {
    mapping: F,
}

impl<F> FnClassifier<F> {
    /// Wraps a mapping from the raw result to an outcome (or a full [`Classification`]).
    pub const fn new(mapping: F) -> Self {
        Self { mapping }
    }
}

impl<F> std::fmt::Debug for FnClassifier<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnClassifier")
    }
}

/// What a [`FnClassifier`]'s mapping may return: an [`Outcome`] or a whole [`Classification`].
pub trait IntoClassification {
    /// The payload type.
    type Payload;

    /// Converts into a classification.
    fn into_classification(self) -> Classification<Self::Payload>;
}

impl<P> IntoClassification for Outcome<P> {
    type Payload = P;

    fn into_classification(self) -> Classification<P> {
        Classification::new(self)
    }
}

impl<P> IntoClassification for Classification<P> {
    type Payload = P;

    fn into_classification(self) -> Classification<P> {
        self
    }
}

impl<R, O, F> Classify<R> for FnClassifier<F>
where
    F: Fn(R) -> O + Send + Sync,
    O: IntoClassification,
{
    type Payload = O::Payload;

    fn classify(&self, raw: R) -> Classification<O::Payload> {
        (self.mapping)(raw).into_classification()
    }
}
