"""The :class:`Adapter`: a tool's settings, and the public ways to make a call through it.

An adapter checks and holds its settings (the tool, target, classifier, retry policy, times,
method and idempotency, status reader, provenance and telemetry). Its methods make a call
(:meth:`Adapter.call`, :meth:`Adapter.acall`), follow the operation a call accepted
(:meth:`Adapter.call_and_follow`, :meth:`Adapter.resume` and their asynchronous forms), wrap a
function (:meth:`Adapter.wrap`) or observe one attempt (:meth:`Adapter.attempt`); the work is
done by the call (:mod:`candor.adapter._call`), the following (:mod:`candor.adapter._follow`)
and the observation (:mod:`candor.adapter._observe`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, Final, Generic, TypeVar, overload

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from candor.adapter._attempt import AttemptContext
from candor.adapter._call import ADAPTER_VERSION, _Call
from candor.adapter._follow import _accepted, _resumed
from candor.adapter._observe import Observation, _wrapped
from candor.classify import Classifier
from candor.clock import Clock, SystemClock
from candor.envelope import Authority, Envelope, Operation
from candor.follow import StatusReader
from candor.redact import redact_url, url_parts
from candor.retry import Jitter, RandomJitter, RetryPolicy, ns_of
from candor.telemetry import Telemetry

R = TypeVar("R")

_IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
"""The methods that RFC 9110 (section 9.2.2) defines as idempotent."""
_TOKEN_PUNCTUATION: Final = frozenset("!#$%&'*+-.^_`|~")
"""The characters other than letters and digits that an RFC 9110 token (a method) may hold."""


def _method_name(method: str) -> str:
    """The method as RFC 9110 names it (upper case), or :class:`ValueError` when it is none."""
    if not method or not all(
        (c.isascii() and c.isalnum()) or c in _TOKEN_PUNCTUATION for c in method
    ):
        raise ValueError(f"method must be an HTTP method name such as 'POST', got {method!r}")
    return method.upper()


def host_of(target: str) -> str:
    """The host part of a URL-like target, or the whole target when it is not a URL.

    Cut as the redaction cuts it (:func:`~candor.redact.url_parts`).
    """
    parts = url_parts(target)
    return parts.host if parts.scheme else target


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
        return call.finish(call.run(fn))

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
        return call.finish(await call.arun(fn))

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
        last = call.run(fn)
        following = _accepted(call, last, reader)
        if following is None:
            return call.finish(last)
        return following.run(read_status)

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
        last = await call.arun(fn)
        following = _accepted(call, last, reader)
        if following is None:
            return call.finish(last)
        return await following.arun(read_status)

    def resume(
        self, operation: Operation, read_status: Callable[[Operation, AttemptContext], object]
    ) -> Envelope:
        """Follows an operation that an earlier call accepted to its end.

        ``operation`` is the earlier envelope's ``lifecycle.operation``; the following is that of
        :meth:`call_and_follow`. The first status read is made at once and the operation deadline
        counts from now. The envelope has one attempt, the following, and its evidence is the
        operation's id unless the operation completed.
        """
        return _resumed(self, self._status_reader(), operation).run(read_status)

    async def aresume(
        self,
        operation: Operation,
        read_status: Callable[[Operation, AttemptContext], Awaitable[object]],
    ) -> Envelope:
        """:meth:`resume` with the status reads of :meth:`acall_and_follow`."""
        return await _resumed(self, self._status_reader(), operation).arun(read_status)

    def _status_reader(self) -> StatusReader[Any]:
        if self.status_reader is None:
            raise TypeError(
                "following an operation needs a status reader: Adapter(..., "
                "status_reader=StatusUrl()), LongRunning() or FnStatus(mapping)"
            )
        return self.status_reader

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
        return _wrapped(self, fn)

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
