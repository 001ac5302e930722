//! The result envelope: what a tool call returns once the adapter has classified it.
//!
//! The types make the rules of the contract hard to break:
//! - [`Outcome`] has exactly four variants; an AccessFailure carries no payload, a Partial must
//!   say what it covered and what it dropped.
//! - [`Lifecycle::Completed`] cannot be built without evidence of completion; an HTTP 202 is
//!   classified as [`Lifecycle::Accepted`].
//! - The legal next actions are derived from the outcome and lifecycle, never set by hand, and an
//!   envelope read from JSON whose next actions disagree is rejected.

use std::borrow::Cow;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::time::Timestamp;
use crate::vocab::{
    AccessFailureKind, EvidenceKind, FailureKind, LifecycleState, NextAction, OutcomeClass,
    PartialKind, RetryAction,
};

/// The version of the envelope's JSON shape; see `spec/v1/envelope.v1.schema.json`.
pub const ENVELOPE_SCHEMA_VERSION: u32 = 1;

/// What a call produced: exactly one of four classes, each with what that class needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "class", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outcome<T> {
    /// Contact made, complete answer.
    Success {
        /// The answer.
        payload: T,
        /// What was examined.
        extent: Extent,
    },
    /// Contact made, and the source verified that nothing matches.
    Empty {
        /// What was examined and found empty.
        extent: Extent,
    },
    /// Contact made, the answer was cut off.
    Partial {
        /// What arrived; never the whole answer.
        payload: T,
        /// What the answer covered and what it dropped.
        truncation: Truncation,
    },
    /// No usable contact. Carries no payload: there is nothing to conclude about the source.
    AccessFailure {
        /// Why no usable answer arrived.
        failure: Failure,
    },
}

impl<T> Outcome<T> {
    /// The class of this outcome.
    pub const fn class(&self) -> OutcomeClass {
        match self {
            Outcome::Success { .. } => OutcomeClass::Success,
            Outcome::Empty { .. } => OutcomeClass::Empty,
            Outcome::Partial { .. } => OutcomeClass::Partial,
            Outcome::AccessFailure { .. } => OutcomeClass::AccessFailure,
        }
    }

    /// The payload of a Success or a Partial.
    pub const fn payload(&self) -> Option<&T> {
        match self {
            Outcome::Success { payload, .. } | Outcome::Partial { payload, .. } => Some(payload),
            Outcome::Empty { .. } | Outcome::AccessFailure { .. } => None,
        }
    }

    /// The failure kind of a Partial or an AccessFailure.
    pub fn failure_kind(&self) -> Option<FailureKind> {
        match self {
            Outcome::Partial { truncation, .. } => Some(truncation.kind.into()),
            Outcome::AccessFailure { failure } => Some(failure.kind.into()),
            Outcome::Success { .. } | Outcome::Empty { .. } => None,
        }
    }

    /// Maps the payload, keeping everything else.
    pub fn map_payload<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Success { payload, extent } => Outcome::Success {
                payload: f(payload),
                extent,
            },
            Outcome::Empty { extent } => Outcome::Empty { extent },
            Outcome::Partial {
                payload,
                truncation,
            } => Outcome::Partial {
                payload: f(payload),
                truncation,
            },
            Outcome::AccessFailure { failure } => Outcome::AccessFailure { failure },
        }
    }
}

/// What a Success or an Empty examined.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Extent {
    /// How many items the answer holds, when the answer is a collection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    /// The total the source declared, when it declared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_total: Option<u64>,
    /// The scope examined, in the tool author's words (an index, a date range, a shard set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// What a Partial covered and what it dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Truncation {
    /// How the answer was cut off.
    pub kind: PartialKind,
    /// What the answer covered, e.g. `items 1-3 of 10`.
    pub covered: String,
    /// What was dropped, e.g. `7 items` or `everything past 1048576 bytes`.
    pub dropped: String,
    /// How many items arrived, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<u64>,
    /// How many items the source had, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u64>,
}

/// Why an AccessFailure made no usable contact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// The kind of failure.
    pub kind: AccessFailureKind,
    /// Whether asking again could help (5xx, 408, 429, timeouts, resets). A final AccessFailure
    /// that is retryable means the retry budget ran out.
    pub retryable: bool,
    /// What happened, credentials redacted.
    pub message: String,
    /// The HTTP status, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// A short, stable error identifier, when there was an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// How long the source asked callers to wait (`Retry-After`), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl Failure {
    /// The retry action that ends a call with this failure: `exhausted` or `permanent`.
    pub const fn final_action(&self) -> RetryAction {
        if self.retryable {
            RetryAction::Exhausted
        } else {
            RetryAction::Permanent
        }
    }
}

/// The principal or scope a call ran under. Never a secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Authority {
    /// Who the call ran as, e.g. a service account name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Arc<str>>,
    /// What it was allowed to see, e.g. an OAuth scope or a tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Arc<str>>,
}

impl Authority {
    /// One line for logs and attributes: `principal scope`, whichever are known.
    pub fn describe(&self) -> Option<String> {
        match (&self.principal, &self.scope) {
            (None, None) => None,
            (Some(principal), None) => Some(principal.to_string()),
            (None, Some(scope)) => Some(format!("scope={scope}")),
            (Some(principal), Some(scope)) => Some(format!("{principal} scope={scope}")),
        }
    }
}

/// Where an answer came from (W3C PROV: the entity's source, the activity's times, the agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The system that answered (or failed to), e.g. the target's host.
    pub source_system: Arc<str>,
    /// Who made the call, e.g. the service or agent that hosts the adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Arc<str>>,
    /// The adapter and its version, e.g. `candor-adapter/0.1.0`.
    pub adapter: Cow<'static, str>,
    /// When the call started.
    pub started_at: Timestamp,
    /// When the call finished.
    pub finished_at: Timestamp,
}

/// A handle that verifies an outcome independently of the call that produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// What kind of handle this is.
    pub kind: EvidenceKind,
    /// The handle itself: an id, a receipt or a query.
    pub value: String,
}

/// One attempt of a call, as the retry policy saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// When the attempt started.
    pub started_at: Timestamp,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// How the attempt was classified.
    pub class: OutcomeClass,
    /// Why it was not a complete answer, for a Partial or an AccessFailure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<FailureKind>,
    /// The HTTP status, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What the policy did next, for a Partial or an AccessFailure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_action: Option<RetryAction>,
    /// The wait before the next attempt, when the action is `retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    /// A short, stable error identifier, when there was an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
}

/// The asynchronous operation a call started or reported on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// The operation's stable id (a job id, not a label).
    pub id: String,
    /// Where its status can be read, when the source said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_url: Option<String>,
    /// True when the source named no id and the adapter made `id` up: unique to the call, but
    /// nothing the source knows the operation by. Absent (false) otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generated: bool,
}

/// The resource an asynchronous operation produced or changed, as its end named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// The resource's stable id or URL.
    pub id: String,
    /// Its version when the source says (an `ETag`, a version number), so that a reader can
    /// tell the state the operation left from a later change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Where an asynchronous operation stands.
///
/// A `Completed` state needs [`Evidence`] of completion from a read that is independent of the
/// acceptance; the adapter's HTTP classifier maps a 202 to `Accepted`, never to `Completed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub enum Lifecycle {
    /// Accepted for processing; nothing has been done yet.
    Accepted {
        /// The operation.
        operation: Operation,
    },
    /// Waiting to run.
    Queued {
        /// The operation.
        operation: Operation,
    },
    /// Running.
    Running {
        /// The operation.
        operation: Operation,
        /// Progress in percent, when the source reports it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        percent_complete: Option<u8>,
    },
    /// Finished with part of the work done.
    Partial {
        /// The operation.
        operation: Operation,
        /// What was done.
        covered: String,
        /// The resource it produced or changed, when its end named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<Resource>,
    },
    /// Finished, verified by a read independent of the acceptance.
    Completed {
        /// The operation.
        operation: Operation,
        /// The read that verified completion.
        verified_by: Evidence,
        /// The resource it produced or changed, when its end named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<Resource>,
    },
    /// Stopped on request.
    Cancelled {
        /// The operation.
        operation: Operation,
    },
    /// Stopped by an error.
    Failed {
        /// The operation.
        operation: Operation,
        /// Why it failed.
        reason: String,
    },
}

impl Lifecycle {
    /// The state as a vocabulary member.
    pub const fn state(&self) -> LifecycleState {
        match self {
            Lifecycle::Accepted { .. } => LifecycleState::Accepted,
            Lifecycle::Queued { .. } => LifecycleState::Queued,
            Lifecycle::Running { .. } => LifecycleState::Running,
            Lifecycle::Partial { .. } => LifecycleState::Partial,
            Lifecycle::Completed { .. } => LifecycleState::Completed,
            Lifecycle::Cancelled { .. } => LifecycleState::Cancelled,
            Lifecycle::Failed { .. } => LifecycleState::Failed,
        }
    }

    /// The operation this state is about.
    pub const fn operation(&self) -> &Operation {
        match self {
            Lifecycle::Accepted { operation }
            | Lifecycle::Queued { operation }
            | Lifecycle::Running { operation, .. }
            | Lifecycle::Partial { operation, .. }
            | Lifecycle::Completed { operation, .. }
            | Lifecycle::Cancelled { operation }
            | Lifecycle::Failed { operation, .. } => operation,
        }
    }

    /// The resource the operation produced or changed, when its end named one.
    pub const fn resource(&self) -> Option<&Resource> {
        match self {
            Lifecycle::Partial { resource, .. } | Lifecycle::Completed { resource, .. } => {
                resource.as_ref()
            }
            _ => None,
        }
    }
}

/// The legal next actions for an outcome (and the lifecycle of an asynchronous operation).
pub fn legal_next_actions<T>(
    outcome: &Outcome<T>,
    lifecycle: Option<&Lifecycle>,
) -> &'static [NextAction] {
    use NextAction::{Compensate, Escalate, Finish, Poll, Retry};
    match outcome {
        Outcome::Success { .. } => match lifecycle.map(Lifecycle::state) {
            None | Some(LifecycleState::Completed) => &[Finish],
            Some(LifecycleState::Accepted | LifecycleState::Queued | LifecycleState::Running) => {
                &[Poll, Compensate, Escalate]
            }
            Some(LifecycleState::Partial) => &[Finish, Compensate, Escalate],
            Some(LifecycleState::Cancelled | LifecycleState::Failed) => &[Compensate, Escalate],
        },
        Outcome::Empty { .. } => &[Finish],
        Outcome::Partial { .. } => &[Finish, Escalate],
        Outcome::AccessFailure { failure } if failure.retryable => &[Retry, Escalate],
        Outcome::AccessFailure { .. } => &[Escalate],
    }
}

/// Everything an envelope holds besides what is derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeParts<T> {
    /// The logical tool name.
    pub tool: Arc<str>,
    /// The endpoint or resource reached for, credentials redacted.
    pub target: Arc<str>,
    /// What happened.
    pub outcome: Outcome<T>,
    /// The authority the call ran under.
    pub authority: Option<Authority>,
    /// Where the answer came from.
    pub provenance: Provenance,
    /// A handle that verifies the outcome independently.
    pub evidence: Option<Evidence>,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// The state of the asynchronous operation, for asynchronous work.
    pub lifecycle: Option<Lifecycle>,
}

/// The typed result of one tool call. Serialises to the JSON of
/// `spec/v1/envelope.v1.schema.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    try_from = "EnvelopeWire<T>",
    bound(deserialize = "T: Deserialize<'de>")
)]
#[schemars(bound = "T: JsonSchema")]
pub struct Envelope<T> {
    /// Always [`ENVELOPE_SCHEMA_VERSION`].
    schema_version: u32,
    /// The logical tool name.
    tool: Arc<str>,
    /// The endpoint or resource reached for, credentials redacted.
    target: Arc<str>,
    /// What happened.
    outcome: Outcome<T>,
    /// What a consumer may legally do next; derived from the outcome and lifecycle.
    next_actions: &'static [NextAction],
    /// The authority the call ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    authority: Option<Authority>,
    /// Where the answer came from.
    provenance: Provenance,
    /// A handle that verifies the outcome independently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    evidence: Option<Evidence>,
    /// Every attempt, in order.
    attempts: Vec<Attempt>,
    /// The state of the asynchronous operation, for asynchronous work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifecycle: Option<Lifecycle>,
}

/// The envelope's JSON shape: what is read before the derived fields are checked, and what the
/// JSON Schema describes (a test checks that it matches what [`Envelope`] writes).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Candor result envelope", bound = "T: JsonSchema")]
struct EnvelopeWire<T> {
    /// Always 1 for this version of the schema.
    schema_version: u32,
    /// The logical tool name.
    tool: Arc<str>,
    /// The endpoint or resource reached for, credentials redacted.
    target: Arc<str>,
    /// What happened: exactly one of four classes.
    outcome: Outcome<T>,
    /// What a consumer may legally do next; derived from the outcome and lifecycle.
    next_actions: Vec<NextAction>,
    /// The authority the call ran under (never a secret).
    #[serde(default)]
    authority: Option<Authority>,
    /// Where the answer came from.
    provenance: Provenance,
    /// A handle that verifies the outcome independently of the call.
    #[serde(default)]
    evidence: Option<Evidence>,
    /// Every attempt, in order.
    attempts: Vec<Attempt>,
    /// The state of the asynchronous operation, for asynchronous work.
    #[serde(default)]
    lifecycle: Option<Lifecycle>,
}

/// Why an envelope read from JSON was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEnvelope {
    /// The envelope was written for another version of the schema.
    #[error(
        "unsupported envelope schema_version {found}; this reader understands {ENVELOPE_SCHEMA_VERSION}"
    )]
    Version {
        /// The version found.
        found: u32,
    },
    /// The next actions listed are not the ones the outcome allows.
    #[error("next_actions {found:?} do not match the {class} outcome, which allows {legal:?}")]
    NextActions {
        /// The outcome's class.
        class: OutcomeClass,
        /// What the envelope listed.
        found: Vec<NextAction>,
        /// What the outcome allows.
        legal: &'static [NextAction],
    },
}

impl<T> TryFrom<EnvelopeWire<T>> for Envelope<T> {
    type Error = InvalidEnvelope;

    fn try_from(wire: EnvelopeWire<T>) -> Result<Self, Self::Error> {
        if wire.schema_version != ENVELOPE_SCHEMA_VERSION {
            return Err(InvalidEnvelope::Version {
                found: wire.schema_version,
            });
        }
        let legal = legal_next_actions(&wire.outcome, wire.lifecycle.as_ref());
        if wire.next_actions != legal {
            return Err(InvalidEnvelope::NextActions {
                class: wire.outcome.class(),
                found: wire.next_actions,
                legal,
            });
        }
        Ok(Envelope::new(EnvelopeParts {
            tool: wire.tool,
            target: wire.target,
            outcome: wire.outcome,
            authority: wire.authority,
            provenance: wire.provenance,
            evidence: wire.evidence,
            attempts: wire.attempts,
            lifecycle: wire.lifecycle,
        }))
    }
}

impl<T> Envelope<T> {
    /// Builds an envelope, deriving its next actions.
    pub fn new(parts: EnvelopeParts<T>) -> Self {
        let next_actions = legal_next_actions(&parts.outcome, parts.lifecycle.as_ref());
        Self {
            schema_version: ENVELOPE_SCHEMA_VERSION,
            tool: parts.tool,
            target: parts.target,
            outcome: parts.outcome,
            next_actions,
            authority: parts.authority,
            provenance: parts.provenance,
            evidence: parts.evidence,
            attempts: parts.attempts,
            lifecycle: parts.lifecycle,
        }
    }

    /// The class: the one field every consumer must branch on.
    pub const fn class(&self) -> OutcomeClass {
        self.outcome.class()
    }

    /// What happened.
    pub const fn outcome(&self) -> &Outcome<T> {
        &self.outcome
    }

    /// The logical tool name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The endpoint or resource reached for, credentials redacted.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// What a consumer may legally do next.
    pub fn next_actions(&self) -> &'static [NextAction] {
        self.next_actions
    }

    /// The authority the call ran under.
    pub const fn authority(&self) -> Option<&Authority> {
        self.authority.as_ref()
    }

    /// Where the answer came from.
    pub const fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// A handle that verifies the outcome independently.
    pub const fn evidence(&self) -> Option<&Evidence> {
        self.evidence.as_ref()
    }

    /// Every attempt, in order.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The state of the asynchronous operation, for asynchronous work.
    pub const fn lifecycle(&self) -> Option<&Lifecycle> {
        self.lifecycle.as_ref()
    }

    /// Takes the envelope apart (the derived fields are dropped).
    pub fn into_parts(self) -> EnvelopeParts<T> {
        EnvelopeParts {
            tool: self.tool,
            target: self.target,
            outcome: self.outcome,
            authority: self.authority,
            provenance: self.provenance,
            evidence: self.evidence,
            attempts: self.attempts,
            lifecycle: self.lifecycle,
        }
    }

    /// A one-line human summary whose words follow from the class: an AccessFailure is never
    /// worded as an absence, a Partial never as a whole, an acceptance never as completion.
    pub fn summary(&self) -> String {
        let tool = &self.tool;
        let target = &self.target;
        match &self.outcome {
            Outcome::Success { extent, .. } => match &self.lifecycle {
                Some(lifecycle) if !lifecycle.state().is_terminal() => format!(
                    "{tool}: {target} accepted the request; operation {} is {} and has not \
                     completed yet. Poll its status before relying on the result.",
                    lifecycle.operation().id,
                    lifecycle.state(),
                ),
                _ => match extent.items {
                    Some(items) => {
                        format!("{tool}: complete answer from {target} with {items} item(s).")
                    }
                    None => format!("{tool}: complete answer from {target}."),
                },
            },
            Outcome::Empty { .. } => format!(
                "{tool}: {target} was reached and confirmed that nothing matches. This is a \
                 verified absence."
            ),
            Outcome::Partial { truncation, .. } => format!(
                "{tool}: PARTIAL answer from {target} ({}): covered {}; dropped {}. Do not treat \
                 it as the whole answer.",
                truncation.kind, truncation.covered, truncation.dropped,
            ),
            Outcome::AccessFailure { failure } => {
                let status = failure
                    .status
                    .map(|status| format!(", HTTP {status}"))
                    .unwrap_or_default();
                format!(
                    "{tool}: FAILED to get an answer from {target} ({}{status}, {} after {} \
                     attempt(s)): {}. The source's contents are unknown; nothing can be \
                     concluded from this call.",
                    failure.kind,
                    failure.final_action(),
                    self.attempts.len(),
                    failure.message,
                )
            }
        }
    }
}
