//! Following an accepted operation to its end: its status read until it ends, the reads fail
//! past the retry policy, or the operation deadline runs out; the ending becomes the call's last
//! classification and one more attempt.

use std::future::Future;
use std::time::Duration;

use candor_schema::redact::redact_text;
use candor_schema::{
    AccessFailureKind, Attempt, Evidence, Extent, Failure, Lifecycle, Operation, Outcome,
    PartialKind, RetryAction, Timestamp, Truncation,
};

use super::{Adapter, AttemptContext, Run, Start, millis, race, timed_out};
use crate::classify::Classification;
use crate::clock::Clock;
use crate::follow::{OperationStatus, ReadStatus, StatusRead, lifecycle_of};
use crate::telemetry::Transition;

impl<C, K: Clock, S> Adapter<C, K, S> {
    /// Reads `operation`'s status until it ends, the reads fail past the policy, or the
    /// operation deadline runs out; the ending becomes the run's last classification and one
    /// more attempt.
    pub(super) async fn follow<P, Q, QFut, QR>(
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
        let mut trace = start.trace;
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
                    // Whole milliseconds from the acceptance, as the following attempt's end
                    // is written: a state seen as following ends is not after its end.
                    let transition = Transition {
                        at: start.started_wall
                            + start.accepted_at
                            + Duration::from_millis(millis(since_acceptance())),
                        lifecycle: lifecycle_of(&operation, status),
                        evidence: None,
                    };
                    self.telemetry.transition(&mut trace, &transition);
                    transitions.push(transition);
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
            trace,
        }
    }

    /// The wait before status read `read` (1-based) and after the one before it: the retry
    /// policy's backoff for that attempt, with jitter.
    pub(super) fn poll_wait(&self, read: u32) -> Duration {
        self.policy
            .backoff_ceiling(read)
            .mul_f64(self.jitter.next_fraction().clamp(0.0, 1.0))
    }
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
