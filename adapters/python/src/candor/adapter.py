"""The adapter: a configured tool that runs calls through classification, retry and telemetry.

Build one :class:`Adapter` per tool and share it. A call is made in one of four ways:

- ``await adapter.acall(fn)``: ``fn(attempt)`` returns an awaitable of the raw result; the
  attempt timeout is enforced (the attempt is cancelled when it runs out) and backoffs are
  asynchronous sleeps;
- ``adapter.call(fn)``: the same, synchronous. A synchronous attempt cannot be interrupted:
  pass ``attempt.timeout_seconds`` to the client. An attempt that returns after its timeout is
  classified as the timeout it was (the late result is dropped), as the asynchronous path would
  have classified it; backoffs are real sleeps that block the thread;
- ``@adapter.wrap`` on a function that takes the attempt context as the keyword ``attempt``:
  calling the decorated function makes a call and returns the envelope;
- ``with adapter.attempt() as observed: …; observed.record(raw)``: for code that makes the
  request itself. One attempt is observed, classified and recorded, and never retried: a
  transient AccessFailure ends as ``exhausted`` (its next actions are retry and escalate), so
  the caller decides whether to open another attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Final, Generic, TypeVar, overload

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from candor._version import __version__
from candor.classify import Classification, Classifier, ExceptionClassifier
from candor.clock import Clock, SystemClock
from candor.envelope import AccessFailure, Attempt, Authority, Envelope, Failure, Provenance
from candor.names import ADAPTER_NAME
from candor.redact import redact_url
from candor.retry import (
    Decision,
    GiveUp,
    Jitter,
    RandomJitter,
    Retry,
    RetryPolicy,
    ns_of,
    timedelta_of,
)
from candor.telemetry import Telemetry
from candor.timestamps import datetime_from_ns
from candor.vocab import AccessFailureKind, RetryAction

__all__ = ["ADAPTER_VERSION", "Adapter", "AttemptContext", "Observation"]

ADAPTER_VERSION: Final = f"{ADAPTER_NAME}/{__version__}"
"""The adapter and its version, as recorded in every envelope's provenance."""

R = TypeVar("R")
_NS_PER_MS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class AttemptContext:
    """What an attempt is told about itself."""

    number: int
    """1-based."""
    timeout_ns: int
    """How long this attempt may take, in nanoseconds: the attempt timeout, or less when the
    call's deadline is nearer."""

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


def _debug_duration(ns: int) -> str:
    """A duration as Rust's ``{:?}`` writes it: ``10s``, ``1.5s``, ``250ms``."""

    def decimal(whole: int, fraction: int, digits: int) -> str:
        tail = str(fraction).rjust(digits, "0").rstrip("0")
        return f"{whole}.{tail}" if tail else str(whole)

    seconds, nanos = divmod(ns, 1_000_000_000)
    if seconds:
        return decimal(seconds, nanos, 9) + "s"
    if nanos >= 1_000_000:
        return decimal(nanos // 1_000_000, nanos % 1_000_000, 6) + "ms"
    if nanos >= 1_000:
        return decimal(nanos // 1_000, nanos % 1_000, 3) + "µs"
    return f"{nanos}ns"


def _timed_out(after_ns: int, cut_by_deadline: bool) -> Classification:
    """An attempt that produced no answer in time.

    It is labelled from the adapter's own knowledge that a request went out and nothing came
    back.
    """
    if cut_by_deadline:
        kind = AccessFailureKind.DEADLINE
        message = (
            f"the call's deadline ran out {_debug_duration(after_ns)} into the attempt, "
            "with no answer"
        )
        error_type = "deadline"
    else:
        kind = AccessFailureKind.TIMEOUT
        message = f"no answer within the attempt timeout of {_debug_duration(after_ns)}"
        error_type = "timeout"
    return Classification(
        AccessFailure(Failure(kind, retryable=True, message=message, error_type=error_type))
    )


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
        self.attempts_started_ns: list[int] = []
        self.number = 0
        self.offset = 0
        self.elapsed = 0

    def next_context(self) -> AttemptContext:
        self.number += 1
        deadline_left = max(self.adapter.deadline_ns - self.offset, 0)
        return AttemptContext(self.number, min(self.adapter.attempt_timeout_ns, deadline_left))

    def timed_out(self, context: AttemptContext) -> Classification:
        return _timed_out(context.timeout_ns, context.timeout_ns < self.adapter.attempt_timeout_ns)

    def late(self, context: AttemptContext) -> bool:
        """Whether the attempt outlasted its timeout (a synchronous attempt cannot be cut)."""
        return self.clock.monotonic_ns() - self.started - self.offset > context.timeout_ns

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
        self.attempts_started_ns.append(started_ns)
        # Positional arguments, in the order of the fields, cost less than keywords; the
        # field each one fills is named beside it.
        self.attempts.append(
            Attempt(
                self.number,  # number
                started_at,  # started_at
                _millis(elapsed - self.offset),  # duration_ms
                outcome.CLASS,  # outcome_class
                outcome.failure_kind,  # failure_kind
                None if failure is None else failure.status,  # status
                decision.action(outcome),  # retry_action
                _millis(decision.after_ns) if isinstance(decision, Retry) else None,  # backoff_ms
                None if failure is None else failure.error_type,  # error_type
            )
        )
        self.elapsed = elapsed
        return decision

    def slept(self) -> None:
        self.offset = self.clock.monotonic_ns() - self.started

    def finish(self, last: Classification) -> Envelope:
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
            attempts_started_ns=self.attempts_started_ns,
        )
        return envelope


class Adapter(Generic[R]):
    """A tool wrapped by Candor: every call returns an :class:`~candor.Envelope`.

    The envelope is of exactly one of four classes, made after the retry policy has run, with
    telemetry recorded.

    ``R`` is the raw result one attempt produces, which ``classifier`` classifies (an
    :data:`~candor.classify.http.HttpExchange` for :class:`~candor.HttpClassifier`).

    Credentials in ``target`` (user-info, token or signature parameters) are redacted before it
    is stored anywhere. ``source_system`` defaults to the target's host. Telemetry goes to the
    global OpenTelemetry providers unless ``tracer_provider`` and ``meter_provider`` are given;
    a ``tool.call`` span is recorded for a call with an AccessFailure or Partial attempt, or for
    every call with ``trace_every_call``. ``jitter`` and ``clock`` are for tests.
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
        source_system: str | None = None,
        actor: str | None = None,
        authority: Authority | None = None,
        trace_every_call: bool = False,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        jitter: Jitter | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not tool.strip():
            raise ValueError(f"tool name must not be empty or white space, got {tool!r}")
        if not target.strip():
            raise ValueError(f"target must not be empty or white space, got {target!r}")
        for setting, value in (("attempt_timeout", attempt_timeout), ("deadline", deadline)):
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
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            trace_every_call=trace_every_call,
        )
        """Where spans and counts go."""

    def __repr__(self) -> str:
        return f"Adapter(tool={self.tool!r}, target={self.target!r})"

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
        when the call's deadline cut it); its result is dropped. An exception that the
        classifier does not classify propagates, and the call records nothing.
        """
        call = _Call(self, self.policy)
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
            decision = call.settle(classification)
            if not isinstance(decision, Retry):
                return call.finish(classification)
            self.clock.sleep(decision.after_ns)
            call.slept()

    async def acall(self, fn: Callable[[AttemptContext], Awaitable[R]]) -> Envelope:
        """Runs one call and returns its envelope.

        ``fn`` is attempted under the retry policy, each result is classified, and the envelope
        is that of the final attempt.

        An attempt that outlasts the attempt timeout is cancelled and is an AccessFailure
        ``timeout``; one cut short by the call's deadline is an AccessFailure ``deadline``. A
        budget that runs out returns the last AccessFailure with its action ``exhausted``,
        never an Empty. An exception that the classifier does not classify propagates.
        """
        call = _Call(self, self.policy)
        while True:
            context = call.next_context()
            try:
                operation = fn(context)
            except Exception as error:  # noqa: BLE001 - handed to the classifier
                classification = self._classify_error(error)
            else:
                classification = await self._race(operation, context, call)
            decision = call.settle(classification)
            if not isinstance(decision, Retry):
                return call.finish(classification)
            await self.clock.asleep(decision.after_ns)
            call.slept()

    async def _race(
        self, operation: Awaitable[R], context: AttemptContext, call: _Call[R]
    ) -> Classification:
        """The operation's result classified, or a timeout when the clock's timer wins.

        The operation takes its first step before the timer is made, so an answer that is
        ready at once costs no timer.
        """
        task: asyncio.Future[R] = asyncio.ensure_future(operation)
        timer: asyncio.Task[None] | None = None
        try:
            if not task.done():
                await asyncio.sleep(0)
            if not task.done():
                timer = asyncio.ensure_future(self.clock.asleep(context.timeout_ns))
                racing: set[asyncio.Future[Any]] = {task, timer}
                await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                return call.timed_out(context)
            error = task.exception()
            if error is None:
                return self.classifier.classify(task.result())
            if not isinstance(error, Exception):
                raise error
            return self._classify_error(error)
        finally:
            for pending in (task, timer):
                if pending is not None and not pending.done():
                    pending.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pending

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
        There is no retry: a transient AccessFailure ends as ``exhausted``. An exception the
        classifier classifies (e.g. a raised :class:`~candor.TransportError`) becomes the
        attempt's outcome and is not raised again; any other exception propagates and nothing
        is recorded.
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
        """The attempt's number (always 1) and timeout."""
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
