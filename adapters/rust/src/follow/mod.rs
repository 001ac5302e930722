//! Following an asynchronous operation: reading its status until it ends.
//!
//! A tool that answers "accepted" (an HTTP 202, or a long-running operation resource) has not
//! done the work yet. An adapter built with a status reader ([`AdapterBuilder::follow`]) can
//! follow such an operation with [`Adapter::call_and_follow`] or, later, with
//! [`Adapter::resume`]: it reads the status under the retry policy's backoff, honours the
//! source's `Retry-After`, stops at the operation deadline, and ends the call in a terminal
//! state (contract section 10.8):
//!
//! | the operation | the envelope's outcome | lifecycle |
//! |---|---|---|
//! | completed, with evidence | Success with the result | `completed`, `verified_by` the evidence |
//! | finished with part done | Partial `operation_partial` | `partial` |
//! | failed | AccessFailure `tool_error`, permanent | `failed` with the reason |
//! | cancelled | AccessFailure `cancelled`, permanent | `cancelled` |
//! | not ended at the operation deadline | AccessFailure `deadline` | the last state read |
//! | status unreadable (retries spent, or permanent) | that read's AccessFailure | the last state read |
//!
//! An operation is never started again: a failed or cancelled operation is reported, not
//! resubmitted, because starting work twice is not a retry.
//!
//! [`http::StatusUrl`] and [`http::LongRunning`] read the two common HTTP protocols;
//! [`FnStatus`] takes a tool author's own status read, which is also where an independent check
//! of completion goes (read the resource back and compare its version, say).
//!
//! [`AdapterBuilder::follow`]: crate::AdapterBuilder::follow
//! [`Adapter::call_and_follow`]: crate::Adapter::call_and_follow
//! [`Adapter::resume`]: crate::Adapter::resume

pub mod http;

use std::time::Duration;

use candor_schema::{Evidence, Failure, Lifecycle, LifecycleState, Operation, Resource};

use crate::classify::Classification;

/// What one read of an operation's status said about it.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationStatus<P> {
    /// Accepted and waiting to run.
    Queued,
    /// Running.
    Running {
        /// Progress in percent, when the source reports it.
        percent_complete: Option<u8>,
    },
    /// Finished, with evidence of completion from a read independent of the acceptance.
    Completed {
        /// The operation's result.
        result: P,
        /// What verified the completion.
        verified_by: Evidence,
        /// The resource the operation produced or changed, when the status names it.
        resource: Option<Resource>,
    },
    /// Finished with part of the work done.
    Partial {
        /// What the operation returned.
        result: P,
        /// What was done.
        covered: String,
        /// What was not done.
        dropped: String,
        /// The resource the operation produced or changed, when the status names it.
        resource: Option<Resource>,
    },
    /// Stopped by an error.
    Failed {
        /// Why, as the source said.
        reason: String,
    },
    /// Stopped on request before it finished.
    Cancelled,
}

impl<P> OperationStatus<P> {
    /// The lifecycle state this status stands for.
    pub const fn state(&self) -> LifecycleState {
        match self {
            OperationStatus::Queued => LifecycleState::Queued,
            OperationStatus::Running { .. } => LifecycleState::Running,
            OperationStatus::Completed { .. } => LifecycleState::Completed,
            OperationStatus::Partial { .. } => LifecycleState::Partial,
            OperationStatus::Failed { .. } => LifecycleState::Failed,
            OperationStatus::Cancelled => LifecycleState::Cancelled,
        }
    }

    /// Whether the operation has ended.
    pub const fn is_terminal(&self) -> bool {
        self.state().is_terminal()
    }
}

/// The result of one status read: the status, or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRead<P> {
    /// What the source said, or the AccessFailure of the read.
    pub status: Result<OperationStatus<P>, Failure>,
    /// How long the source asked to wait before the next read (`Retry-After`).
    pub retry_after: Option<Duration>,
}

impl<P> StatusRead<P> {
    /// A status read with no request to wait.
    pub const fn status(status: OperationStatus<P>) -> Self {
        Self {
            status: Ok(status),
            retry_after: None,
        }
    }

    /// A status that could not be read.
    pub const fn unreadable(failure: Failure) -> Self {
        Self {
            status: Err(failure),
            retry_after: None,
        }
    }
}

/// Reads the raw result `R` of one status request into an [`OperationStatus`].
///
/// Implementations must be total (every `R` gets a status or a failure) and deterministic.
pub trait ReadStatus<R>: Send + Sync {
    /// What a completed operation carries: the same as the start's classifier.
    type Payload;

    /// The operation a start answer accepted, when it names one to follow.
    ///
    /// The default is the start classification's lifecycle when it has not ended. A protocol
    /// whose acceptance is an ordinary 200 (a long-running operation resource) overrides it.
    fn accepted(&self, start: &Classification<Self::Payload>) -> Option<Operation> {
        start
            .lifecycle
            .as_ref()
            .filter(|lifecycle| !lifecycle.state().is_terminal())
            .map(|lifecycle| lifecycle.operation().clone())
    }

    /// Why this reader cannot follow `operation`, when it cannot (a status URL protocol and an
    /// operation without a status URL). The call then ends with this AccessFailure.
    fn refuse(&self, _operation: &Operation) -> Option<Failure> {
        None
    }

    /// Reads one status request's raw result.
    fn read(&self, operation: &Operation, raw: R) -> StatusRead<Self::Payload>;
}

/// A status reader made of the tool author's own mapping.
///
/// ```
/// use candor_adapter::follow::{FnStatus, OperationStatus, ReadStatus, StatusRead};
/// use candor_schema::{Evidence, EvidenceKind, Operation, Resource};
///
/// // A job API whose client returns the job's state and, once done, its output's version.
/// let reader = FnStatus::new(|operation: &Operation, raw: (String, Option<u64>)| match raw {
///     (state, Some(version)) if state == "done" => StatusRead::status(OperationStatus::Completed {
///         result: version,
///         verified_by: Evidence { kind: EvidenceKind::Query, value: format!("GET /exports/{}?version={version}", operation.id) },
///         resource: Some(Resource { id: format!("/exports/{}", operation.id), version: Some(version.to_string()) }),
///     }),
///     _ => StatusRead::status(OperationStatus::Running { percent_complete: None }),
/// });
/// let operation = Operation { id: "e-1".into(), status_url: None, generated: false };
/// assert!(reader.read(&operation, ("done".into(), Some(7))).status.unwrap().is_terminal());
/// ```
pub struct FnStatus<F> {
    mapping: F,
}

impl<F> FnStatus<F> {
    /// Wraps a mapping from the operation and one status request's raw result to a read.
    pub const fn new(mapping: F) -> Self {
        Self { mapping }
    }
}

impl<F> std::fmt::Debug for FnStatus<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnStatus")
    }
}

impl<F, R, P> ReadStatus<R> for FnStatus<F>
where
    F: Fn(&Operation, R) -> StatusRead<P> + Send + Sync,
{
    type Payload = P;

    fn read(&self, operation: &Operation, raw: R) -> StatusRead<P> {
        (self.mapping)(operation, raw)
    }
}

/// Placeholder for an adapter that follows no operation; an adapter built with it has no
/// `call_and_follow` or `resume`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFollow;

/// The lifecycle an operation status stands for.
pub(crate) fn lifecycle_of<P>(operation: &Operation, status: &OperationStatus<P>) -> Lifecycle {
    let operation = operation.clone();
    match status {
        OperationStatus::Queued => Lifecycle::Queued { operation },
        OperationStatus::Running { percent_complete } => Lifecycle::Running {
            operation,
            percent_complete: *percent_complete,
        },
        OperationStatus::Completed {
            verified_by,
            resource,
            ..
        } => Lifecycle::Completed {
            operation,
            verified_by: verified_by.clone(),
            resource: resource.clone(),
        },
        OperationStatus::Partial {
            covered, resource, ..
        } => Lifecycle::Partial {
            operation,
            covered: covered.clone(),
            resource: resource.clone(),
        },
        OperationStatus::Failed { reason } => Lifecycle::Failed {
            operation,
            reason: reason.clone(),
        },
        OperationStatus::Cancelled => Lifecycle::Cancelled { operation },
    }
}
