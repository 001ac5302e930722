"""Following an operation that a call accepted: its status reads, up to the operation's end.

:func:`_accepted` starts the following of the operation a call's answer accepted, and
:func:`_resumed` that of an operation an earlier call accepted. :class:`_Following` makes the
status reads (:meth:`_Following.run` and :meth:`_Following.arun`, synchronous and asynchronous),
each after the retry policy's backoff, and ends the call as the contract's section 10.8 says:
with the operation's end, or the failure to read its status, or the operation deadline.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

from candor.adapter._attempt import (
    _NS_PER_MS,
    AttemptContext,
    _millis,
    _no_answer,
    _refuse_awaitable,
    _settled,
    _stamp,
)
from candor.adapter._call import _Call
from candor.classify import Classification
from candor.envelope import (
    AccessFailure,
    Envelope,
    Evidence,
    Failure,
    Lifecycle,
    Operation,
    Partial,
    Success,
    Truncation,
)
from candor.follow import OperationStatus, StatusRead, StatusReader
from candor.redact import redact_text
from candor.retry import format_seconds
from candor.telemetry import Transition
from candor.vocab import AccessFailureKind, EvidenceKind, LifecycleState, PartialKind, RetryAction

if TYPE_CHECKING:
    # Only a type here: the adapter's module imports this one.
    from candor.adapter._adapter import Adapter


@dataclass(frozen=True, slots=True)
class _Ended:
    """The operation ended."""

    status: OperationStatus


@dataclass(frozen=True, slots=True)
class _Deadline:
    """The operation deadline ran out before the operation ended."""


@dataclass(frozen=True, slots=True)
class _Unreadable:
    """The status could not be read."""

    failure: Failure
    action: RetryAction


_Ending: TypeAlias = _Ended | _Deadline | _Unreadable
"""How a following ended."""


def _ended(
    operation: Operation, status: OperationStatus, acceptance: Evidence | None
) -> tuple[Classification, RetryAction | None]:
    """The call's classification when the operation ended in ``status``, and the action."""
    lifecycle = status.lifecycle(operation)
    if status.state is LifecycleState.COMPLETED:
        return Classification(Success(status.result), status.verified_by, lifecycle), None
    if status.state is LifecycleState.PARTIAL:
        # Both are set on a partial status; ``or`` only tells the type checker.
        truncation = Truncation(
            PartialKind.OPERATION_PARTIAL, status.covered or "", status.dropped or ""
        )
        partial = Classification(Partial(status.result, truncation), acceptance, lifecycle)
        return partial, RetryAction.ACCEPT_PARTIAL
    name = redact_text(operation.id)
    if status.state is LifecycleState.FAILED:
        failure = Failure(
            AccessFailureKind.TOOL_ERROR,
            retryable=False,
            message=f"operation {name} failed: {redact_text(status.reason or '')}",
            error_type="operation_failed",
        )
    else:
        failure = Failure(
            AccessFailureKind.CANCELLED,
            retryable=False,
            message=f"operation {name} was cancelled before it finished",
            error_type="operation_cancelled",
        )
    return Classification(AccessFailure(failure), acceptance, lifecycle), RetryAction.PERMANENT


def _wait_ns(call: _Call[Any], reads: int, asked_ms: int | None) -> int:
    """The wait before the next status read: the retry policy's backoff for ``reads`` reads.

    It is never less than what the source asked for (``Retry-After``), in milliseconds.
    """
    backoff = call.policy.backoff_ns(reads, call.adapter.jitter.next_fraction())
    return max(backoff, (asked_ms or 0) * _NS_PER_MS)


def _accepted(
    call: _Call[Any], last: Classification, reader: StatusReader[Any]
) -> _Following | None:
    """The following of the operation that the call's answer accepted, if it accepted one."""
    operation = reader.accepted(last) if isinstance(last.outcome, Success) else None
    if operation is None:
        return None
    accepted = call.elapsed
    # An acceptance that the classifier did not report as one (an operation resource) is
    # seen as accepted all the same, when the answer came.
    lifecycle = last.lifecycle if last.lifecycle is not None else Lifecycle.accepted(operation)
    call.saw_answer(lifecycle, last.evidence)
    return _Following(
        call,
        reader,
        operation,
        accepted=accepted,
        wait=_wait_ns(call, 1, last.poll_after_ms),
        acceptance=last.evidence,
        seen=lifecycle.state,
    )


def _resumed(adapter: Adapter[Any], reader: StatusReader[Any], operation: Operation) -> _Following:
    """The following of an operation accepted earlier: its first read is due at once.

    It is a new call's, which makes no attempt of its own.
    """
    # The acceptance was seen by the call that returned it.
    return _Following(
        _Call(adapter, adapter.policy),
        reader,
        operation,
        accepted=0,
        wait=0,
        acceptance=Evidence(EvidenceKind.JOB_ID, operation.id),
        seen=None,
    )


class _Following:
    """One following in progress: the status reads of an operation, up to its end.

    Times are offsets from the call's start in nanoseconds, as in :class:`_Call`; the following
    starts at the acceptance.
    """

    def __init__(
        self,
        call: _Call[Any],
        reader: StatusReader[Any],
        operation: Operation,
        *,
        accepted: int,
        wait: int,
        acceptance: Evidence | None,
        seen: LifecycleState | None,
    ) -> None:
        self.call = call
        self.adapter = call.adapter
        self.reader = reader
        self.operation = operation
        self.accepted = accepted
        self.accepted_ns = _stamp(call.started_wall + accepted)[1]
        self.wait = wait
        """The wait before the next read."""
        self.acceptance = acceptance
        self.seen = seen
        """The state the call saw last, if it saw one."""
        self.last_read: OperationStatus | None = None
        """The last state read, until the end."""
        self.reads = 0
        self.failed_reads = 0
        """Failed reads in a row."""
        self.read_started = 0
        refused = reader.refuse(operation)
        self.ending: _Ending | None = (
            None if refused is None else _Unreadable(refused, RetryAction.PERMANENT)
        )

    def run(self, read_status: Callable[[Operation, AttemptContext], object]) -> Envelope:
        """Reads the status until the following ends, sleeping on the clock between reads."""
        clock = self.call.clock
        try:
            while self.due():
                if self.wait:
                    clock.sleep(self.wait)
                context = self.start_read()
                try:
                    raw = read_status(self.operation, context)
                except Exception as error:  # noqa: BLE001 - handed to the status reader
                    read = self.read_error(error)
                else:
                    if inspect.isawaitable(raw):
                        _refuse_awaitable(
                            raw,
                            "the status read returned an awaitable: "
                            "use acall_and_follow or aresume",
                        )
                    read = self.read(raw)
                self.take(self.timed_out(context) if self.late(context) else read)
            return self.finish()
        except BaseException:
            # An exception ends the call with no envelope, as in _Call.run.
            self.call.abandon()
            raise

    async def arun(
        self, read_status: Callable[[Operation, AttemptContext], Awaitable[object]]
    ) -> Envelope:
        """:meth:`run` with asynchronous sleeps, and reads cut at their timeout."""
        clock = self.call.clock
        try:
            while self.due():
                if self.wait:
                    await clock.asleep(self.wait)
                context = self.start_read()
                try:
                    pending = read_status(self.operation, context)
                except Exception as error:  # noqa: BLE001 - handed to the status reader
                    self.take(self.read_error(error))
                    continue
                done = await _settled(pending, context.timeout_ns, clock)
                self.take(self.timed_out(context) if done is None else self.settled(done))
            return self.finish()
        except BaseException:
            # An exception or a cancellation ends the call with no envelope, as in _Call.run.
            self.call.abandon()
            raise

    def since_acceptance(self) -> int:
        call = self.call
        return max(call.clock.monotonic_ns() - call.started - self.accepted, 0)

    def due(self) -> bool:
        """Whether another read is due, after the wait.

        A read that would start at or after the operation deadline is not made: the following
        ends there.
        """
        if self.ending is not None:
            return False
        if self.since_acceptance() + self.wait >= self.adapter.operation_deadline_ns:
            self.ending = _Deadline()
            return False
        return True

    def start_read(self) -> AttemptContext:
        """Counts the read that starts now and gives its timeout."""
        self.reads += 1
        self.read_started = self.since_acceptance()
        left = max(self.adapter.operation_deadline_ns - self.read_started, 0)
        return AttemptContext(self.reads, min(self.adapter.attempt_timeout_ns, left))

    def late(self, context: AttemptContext) -> bool:
        """Whether the read outlasted its timeout (a synchronous read cannot be cut)."""
        return self.since_acceptance() - self.read_started > context.timeout_ns

    def timed_out(self, context: AttemptContext) -> StatusRead:
        return StatusRead(_no_answer(context, self.adapter.attempt_timeout_ns))

    def read(self, raw: object) -> StatusRead:
        return self.reader.read(self.operation, raw)

    def read_error(self, error: BaseException) -> StatusRead:
        """What a status request that raised ``error`` read; the error itself when nothing."""
        read = (
            self.reader.read_exception(self.operation, error)
            if isinstance(error, Exception)
            else None
        )
        if read is None:
            raise error
        return read

    def settled(self, done: asyncio.Future[object]) -> StatusRead:
        """What a status request that finished read."""
        error = done.exception()
        return self.read(done.result()) if error is None else self.read_error(error)

    def take(self, read: StatusRead) -> None:
        """Takes one read: the following ends, or the wait before the next read is set.

        The wait is the retry policy's backoff for the read's number, never less than the
        ``Retry-After`` the read carried.
        """
        status = read.status
        if isinstance(status, OperationStatus):
            self.ending = self._status(status)
        else:
            self.ending = self._failure(status)
        if self.ending is None:
            self.wait = _wait_ns(self.call, self.reads, read.retry_after_ms)

    def _status(self, status: OperationStatus) -> _Ending | None:
        if status.state is not self.seen:
            self.seen = status.state
            self.call.saw(Transition(self._now_ns(), status.lifecycle(self.operation)))
        if status.is_terminal:
            return _Ended(status)
        self.last_read = status
        self.failed_reads = 0
        return None

    def _failure(self, failure: Failure) -> _Ending | None:
        self.failed_reads += 1
        if not failure.retryable:
            return _Unreadable(failure, RetryAction.PERMANENT)
        if self.failed_reads >= self.call.policy.max_attempts:
            return _Unreadable(failure, RetryAction.EXHAUSTED)
        return None

    def _now_ns(self) -> int:
        """Now, on the following attempt's grid of whole milliseconds from the acceptance.

        An attempt's end is recorded in whole milliseconds; a state seen on the same grid is
        never later than the terminal event, which stays the span's last.
        """
        return self.accepted_ns + _millis(self.since_acceptance()) * _NS_PER_MS

    def finish(self) -> Envelope:
        """The envelope: the start's attempts, then one attempt for the following."""
        classification, action = self._end()
        finished = self.accepted + self.since_acceptance()
        self.call.add_following(self.accepted, finished, classification.outcome, action)
        return self.call.finish(classification, followed=True)

    def _end(self) -> tuple[Classification, RetryAction | None]:
        """The call's classification and the following's retry action (contract, 10.8)."""
        operation = self.operation
        last = (
            Lifecycle.accepted(operation)
            if self.last_read is None
            else self.last_read.lifecycle(operation)
        )
        name = redact_text(operation.id)
        match self.ending:
            case _Ended(status=status):
                return _ended(operation, status, self.acceptance)
            case _Unreadable(failure=failure, action=action):
                message = (
                    f"reading the status of operation {name}, last seen {last.state}: "
                    f"{failure.message}"
                )
                failure = replace(failure, message=message)
            case _:
                failure = Failure(
                    AccessFailureKind.DEADLINE,
                    retryable=True,
                    message=(
                        f"operation {name} was still {last.state} when the operation deadline "
                        f"of {format_seconds(self.adapter.operation_deadline_ns)} ran out, "
                        f"after {self.reads} status read(s)"
                    ),
                    error_type="deadline",
                )
                action = RetryAction.EXHAUSTED
        return Classification(AccessFailure(failure), self.acceptance, last), action
