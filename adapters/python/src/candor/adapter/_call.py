"""One call in progress: its attempts under the retry policy, and the envelope it ends in.

:class:`_Call` holds a call's times, attempts and decisions; :meth:`_Call.run` and
:meth:`_Call.arun` are its retry loops, synchronous and asynchronous, and :meth:`_Call.finish`
makes the envelope and records its telemetry. Rule ``RETRY-UNSAFE`` (a call that may have been
applied is not sent again unless it is safe to repeat) is applied here, attempt by attempt.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from candor._version import __version__
from candor.adapter._attempt import (
    _NS_PER_MS,
    AttemptContext,
    _millis,
    _no_answer,
    _refuse_awaitable,
    _settled,
    _stamp,
)
from candor.classify import Classification, ExceptionClassifier
from candor.classify.http import ArrivalClassifier, generated_operation_id
from candor.envelope import (
    AccessFailure,
    Attempt,
    Envelope,
    Evidence,
    Failure,
    Lifecycle,
    Outcome,
    Provenance,
)
from candor.names import ADAPTER_NAME
from candor.retry import Decision, GiveUp, Retry, RetryPolicy
from candor.telemetry import LiveSpan, Transition
from candor.vocab import RetryAction

if TYPE_CHECKING:
    # Only a type here: the adapter's module imports this one.
    from candor.adapter._adapter import Adapter

R = TypeVar("R")

ADAPTER_VERSION: Final = f"{ADAPTER_NAME}/{__version__}"
"""The adapter and its version, as recorded in every envelope's provenance."""

_NOT_PROCESSED_STATUSES: Final = frozenset({408, 429, 503})
"""The statuses that say the source did not process the request (rule ``RETRY-UNSAFE``)."""
_NOT_SENT_AGAIN: Final = "the request may have been applied, so it was not sent again: "
"""What precedes the message of a failure that was made permanent by rule ``RETRY-UNSAFE``."""


def _may_have_been_applied(failure: Failure) -> bool:
    """Whether the source may have processed the request that failed (rule ``RETRY-UNSAFE``).

    Only a connection that was never made (a ``connect_error`` with no status) and a 408, 429
    or 503 say that it did not; any other failure may have been applied.
    """
    if failure.status is None:
        return failure.error_type != "connect_error"
    return failure.status not in _NOT_PROCESSED_STATUSES


class _Call(Generic[R]):
    """One call in progress: its attempts, times and decisions."""

    def __init__(self, adapter: Adapter[R], policy: RetryPolicy) -> None:
        self.adapter = adapter
        self.policy = policy
        self.clock = adapter.clock
        self.started = self.clock.monotonic_ns()
        self.started_wall = self.clock.wall_ns()
        self.started_at, self.started_ns = _stamp(self.started_wall)
        self.attempts: list[Attempt] = []
        self.last_started_ns = self.started_ns
        """The last attempt's ``started_at``, in nanoseconds since the epoch."""
        self.live: LiveSpan | None = None
        """The call's span, once the call has had an event (rule ``TELEMETRY-MOMENT``)."""
        self.number = 0
        self.offset = 0
        self.elapsed = 0
        self.idempotency_key = generated_operation_id() if adapter.idempotency_key else None
        """The key every attempt of the call sends, when the adapter makes one."""

    def run(self, fn: Callable[[AttemptContext], R]) -> Classification:
        """Attempts ``fn`` under the retry policy; the last attempt's classification."""
        try:
            while True:
                context = self.next_context()
                try:
                    raw = fn(context)
                except Exception as error:  # noqa: BLE001 - handed to the classifier
                    classification = self.classify_error(error)
                else:
                    if inspect.isawaitable(raw):
                        _refuse_awaitable(
                            raw, "the attempt returned an awaitable: use acall, not call"
                        )
                    classification = self.adapter.classifier.classify(raw)
                if self.late(context):
                    classification = self.timed_out(context)
                classification = self.unsafe_to_repeat(classification)
                decision = self.settle(classification)
                if not isinstance(decision, Retry):
                    return classification
                self.clock.sleep(decision.after_ns)
                self.slept()
        except BaseException:
            # An exception ends the call with no envelope: its span ends with what it has.
            self.abandon()
            raise

    async def arun(self, fn: Callable[[AttemptContext], Awaitable[R]]) -> Classification:
        """:meth:`run` for attempts that return awaitables, each cut at its timeout."""
        try:
            while True:
                context = self.next_context()
                try:
                    operation = fn(context)
                except Exception as error:  # noqa: BLE001 - handed to the classifier
                    classification = self.classify_error(error)
                else:
                    done = await _settled(operation, context.timeout_ns, self.clock)
                    classification = self.timed_out(context) if done is None else self.settled(done)
                classification = self.unsafe_to_repeat(classification)
                decision = self.settle(classification)
                if not isinstance(decision, Retry):
                    return classification
                await self.clock.asleep(decision.after_ns)
                self.slept()
        except BaseException:
            # An exception or a cancellation ends the call with no envelope, as in run.
            self.abandon()
            raise

    def next_context(self) -> AttemptContext:
        self.number += 1
        deadline_left = max(self.adapter.deadline_ns - self.offset, 0)
        return AttemptContext(
            self.number,
            min(self.adapter.attempt_timeout_ns, deadline_left),
            self.idempotency_key,
        )

    def classified(self, error: BaseException) -> Classification | None:
        """What the classifier makes of an error an attempt raised; ``None`` when no outcome.

        Only an :class:`Exception` handed to an :class:`~candor.classify.ExceptionClassifier`
        can be an outcome.
        """
        classifier = self.adapter.classifier
        if isinstance(error, Exception) and isinstance(classifier, ExceptionClassifier):
            return classifier.classify_exception(error)
        return None

    def classify_error(self, error: BaseException) -> Classification:
        """Classifies what an attempt raised, or raises it again when it is no outcome."""
        classification = self.classified(error)
        if classification is None:
            raise error
        return classification

    def settled(self, done: asyncio.Future[R]) -> Classification:
        """The classification of an asynchronous attempt that finished within its time."""
        error = done.exception()
        if error is None:
            return self.adapter.classifier.classify(done.result())
        return self.classify_error(error)

    def timed_out(self, context: AttemptContext) -> Classification:
        """The attempt's classification when its time ran out before it returned.

        The response the attempt recorded as arriving is its result, cut where the time ran
        out, when the classifier reads arrivals; without one the attempt gave no answer.
        """
        arrival = context.arrival
        classifier = self.adapter.classifier
        if arrival is not None and isinstance(classifier, ArrivalClassifier):
            return classifier.classify_arrival(arrival, context.timeout_ns)
        return Classification(AccessFailure(_no_answer(context, self.adapter.attempt_timeout_ns)))

    def late(self, context: AttemptContext) -> bool:
        """Whether the attempt outlasted its timeout (a synchronous attempt cannot be cut)."""
        return self.clock.monotonic_ns() - self.started - self.offset > context.timeout_ns

    def unsafe_to_repeat(self, classification: Classification) -> Classification:
        """The classification, made permanent when the call must not be sent again.

        Rule ``RETRY-UNSAFE``: a retryable failure that may have been applied, of a call that is
        not safe to repeat, becomes not retryable, and its message says why it was not sent
        again. Anything else is returned as it is.
        """
        outcome = classification.outcome
        if (
            not isinstance(outcome, AccessFailure)
            or not outcome.failure.retryable
            or self.adapter.safe_to_repeat
            or not _may_have_been_applied(outcome.failure)
        ):
            return classification
        failure = outcome.failure
        permanent = replace(failure, retryable=False, message=_NOT_SENT_AGAIN + failure.message)
        return replace(classification, outcome=AccessFailure(permanent))

    def settle(self, classification: Classification) -> Decision:
        """Decides what follows the attempt just made, and records it."""
        outcome = classification.outcome
        elapsed = max(self.clock.monotonic_ns() - self.started, 0)
        decision = self.policy.decide_ns(
            self.number, elapsed, outcome, self.adapter.jitter.next_fraction()
        )
        if isinstance(decision, Retry) and elapsed + decision.after_ns >= self.adapter.deadline_ns:
            decision = GiveUp(RetryAction.EXHAUSTED)
        failure = outcome.failure if isinstance(outcome, AccessFailure) else None
        # An attempt that starts with the call (the first) starts at the call's own time.
        started_at, started_ns = (
            (self.started_at, self.started_ns)
            if self.offset == 0
            else _stamp(self.started_wall + self.offset)
        )
        self.last_started_ns = started_ns
        retry = decision if isinstance(decision, Retry) else None
        # Positional arguments, in the order of the fields, cost less than keywords; the
        # field each one fills is named beside it.
        attempt = Attempt(
            self.number,  # number
            started_at,  # started_at
            _millis(elapsed - self.offset),  # duration_ms
            outcome.CLASS,  # outcome_class
            outcome.failure_kind,  # failure_kind
            None if failure is None else failure.status,  # status
            decision.action(outcome),  # retry_action
            None if retry is None else _millis(retry.after_ns),  # backoff_ms
            None if failure is None else failure.error_type,  # error_type
        )
        self.attempts.append(attempt)
        self.elapsed = elapsed
        if retry is not None:
            # The failed attempt's event happens now, not when the call ends.
            self.live = self.adapter.telemetry.retried(
                self.live, self.started_ns, attempt, started_ns, self.policy.max_attempts
            )
        return decision

    def abandon(self) -> None:
        """Ends the call's span, if it started one, when the call ends by an exception.

        The events recorded while the call ran stay on it; the call has no envelope, so the
        span gets no outcome and the call is not counted.
        """
        live = self.live
        if live is not None:
            self.live = None
            self.adapter.telemetry.abandon(live, self.clock.wall_ns())

    def saw(self, transition: Transition) -> None:
        """Records a state of an operation the call saw, now (rule ``TELEMETRY-LIFECYCLE``)."""
        self.live = self.adapter.telemetry.transition(self.live, self.started_ns, transition)

    def saw_answer(self, lifecycle: Lifecycle, evidence: Evidence | None) -> None:
        """Records the state of an operation that the last answer carried, as of that answer."""
        self.saw(Transition(self.last_event_ns(), lifecycle, evidence))

    def last_event_ns(self) -> int:
        """The time of the last attempt's event: its start plus its whole milliseconds.

        The call's end so far when it has made no attempt.
        """
        if not self.attempts:
            return _stamp(self.started_wall + self.elapsed)[1]
        return self.last_started_ns + self.attempts[-1].duration_ms * _NS_PER_MS

    def slept(self) -> None:
        self.offset = self.clock.monotonic_ns() - self.started

    def add_following(
        self, accepted: int, finished: int, outcome: Outcome, action: RetryAction | None
    ) -> None:
        """Records the attempt of a following: from the acceptance to the following's end.

        ``accepted`` and ``finished`` are offsets from the call's start, in nanoseconds.
        """
        failure = outcome.failure if isinstance(outcome, AccessFailure) else None
        started_at, self.last_started_ns = _stamp(self.started_wall + accepted)
        self.attempts.append(
            Attempt(
                number=len(self.attempts) + 1,
                started_at=started_at,
                duration_ms=_millis(finished - accepted),
                outcome_class=outcome.CLASS,
                failure_kind=outcome.failure_kind,
                status=None if failure is None else failure.status,
                retry_action=action,
                error_type=None if failure is None else failure.error_type,
            )
        )
        self.elapsed = finished

    def finish(self, last: Classification, *, followed: bool = False) -> Envelope:
        """The call's envelope, with its telemetry recorded.

        A lifecycle in the last answer of a call that did not follow it is a state of an
        operation the call saw when that answer came (a following records its states as it
        sees them).
        """
        if not followed and last.lifecycle is not None:
            self.saw_answer(last.lifecycle, last.evidence)
        adapter = self.adapter
        finished_at, finished_ns = _stamp(self.started_wall + self.elapsed)
        # Positional arguments, as in settle.
        envelope = Envelope(
            adapter.tool,  # tool
            adapter.target,  # target
            last.outcome,  # outcome
            Provenance(  # provenance
                adapter.source_system,  # source_system
                ADAPTER_VERSION,  # adapter
                self.started_at,  # started_at
                finished_at,  # finished_at
                adapter.actor,  # actor
            ),
            tuple(self.attempts),  # attempts
            adapter.authority,  # authority
            last.evidence,  # evidence
            last.lifecycle,  # lifecycle
        )
        adapter.telemetry.record(
            envelope,
            self.policy.max_attempts,
            started_ns=self.started_ns,
            finished_ns=finished_ns,
            last_started_ns=self.last_started_ns,
            live=self.live,
        )
        self.live = None
        return envelope
