"""The adapter: a configured tool that runs calls through classification, retry and telemetry.

Build one :class:`Adapter` per tool and share it. A call is made in one of four ways:

- ``await adapter.acall(fn)``: ``fn(attempt)`` returns an awaitable of the raw result; the
  attempt timeout is enforced (the attempt is cancelled when it runs out) and backoffs are
  asynchronous sleeps;
- ``adapter.call(fn)``: the same, synchronous. A synchronous attempt cannot be interrupted:
  pass ``attempt.timeout_seconds`` to the client. An attempt that returns after its timeout is
  classified as the asynchronous path would have classified it when it cut the attempt there
  (the late result is dropped); backoffs are real sleeps that block the thread;
- ``@adapter.wrap`` on a function that takes the attempt context as the keyword ``attempt``:
  calling the decorated function makes a call and returns the envelope;
- ``with adapter.attempt() as observed: …; observed.record(raw)``: for code that makes the
  request itself. One attempt is observed, classified and recorded, and never retried: a
  transient AccessFailure ends as ``exhausted`` (its next actions are retry and escalate), so
  the caller decides whether to open another attempt.

When an attempt's time runs out (its timeout, or what is left of the call's deadline), the
attempt is an AccessFailure ``timeout`` (``deadline``) with no answer, unless its response had
begun to arrive: a client integration records the status and headers, then the body as it
arrives, on the attempt's context (:meth:`AttemptContext.receiving`), and the attempt's outcome
is then that response with the body received by then (a 2xx is a Partial ``mid_stream``; rule
``RETRY-ATTEMPT-TIMEOUT``). The httpx and requests integrations record it. Which of the
adapter's timer and the client's own reading stops first does not matter: both give the bytes
that arrived within the attempt's time.

A call that may have been applied is not sent again unless it is safe to repeat (rule
``RETRY-UNSAFE``): its ``method`` is idempotent, the author declares it ``idempotent``, or the
adapter gives every attempt the call's ``idempotency_key``. A failure known not to have been
processed (no connection made, a 408, 429 or 503) is retried whatever the method.

An adapter with a status reader (:mod:`candor.follow`) can also follow an operation that a call
accepted to its end: ``adapter.call_and_follow(fn, read_status)`` makes the call and, when its
answer accepted an operation, reads the operation's status with ``read_status(operation,
attempt)`` until it ends; ``adapter.resume(operation, read_status)`` follows an operation that an
earlier call accepted. ``acall_and_follow`` and ``aresume`` are their asynchronous forms.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Final, Generic, TypeAlias, TypeVar, overload

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from candor._version import __version__
from candor.classify import Classification, Classifier, ExceptionClassifier
from candor.classify.http import ArrivalClassifier, HttpArrival, generated_operation_id
from candor.clock import Clock, SystemClock
from candor.envelope import (
    AccessFailure,
    Attempt,
    Authority,
    Envelope,
    Evidence,
    Failure,
    Lifecycle,
    Operation,
    Outcome,
    Partial,
    Provenance,
    Success,
    Truncation,
)
from candor.follow import OperationStatus, StatusRead, StatusReader
from candor.names import ADAPTER_NAME
from candor.redact import redact_text, redact_url
from candor.retry import (
    Decision,
    GiveUp,
    Jitter,
    RandomJitter,
    Retry,
    RetryPolicy,
    debug_duration,
    ns_of,
    timedelta_of,
)
from candor.telemetry import LiveSpan, Telemetry, Transition
from candor.timestamps import datetime_from_ns
from candor.vocab import AccessFailureKind, EvidenceKind, LifecycleState, PartialKind, RetryAction

__all__ = ["ADAPTER_VERSION", "Adapter", "AttemptContext", "Observation"]

ADAPTER_VERSION: Final = f"{ADAPTER_NAME}/{__version__}"
"""The adapter and its version, as recorded in every envelope's provenance."""

R = TypeVar("R")
T = TypeVar("T")
_NS_PER_MS: Final = 1_000_000

_IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
"""The methods that RFC 9110 (section 9.2.2) defines as idempotent."""
_TOKEN_PUNCTUATION: Final = frozenset("!#$%&'*+-.^_`|~")
"""The characters other than letters and digits that an RFC 9110 token (a method) may hold."""
_NOT_PROCESSED_STATUSES: Final = frozenset({408, 429, 503})
"""The statuses that say the source did not process the request (rule ``RETRY-UNSAFE``)."""
_NOT_SENT_AGAIN: Final = "the request may have been applied, so it was not sent again: "
"""What precedes the message of a failure that was made permanent by rule ``RETRY-UNSAFE``."""


@dataclass(frozen=True, slots=True)
class AttemptContext:
    """What an attempt is told about itself."""

    number: int
    """1-based."""
    timeout_ns: int
    """How long this attempt may take, in nanoseconds: the attempt timeout, or less when the
    call's deadline is nearer."""
    idempotency_key: str | None = None
    """The call's idempotency key (``candor-`` and 32 lowercase hexadecimal digits), the same
    for every attempt of the call, when the adapter makes one (``idempotency_key=True``); the
    attempt sends it unchanged in the ``Idempotency-Key`` header. ``None`` otherwise, and for
    the status reads of a following."""
    _arrival: HttpArrival | None = field(default=None, init=False, repr=False, compare=False)

    def receiving(self, arrival: HttpArrival) -> HttpArrival:
        """Records that this attempt's response has begun to arrive, and returns ``arrival``.

        A client integration calls it once the status and headers have arrived, then adds the
        body to ``arrival`` as it arrives, never past the attempt's time. When that time runs
        out before the attempt returns (the adapter's timer fires, or a synchronous attempt
        returns late), the attempt's outcome is the response as it stood then
        (:meth:`HttpArrival.cut`, classified by the adapter's classifier when it is an
        :class:`~candor.ArrivalClassifier`), not an attempt with no answer. A second call
        replaces the first's arrival.
        """
        object.__setattr__(self, "_arrival", arrival)
        return arrival

    @property
    def arrival(self) -> HttpArrival | None:
        """The response recorded by :meth:`receiving`, if the attempt recorded one."""
        return self._arrival

    @property
    def timeout(self) -> timedelta:
        """How long this attempt may take."""
        return timedelta_of(self.timeout_ns)

    @property
    def timeout_seconds(self) -> float:
        """How long this attempt may take, in seconds: what HTTP clients take as ``timeout``."""
        return self.timeout_ns / 1e9


def _millis(ns: int) -> int:
    return max(ns, 0) // _NS_PER_MS


def _stamp(wall_ns: int) -> tuple[datetime, int]:
    """A wall-clock time as the envelope holds it (cut to microseconds), and in nanoseconds.

    Telemetry takes the nanoseconds, which are exactly what the datetime converts back to.
    """
    at = datetime_from_ns(wall_ns)
    return at, wall_ns // 1000 * 1000


def _no_answer(after_ns: int, cut_by_deadline: bool) -> Failure:
    """The failure of an attempt that produced no answer in time.

    It is labelled from the adapter's own knowledge that a request went out and nothing came
    back.
    """
    if cut_by_deadline:
        kind = AccessFailureKind.DEADLINE
        message = (
            f"the call's deadline ran out {debug_duration(after_ns)} into the attempt, "
            "with no answer"
        )
        error_type = "deadline"
    else:
        kind = AccessFailureKind.TIMEOUT
        message = f"no answer within the attempt timeout of {debug_duration(after_ns)}"
        error_type = "timeout"
    return Failure(kind, retryable=True, message=message, error_type=error_type)


def _may_have_been_applied(failure: Failure) -> bool:
    """Whether the source may have processed the request that failed (rule ``RETRY-UNSAFE``).

    Only a connection that was never made (a ``connect_error`` with no status) and a 408, 429
    or 503 say that it did not; any other failure may have been applied.
    """
    if failure.status is None:
        return failure.error_type != "connect_error"
    return failure.status not in _NOT_PROCESSED_STATUSES


def _method_name(method: str) -> str:
    """The method as RFC 9110 names it (upper case), or :class:`ValueError` when it is none."""
    if not method or not all(
        (c.isascii() and c.isalnum()) or c in _TOKEN_PUNCTUATION for c in method
    ):
        raise ValueError(f"method must be an HTTP method name such as 'POST', got {method!r}")
    return method.upper()


def _close(awaitable: object) -> None:
    """Closes a coroutine that will never be awaited, so that it raises no warning."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


def host_of(target: str) -> str:
    """The host part of a URL-like target, or the whole target when it is not a URL."""
    _, found, rest = target.partition("://")
    if not found:
        return target
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    return rest[:end].rpartition("@")[2]


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

    def next_context(self) -> AttemptContext:
        self.number += 1
        deadline_left = max(self.adapter.deadline_ns - self.offset, 0)
        return AttemptContext(
            self.number,
            min(self.adapter.attempt_timeout_ns, deadline_left),
            self.idempotency_key,
        )

    def timed_out(self, context: AttemptContext) -> Classification:
        """The attempt's classification when its time ran out before it returned.

        The response the attempt recorded as arriving is its result, cut where the time ran
        out, when the classifier reads arrivals; without one the attempt gave no answer.
        """
        arrival = context.arrival
        classifier = self.adapter.classifier
        if arrival is not None and isinstance(classifier, ArrivalClassifier):
            return classifier.classify_arrival(arrival, context.timeout_ns)
        cut_by_deadline = context.timeout_ns < self.adapter.attempt_timeout_ns
        return Classification(AccessFailure(_no_answer(context.timeout_ns, cut_by_deadline)))

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
            self.saw(Transition(self.last_event_ns(), last.lifecycle, last.evidence))
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
        cut_by_deadline = context.timeout_ns < self.adapter.attempt_timeout_ns
        return StatusRead(_no_answer(context.timeout_ns, cut_by_deadline))

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
            backoff = self.call.policy.backoff_ns(self.reads, self.adapter.jitter.next_fraction())
            self.wait = max(backoff, (read.retry_after_ms or 0) * _NS_PER_MS)

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
                        f"of {debug_duration(self.adapter.operation_deadline_ns)} ran out, "
                        f"after {self.reads} status read(s)"
                    ),
                    error_type="deadline",
                )
                action = RetryAction.EXHAUSTED
        return Classification(AccessFailure(failure), self.acceptance, last), action


class Adapter(Generic[R]):
    """A tool wrapped by Candor: every call returns an :class:`~candor.Envelope`.

    The envelope is of exactly one of four classes, made after the retry policy has run, with
    telemetry recorded.

    ``R`` is the raw result one attempt produces, which ``classifier`` classifies (an
    :data:`~candor.classify.http.HttpExchange` for :class:`~candor.HttpClassifier`).

    Credentials in ``target`` (user-info, token or signature parameters) are redacted before it
    is stored anywhere. ``source_system`` defaults to the target's host. Telemetry goes to the
    global OpenTelemetry providers unless ``tracer_provider`` and ``meter_provider`` are given;
    a ``tool.call`` span is recorded for a call with an AccessFailure or Partial attempt or an
    asynchronous operation, or for every call with ``trace_every_call``. The span starts at the
    call's first event, and each event a call has before it ends (a failed attempt that is
    retried, a state of an operation) is also emitted when it happens as a log record in the
    span, through ``logger_provider``, else the provider set with
    :func:`~candor.set_logger_provider`, else OpenTelemetry's global logger provider.
    ``jitter`` and ``clock`` are for tests.

    ``method`` is the request's method (``GET`` by default; a tool not reached over HTTP takes
    the method its call is like), written in any case. ``idempotent`` declares whether the call
    may be made twice with the effect of once; it defaults to the method's (``True`` for
    ``GET``, ``HEAD``, ``OPTIONS``, ``TRACE``, ``PUT`` and ``DELETE``). With
    ``idempotency_key=True`` the adapter makes one key per call and gives it to every attempt
    as :attr:`AttemptContext.idempotency_key`, which the attempt sends in the
    ``Idempotency-Key`` header. A call that is neither idempotent nor keyed is not safe to
    repeat: an attempt failure that may have been applied (anything but a connection never made
    or a 408, 429 or 503) ends the call as a permanent AccessFailure instead of being retried.

    ``status_reader`` declares how the tool reports the progress of an operation it accepted
    (:class:`~candor.follow.StatusUrl`, :class:`~candor.follow.LongRunning` or the author's
    :class:`~candor.follow.FnStatus`), so that :meth:`call_and_follow` and :meth:`resume` can
    follow it to its end; ``operation_deadline`` bounds a following, from the acceptance.
    """

    def __init__(
        self,
        tool: str,
        target: str,
        classifier: Classifier[R],
        *,
        retry: RetryPolicy | None = None,
        attempt_timeout: timedelta = timedelta(seconds=10),
        deadline: timedelta = timedelta(seconds=30),
        method: str = "GET",
        idempotent: bool | None = None,
        idempotency_key: bool = False,
        status_reader: StatusReader[Any] | None = None,
        operation_deadline: timedelta = timedelta(minutes=10),
        source_system: str | None = None,
        actor: str | None = None,
        authority: Authority | None = None,
        trace_every_call: bool = False,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        jitter: Jitter | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not tool.strip():
            raise ValueError(f"tool name must not be empty or white space, got {tool!r}")
        if not target.strip():
            raise ValueError(f"target must not be empty or white space, got {target!r}")
        for setting, value in (
            ("attempt_timeout", attempt_timeout),
            ("deadline", deadline),
            ("operation_deadline", operation_deadline),
        ):
            if ns_of(value) <= 0:
                raise ValueError(f"{setting} must be positive, got {value!r}")
        self.tool = tool
        """The logical tool name."""
        self.target = redact_url(target)
        """The target, credentials redacted."""
        self.classifier = classifier
        """Classifies each attempt's raw result."""
        self.policy = retry if retry is not None else RetryPolicy()
        """The retry policy."""
        self.attempt_timeout_ns = ns_of(attempt_timeout)
        """How long one attempt may take, in nanoseconds."""
        self.deadline_ns = ns_of(deadline)
        """How long the whole call, retries included, may take, in nanoseconds."""
        self.method = _method_name(method)
        """The request's method, in upper case."""
        self.idempotent = (
            idempotent if idempotent is not None else self.method in _IDEMPOTENT_METHODS
        )
        """Whether the call may be made twice with the effect of once: as declared, else by the
        method."""
        self.idempotency_key = idempotency_key
        """Whether the adapter makes one key per call and gives it to every attempt."""
        self.status_reader = status_reader
        """How the tool reports the progress of an operation it accepted, when declared."""
        self.operation_deadline_ns = ns_of(operation_deadline)
        """How long a followed operation may take from its acceptance to its end, in
        nanoseconds."""
        self.source_system = source_system if source_system is not None else host_of(self.target)
        """The system that answers."""
        self.actor = actor
        """Who makes the calls."""
        self.authority = authority
        """The authority calls run under."""
        self.jitter: Jitter = jitter if jitter is not None else RandomJitter()
        """The source of backoff jitter."""
        self.clock: Clock = clock if clock is not None else SystemClock()
        """The clock."""
        self.telemetry = Telemetry(
            self.tool,
            self.target,
            None if authority is None else authority.describe(),
            source_system=self.source_system,
            actor=actor,
            adapter_version=ADAPTER_VERSION,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            trace_every_call=trace_every_call,
        )
        """Where spans, log records and counts go."""

    def __repr__(self) -> str:
        return f"Adapter(tool={self.tool!r}, target={self.target!r})"

    @property
    def safe_to_repeat(self) -> bool:
        """Whether a call may be sent again after a failure that may have been applied.

        It is when the call is idempotent or carries an idempotency key (rule ``RETRY-UNSAFE``).
        """
        return self.idempotent or self.idempotency_key

    def _classify_error(self, error: Exception) -> Classification:
        """Classifies what an attempt raised, or raises it again when it is no outcome."""
        if isinstance(self.classifier, ExceptionClassifier):
            classification = self.classifier.classify_exception(error)
            if classification is not None:
                return classification
        raise error

    def call(self, fn: Callable[[AttemptContext], R]) -> Envelope:
        """Runs one call synchronously and returns its envelope.

        ``fn`` is attempted under the retry policy, each result is classified, and the envelope
        is that of the final attempt.

        ``fn`` cannot be interrupted: pass ``attempt.timeout_seconds`` to the client. An
        attempt that returns after its timeout is an AccessFailure ``timeout`` (``deadline``
        when the call's deadline cut it) and its result is dropped, unless its response had
        begun to arrive within its time (:meth:`AttemptContext.receiving`): the outcome is then
        that response as it stood when the time ran out. An exception that the classifier does
        not classify propagates, and the call records nothing more: it is not counted, and its
        span, when an earlier attempt's failure started it, ends with the events it has.
        """
        call = _Call(self, self.policy)
        return call.finish(self._run(call, fn))

    def _run(self, call: _Call[R], fn: Callable[[AttemptContext], R]) -> Classification:
        """Attempts ``fn`` under the retry policy; the last attempt's classification."""
        try:
            while True:
                context = call.next_context()
                try:
                    raw = fn(context)
                except Exception as error:  # noqa: BLE001 - handed to the classifier
                    classification = self._classify_error(error)
                else:
                    if inspect.isawaitable(raw):
                        _close(raw)
                        raise TypeError("the attempt returned an awaitable: use acall, not call")
                    classification = self.classifier.classify(raw)
                if call.late(context):
                    classification = call.timed_out(context)
                classification = call.unsafe_to_repeat(classification)
                decision = call.settle(classification)
                if not isinstance(decision, Retry):
                    return classification
                self.clock.sleep(decision.after_ns)
                call.slept()
        except BaseException:
            # An exception ends the call with no envelope: its span ends with what it has.
            call.abandon()
            raise

    async def acall(self, fn: Callable[[AttemptContext], Awaitable[R]]) -> Envelope:
        """Runs one call and returns its envelope.

        ``fn`` is attempted under the retry policy, each result is classified, and the envelope
        is that of the final attempt.

        An attempt that outlasts the attempt timeout is cancelled and is an AccessFailure
        ``timeout``; one cut short by the call's deadline is an AccessFailure ``deadline``.
        When its response had begun to arrive (:meth:`AttemptContext.receiving`), the outcome
        is that response with the body received by then instead: a 2xx is a Partial
        ``mid_stream``, any other status is classified by its status. A budget that runs out
        returns the last AccessFailure with its action ``exhausted``, never an Empty. An
        exception that the classifier does not classify, or a cancellation, propagates, as in
        :meth:`call`.
        """
        call = _Call(self, self.policy)
        return call.finish(await self._arun(call, fn))

    async def _arun(
        self, call: _Call[R], fn: Callable[[AttemptContext], Awaitable[R]]
    ) -> Classification:
        """:meth:`_run` for attempts that return awaitables."""
        try:
            while True:
                context = call.next_context()
                try:
                    operation = fn(context)
                except Exception as error:  # noqa: BLE001 - handed to the classifier
                    classification = self._classify_error(error)
                else:
                    classification = await self._race(operation, context, call)
                classification = call.unsafe_to_repeat(classification)
                decision = call.settle(classification)
                if not isinstance(decision, Retry):
                    return classification
                await self.clock.asleep(decision.after_ns)
                call.slept()
        except BaseException:
            # An exception or a cancellation ends the call with no envelope, as in _run.
            call.abandon()
            raise

    async def _race(
        self, operation: Awaitable[R], context: AttemptContext, call: _Call[R]
    ) -> Classification:
        """The operation's result classified, or a timeout when the clock's timer wins."""
        done = await self._settled(operation, context.timeout_ns)
        if done is None:
            return call.timed_out(context)
        error = done.exception()
        if error is None:
            return self.classifier.classify(done.result())
        if not isinstance(error, Exception):
            raise error
        return self._classify_error(error)

    async def _settled(self, operation: Awaitable[T], timeout_ns: int) -> asyncio.Future[T] | None:
        """The operation once it is done, or ``None`` when the clock's timer ran out first.

        The operation takes its first step before the timer is made, so an answer that is
        ready at once costs no timer.
        """
        task: asyncio.Future[T] = asyncio.ensure_future(operation)
        timer: asyncio.Task[None] | None = None
        try:
            if not task.done():
                await asyncio.sleep(0)
            if not task.done():
                timer = asyncio.ensure_future(self.clock.asleep(timeout_ns))
                racing: set[asyncio.Future[Any]] = {task, timer}
                await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            return task if task.done() else None
        finally:
            for pending in (task, timer):
                if pending is not None and not pending.done():
                    pending.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pending

    def call_and_follow(
        self,
        fn: Callable[[AttemptContext], R],
        read_status: Callable[[Operation, AttemptContext], object],
    ) -> Envelope:
        """Runs one call like :meth:`call` and follows the operation its answer accepted.

        When the answer accepted an operation (a 202, or what the status reader takes for an
        acceptance), ``read_status(operation, attempt)`` makes one status request and the
        adapter's status reader reads its raw result, until the operation ends. Each read waits
        the retry policy's backoff, never less than the source's ``Retry-After``; a read that
        fails transiently is made again, up to the policy's ``max_attempts`` failed reads in a
        row. The call ends when the operation does, or as an AccessFailure ``deadline`` with the
        last state read when the operation deadline runs out first (see :mod:`candor.follow`).
        The envelope's attempts are the start's, then one for the following, from the acceptance
        to its end. An answer that accepted nothing is returned as :meth:`call` returns it.

        Raises :class:`TypeError` when the adapter has no status reader. A synchronous read
        cannot be interrupted: pass ``attempt.timeout_seconds`` to the client; one that returns
        after its timeout is a timed-out read. An exception that the status reader does not read
        (:meth:`~candor.follow.StatusReader.read_exception`) propagates, and the call records
        nothing more, as in :meth:`call`.
        """
        reader = self._status_reader()
        call = _Call(self, self.policy)
        last = self._run(call, fn)
        following = self._accepted(call, last, reader)
        if following is None:
            return call.finish(last)
        return self._follow(following, read_status)

    async def acall_and_follow(
        self,
        fn: Callable[[AttemptContext], Awaitable[R]],
        read_status: Callable[[Operation, AttemptContext], Awaitable[object]],
    ) -> Envelope:
        """:meth:`call_and_follow` with the attempts and status reads of :meth:`acall`.

        A status read that outlasts its timeout is cancelled.
        """
        reader = self._status_reader()
        call = _Call(self, self.policy)
        last = await self._arun(call, fn)
        following = self._accepted(call, last, reader)
        if following is None:
            return call.finish(last)
        return await self._afollow(following, read_status)

    def resume(
        self, operation: Operation, read_status: Callable[[Operation, AttemptContext], object]
    ) -> Envelope:
        """Follows an operation that an earlier call accepted to its end.

        ``operation`` is the earlier envelope's ``lifecycle.operation``; the following is that of
        :meth:`call_and_follow`. The first status read is made at once and the operation deadline
        counts from now. The envelope has one attempt, the following, and its evidence is the
        operation's id unless the operation completed.
        """
        return self._follow(self._resumed(operation), read_status)

    async def aresume(
        self,
        operation: Operation,
        read_status: Callable[[Operation, AttemptContext], Awaitable[object]],
    ) -> Envelope:
        """:meth:`resume` with the status reads of :meth:`acall_and_follow`."""
        return await self._afollow(self._resumed(operation), read_status)

    def _status_reader(self) -> StatusReader[Any]:
        if self.status_reader is None:
            raise TypeError(
                "following an operation needs a status reader: Adapter(..., "
                "status_reader=StatusUrl()), LongRunning() or FnStatus(mapping)"
            )
        return self.status_reader

    def _accepted(
        self, call: _Call[R], last: Classification, reader: StatusReader[Any]
    ) -> _Following | None:
        """The following of the operation that the call's answer accepted, if it accepted one."""
        operation = reader.accepted(last) if isinstance(last.outcome, Success) else None
        if operation is None:
            return None
        accepted = call.elapsed
        # An acceptance that the classifier did not report as one (an operation resource) is
        # seen as accepted all the same, when the answer came.
        lifecycle = last.lifecycle if last.lifecycle is not None else Lifecycle.accepted(operation)
        call.saw(Transition(call.last_event_ns(), lifecycle, last.evidence))
        backoff = self.policy.backoff_ns(1, self.jitter.next_fraction())
        wait = max(backoff, (last.poll_after_ms or 0) * _NS_PER_MS)
        return _Following(
            call,
            reader,
            operation,
            accepted=accepted,
            wait=wait,
            acceptance=last.evidence,
            seen=lifecycle.state,
        )

    def _resumed(self, operation: Operation) -> _Following:
        """The following of an operation accepted earlier: its first read is due at once."""
        reader = self._status_reader()
        # The acceptance was seen by the call that returned it.
        return _Following(
            _Call(self, self.policy),
            reader,
            operation,
            accepted=0,
            wait=0,
            acceptance=Evidence(EvidenceKind.JOB_ID, operation.id),
            seen=None,
        )

    def _follow(
        self, following: _Following, read_status: Callable[[Operation, AttemptContext], object]
    ) -> Envelope:
        """Reads the status until the following ends, sleeping on the clock between reads."""
        try:
            while following.due():
                if following.wait:
                    self.clock.sleep(following.wait)
                context = following.start_read()
                try:
                    raw = read_status(following.operation, context)
                except Exception as error:  # noqa: BLE001 - handed to the status reader
                    read = following.read_error(error)
                else:
                    if inspect.isawaitable(raw):
                        _close(raw)
                        raise TypeError(
                            "the status read returned an awaitable: use acall_and_follow or aresume"
                        )
                    read = following.read(raw)
                following.take(following.timed_out(context) if following.late(context) else read)
            return following.finish()
        except BaseException:
            # An exception ends the call with no envelope, as in _run.
            following.call.abandon()
            raise

    async def _afollow(
        self,
        following: _Following,
        read_status: Callable[[Operation, AttemptContext], Awaitable[object]],
    ) -> Envelope:
        """:meth:`_follow` with asynchronous sleeps, and reads cut at their timeout."""
        try:
            while following.due():
                if following.wait:
                    await self.clock.asleep(following.wait)
                context = following.start_read()
                try:
                    pending = read_status(following.operation, context)
                except Exception as error:  # noqa: BLE001 - handed to the status reader
                    following.take(following.read_error(error))
                    continue
                done = await self._settled(pending, context.timeout_ns)
                following.take(
                    following.timed_out(context) if done is None else following.settled(done)
                )
            return following.finish()
        except BaseException:
            # An exception or a cancellation ends the call with no envelope, as in _run.
            following.call.abandon()
            raise

    @overload
    def wrap(self, fn: Callable[..., R]) -> Callable[..., Envelope]: ...

    @overload
    def wrap(
        self, fn: Callable[..., Awaitable[R]]
    ) -> Callable[..., Coroutine[Any, Any, Envelope]]: ...

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorates a function that makes one attempt into one that makes a call.

        The function takes the attempt context as the keyword argument ``attempt`` and returns
        the raw result.

        The decorated function takes the other arguments and returns the call's envelope; a
        coroutine function becomes a coroutine function (:meth:`acall`), any other function a
        synchronous one (:meth:`call`).
        """
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def call_async(*args: Any, **kwargs: Any) -> Envelope:
                return await self.acall(lambda attempt: fn(*args, attempt=attempt, **kwargs))

            return call_async

        @functools.wraps(fn)
        def call_sync(*args: Any, **kwargs: Any) -> Envelope:
            return self.call(lambda attempt: fn(*args, attempt=attempt, **kwargs))

        return call_sync

    def attempt(self) -> Observation[R]:
        """Observes one attempt made by the code in a ``with`` (or ``async with``) block.

        The block makes the request itself, with ``observed.context.timeout_seconds`` as its
        timeout, and hands what came back to ``observed.record(raw)``. On leaving the block
        the attempt is classified and recorded, and ``observed.envelope`` holds the envelope.
        There is no retry: a transient AccessFailure ends as ``exhausted``. A result recorded
        after the attempt's time ran out is classified as :meth:`call` classifies a late
        attempt: no answer, or the response recorded on ``observed.context``
        (:meth:`AttemptContext.receiving`) as it stood then. An exception the classifier
        classifies (e.g. a raised :class:`~candor.TransportError`) becomes the attempt's
        outcome and is not raised again; any other exception propagates and nothing is
        recorded.
        """
        return Observation(self)


class Observation(Generic[R]):
    """One attempt observed by :meth:`Adapter.attempt`."""

    def __init__(self, adapter: Adapter[R]) -> None:
        self._adapter = adapter
        self._call: _Call[R] | None = None
        self._context: AttemptContext | None = None
        self._classification: Classification | None = None
        self._envelope: Envelope | None = None

    @property
    def context(self) -> AttemptContext:
        """The attempt's number (always 1), timeout and idempotency key."""
        if self._context is None:
            raise RuntimeError("the observation has not started: use it in a with block")
        return self._context

    @property
    def envelope(self) -> Envelope:
        """The envelope, once the block has been left."""
        if self._envelope is None:
            raise RuntimeError("the envelope is made when the with block is left")
        return self._envelope

    def _settle(self, classification: Classification) -> None:
        call, context = self._call, self.context
        if call is None:  # pragma: no cover - context is set with the call
            raise RuntimeError("the observation has not started")
        if self._classification is not None:
            raise RuntimeError("an observation records one attempt; record was called twice")
        if call.late(context):
            classification = call.timed_out(context)
        classification = call.unsafe_to_repeat(classification)
        call.settle(classification)
        self._classification = classification

    def record(self, raw: R) -> None:
        """Records what the attempt returned; it is classified at once."""
        self._settle(self._adapter.classifier.classify(raw))

    def __enter__(self) -> Observation[R]:
        if self._call is not None:
            raise RuntimeError("an observation can be entered once")
        self._call = _Call(self._adapter, replace(self._adapter.policy, max_attempts=1))
        self._context = self._call.next_context()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        call = self._call
        if call is None:  # pragma: no cover - __enter__ sets it
            return False
        suppress = False
        if self._classification is None:
            if exc is None:
                raise RuntimeError(
                    "the with block recorded no result: call observed.record(...) with what the "
                    "attempt returned"
                )
            classification = self._classify_raised(exc)
            if classification is None:
                return False
            self._settle(classification)
            suppress = True
        assert self._classification is not None  # noqa: S101 - set by _settle
        self._envelope = call.finish(self._classification)
        # An exception that became the outcome is not raised again; one raised after the
        # result was recorded still is.
        return suppress

    def _classify_raised(self, exc: BaseException) -> Classification | None:
        classifier = self._adapter.classifier
        if isinstance(exc, Exception) and isinstance(classifier, ExceptionClassifier):
            return classifier.classify_exception(exc)
        return None

    async def __aenter__(self) -> Observation[R]:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return self.__exit__(exc_type, exc, traceback)
