"""Telemetry through the OpenTelemetry API: the ``tool.call`` span and ``tool.outcomes``.

The span carries one ``tool.outcome`` event per AccessFailure attempt and per Partial, and one
``tool.lifecycle`` event per state of an asynchronous operation that the call saw.

Each event is recorded when it happens (rule TELEMETRY-MOMENT): an attempt that failed and will
be retried, when its retry is decided, and each state of an operation, when the call sees it.
The call's first such event starts its span (at the call's start time), the event is added to
it, and it is also emitted at once as an OpenTelemetry log record in the span (the log-based
form of events), which reaches the pipeline while the call still runs. The call's end adds the
terminal event and ends the span. A Success or an Empty with no such event costs one counter
increment and no span, unless every call was asked to be traced; the counter and the export
heartbeat are in :mod:`candor._counts`. Each ``tool.outcome`` event
is also logged on the ``candor.outcome`` logger.

The log records go to the adapter's logger provider, else to the one set with
:func:`set_logger_provider`, else to OpenTelemetry's global logger provider.

:class:`ExportHeartbeat` is for a host that sets up its own SDK: the gauge
``candor.adapter.export_interval``, which tells Candor when the instance's next metric export is
due, and that none follows after the one at shutdown.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Final

from opentelemetry import trace
from opentelemetry._logs import Logger, LoggerProvider, LogRecord, SeverityNumber, get_logger
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from candor import names
from candor._counts import ExportHeartbeat, instruments
from candor._version import __version__
from candor.envelope import (
    AccessFailure,
    Attempt,
    Envelope,
    Evidence,
    Lifecycle,
    Partial,
    Truncation,
)
from candor.names import attr
from candor.vocab import FailureKind, LifecycleState, OutcomeClass, RetryAction

__all__ = [
    "MIRROR_LOGGER",
    "ExportHeartbeat",
    "LiveSpan",
    "Telemetry",
    "Transition",
    "set_logger_provider",
]

MIRROR_LOGGER: Final = "candor.outcome"
"""The logger that mirrors each ``tool.outcome`` event for local logs."""

_log = logging.getLogger(MIRROR_LOGGER)
_RETRYING: Final = "tool attempt failed; retrying after %d ms: %s"
"""The mirror record's message for an attempt that will be retried."""
_ENDED: Final = "tool call ended without a complete answer: %s"
"""The mirror record's message for the event that ends a call."""
_EVENTFUL: Final = frozenset({OutcomeClass.ACCESS_FAILURE, OutcomeClass.PARTIAL})
_NS_PER_MS: Final = 1_000_000

Attributes = dict[str, AttributeValue]
_I64_MAX: Final = 2**63 - 1

_logger_provider: LoggerProvider | None = None
"""The provider set with :func:`set_logger_provider`, if any."""


def set_logger_provider(provider: LoggerProvider | None) -> None:
    """Sets the logger provider that adapters emit the log-based form of their events through.

    It serves every adapter built without ``logger_provider``, those built before this call
    included, from their next event on. :func:`candor.otlp.init` sets it; a host that installs
    its own OpenTelemetry SDK sets its ``LoggerProvider`` here (or installs it as
    OpenTelemetry's global logger provider, which adapters use while none is set here).
    Without a logger provider, the events of a call reach the pipeline only when the call's
    span ends, and are lost with it when the process dies first (rule TELEMETRY-MOMENT).
    ``None`` goes back to OpenTelemetry's global logger provider.
    """
    global _logger_provider
    _logger_provider = provider


class _LogSink:
    """Where one adapter emits the log-based form of its events.

    The adapter's own provider when it was given one; otherwise the provider of
    :func:`set_logger_provider`, read at each event, and OpenTelemetry's global one while none
    is set. The logger of the provider last read is kept.
    """

    __slots__ = ("_fixed", "_logger", "_provider")

    def __init__(self, provider: LoggerProvider | None) -> None:
        self._fixed: Logger | None = (
            None if provider is None else provider.get_logger(names.ADAPTER_NAME, __version__)
        )
        self._provider: LoggerProvider | None = None
        self._logger: Logger | None = None

    def logger(self) -> Logger:
        """The logger to emit through now."""
        if self._fixed is not None:
            return self._fixed
        provider = _logger_provider
        logger = self._logger
        if logger is None or provider is not self._provider:
            # OpenTelemetry's global logger is a proxy: it follows a provider installed later.
            logger = (
                get_logger(names.ADAPTER_NAME, __version__)
                if provider is None
                else provider.get_logger(names.ADAPTER_NAME, __version__)
            )
            self._provider, self._logger = provider, logger
        return logger


@dataclass(frozen=True, slots=True)
class Transition:
    """A state of an asynchronous operation that a call saw, and when."""

    at_ns: int
    """When the call saw it, in nanoseconds since the epoch."""
    lifecycle: Lifecycle
    """The state, with the operation."""
    evidence: Evidence | None = None
    """For an acceptance, the evidence of the answer that accepted it."""


class LiveSpan:
    """A call's ``tool.call`` span, started at the call's first event, and what it started with.

    :meth:`Telemetry.retried` and :meth:`Telemetry.transition` make it and return it; the call
    hands it back to each of them and, at its end, to :meth:`Telemetry.record`.
    """

    __slots__ = ("failure_kind", "span", "state")

    def __init__(
        self, span: Span, failure_kind: FailureKind | None, state: LifecycleState | None
    ) -> None:
        self.span = span
        """The span, not yet ended."""
        self.failure_kind = failure_kind
        """The ``tool.failure.kind`` the span started with."""
        self.state = state
        """The ``tool.lifecycle.state`` the span started with."""


def _i64(value: int) -> int:
    """An integer attribute, held within a signed 64-bit integer as every exporter needs."""
    return min(value, _I64_MAX)


class Telemetry:
    """Where one adapter's spans, log records and counts go.

    The global tracer and meter providers unless told otherwise; the log records to
    ``logger_provider``, else to the provider of :func:`set_logger_provider`, else to
    OpenTelemetry's global one. ``source_system``, ``actor`` and ``adapter_version`` are the
    provenance every event carries, the same for every call of the adapter.
    """

    def __init__(
        self,
        tool: str,
        target: str,
        authority: str | None,
        *,
        source_system: str,
        actor: str | None,
        adapter_version: str,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        trace_every_call: bool = False,
    ) -> None:
        self._tracer: Tracer = (
            trace.get_tracer(names.ADAPTER_NAME, __version__)
            if tracer_provider is None
            else tracer_provider.get_tracer(names.ADAPTER_NAME, __version__)
        )
        self._logs = _LogSink(logger_provider)
        self._instruments = instruments(meter_provider)
        self._counts = self._instruments.counts(tool, target)
        self._tool = tool
        self._target = target
        self._identity: Attributes = {attr.TOOL_NAME: tool, attr.TOOL_TARGET: target}
        if authority is not None:
            self._identity[attr.AUTHORITY] = authority
        self._provenance: Attributes = {attr.PROVENANCE_SOURCE_SYSTEM: source_system}
        if actor is not None:
            self._provenance[attr.PROVENANCE_ACTOR] = actor
        self._provenance[attr.PROVENANCE_ADAPTER] = adapter_version
        # The span's attributes by final class and last failure kind, made on first use and
        # shared by every span of that kind: the API takes attributes as a read-only mapping,
        # and the SDK copies them into the span.
        self._span_attributes: dict[tuple[OutcomeClass, FailureKind | None], Attributes] = {}
        # The first attributes of a ``tool.outcome`` event, which follow from the attempt's
        # class, kind and action: made on first use, and copied into each event.
        self._event_heads: dict[
            tuple[OutcomeClass, FailureKind | None, RetryAction | None], Attributes
        ] = {}
        self.trace_every_call = trace_every_call

    def retried(
        self,
        live: LiveSpan | None,
        started_ns: int,
        attempt: Attempt,
        attempt_started_ns: int,
        max_attempts: int,
    ) -> LiveSpan:
        """Records an attempt that failed and will be retried, when its retry is decided.

        Its event goes on the call's span, started now when ``live`` is ``None`` (the call's
        first event; ``started_ns`` is the call's start), and is emitted as a log record.
        ``attempt_started_ns`` is the attempt's ``started_at`` in nanoseconds since the epoch.
        Returns the call's span, for its next event and its end.
        """
        attributes = self._event_attributes(attempt, max_attempts, None, None)
        if live is None:
            live = self._start_live(started_ns, attempt.failure_kind, None)
        self._emit(
            live.span, names.OUTCOME_EVENT, _event_ns(attempt, attempt_started_ns), attributes
        )
        _mirror(self._tool, self._target, attempt)
        return live

    def transition(
        self, live: LiveSpan | None, started_ns: int, transition: Transition
    ) -> LiveSpan:
        """Records a state of the operation the call accepted or follows, when it is seen.

        As :meth:`retried`: on the call's span, started now if need be, and as a log record
        (rule TELEMETRY-LIFECYCLE).
        """
        attributes = self._lifecycle_attributes(transition)
        if live is None:
            live = self._start_live(started_ns, None, transition.lifecycle.state)
        self._emit(live.span, names.LIFECYCLE_EVENT, transition.at_ns, attributes)
        return live

    def abandon(self, live: LiveSpan, at_ns: int) -> None:
        """Ends the span of a call that ended by an exception, at ``at_ns``, with what it has."""
        live.span.end(end_time=at_ns)

    def _start_live(
        self, started_ns: int, kind: FailureKind | None, state: LifecycleState | None
    ) -> LiveSpan:
        """The call's span, started at the call's start with what a sampler keeps it by."""
        attributes = dict(self._identity)
        if kind is not None:
            attributes[attr.FAILURE_KIND] = kind.value
        if state is not None:
            attributes[attr.LIFECYCLE_STATE] = state.value
        return LiveSpan(self._start_span(started_ns, attributes), kind, state)

    def _start_span(self, started_ns: int, attributes: Attributes) -> Span:
        return self._tracer.start_span(
            names.TOOL_CALL_SPAN,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=started_ns,
        )

    def _emit(self, span: Span, name: str, at_ns: int, attributes: Attributes) -> None:
        """Adds one event to the span, and emits it as a log record in the span.

        No record is emitted when the span has no valid context (no SDK is installed).
        """
        if span.get_span_context().is_valid:
            self._logs.logger().emit(
                LogRecord(
                    timestamp=at_ns,
                    context=trace.set_span_in_context(span),
                    severity_text="WARN",
                    severity_number=SeverityNumber.WARN,
                    attributes=attributes,
                    event_name=name,
                )
            )
        span.add_event(name, attributes, timestamp=at_ns)

    def record(
        self,
        envelope: Envelope,
        max_attempts: int,
        *,
        started_ns: int,
        finished_ns: int,
        last_started_ns: int,
        live: LiveSpan | None = None,
    ) -> None:
        """Records a finished call.

        The counter counts every call. The call's span gets the call's outcome and ends when
        the call had events while it ran (``live``, the span they started), when it ends with
        an AccessFailure or a Partial (whose terminal event the span gets too), when it saw an
        asynchronous operation, or when every call is traced; a call with no ``live`` span has
        its span made now. ``started_ns``, ``finished_ns`` and ``last_started_ns`` are the
        envelope's times (the provenance's and the last attempt's ``started_at``) in
        nanoseconds since the epoch, as the call measured them.
        """
        cls = envelope.outcome_class
        lifecycle = envelope.lifecycle
        if (
            cls is OutcomeClass.SUCCESS
            and lifecycle is not None
            and not lifecycle.state.is_terminal
        ):
            # Work accepted is not work done (rule TELEMETRY-COUNTER).
            self._instruments.add_accepted(self._counts)
        else:
            self._instruments.add(self._counts, cls)
        attempts = envelope.attempts
        last = attempts[-1] if attempts else None
        terminal = last if last is not None and _is_terminal(last) else None
        if live is None and terminal is None and lifecycle is None and not self.trace_every_call:
            return
        self._end_span(
            envelope, max_attempts, started_ns, finished_ns, live, terminal, last_started_ns
        )

    def _end_span(
        self,
        envelope: Envelope,
        max_attempts: int,
        started_ns: int,
        finished_ns: int,
        live: LiveSpan | None,
        terminal: Attempt | None,
        last_started_ns: int,
    ) -> None:
        cls = envelope.outcome_class
        # The kind of the last attempt that failed marks the span as a failure span for
        # samplers, even when a retry later succeeded.
        kind = None
        for attempt in reversed(envelope.attempts):
            if attempt.failure_kind is not None:
                kind = attempt.failure_kind
                break
        lifecycle = envelope.lifecycle
        state = None if lifecycle is None else lifecycle.state
        if live is None:
            attributes = self._span_attributes_of(cls, kind)
            if state is not None:
                # The operation's state marks the span as an operation's for samplers.
                attributes = {**attributes, attr.LIFECYCLE_STATE: state.value}
            span = self._start_span(started_ns, attributes)
        else:
            # The attributes the span started with stay; the call's end adds the rest.
            span = live.span
            span.set_attribute(attr.OUTCOME_CLASS, cls.value)
            if kind is not None and kind is not live.failure_kind:
                span.set_attribute(attr.FAILURE_KIND, kind.value)
            if state is not None and state is not live.state:
                span.set_attribute(attr.LIFECYCLE_STATE, state.value)
        outcome = envelope.outcome
        if terminal is not None:
            _mirror(self._tool, self._target, terminal)
            truncation = outcome.truncation if isinstance(outcome, Partial) else None
            # The terminal event happens at the call's end: on the span, which ends now.
            span.add_event(
                names.OUTCOME_EVENT,
                self._event_attributes(terminal, max_attempts, truncation, envelope.evidence),
                timestamp=_event_ns(terminal, last_started_ns),
            )
        if not span.is_recording():
            self._instruments.unrecorded.add(1, self._counts.attributes[cls])
            _log.warning(
                "the host's sampler dropped a tool failure or operation span of %s; keep "
                "tool.call spans that carry tool.failure.kind or tool.lifecycle.state",
                envelope.tool,
            )
        if isinstance(outcome, AccessFailure):
            span.set_status(Status(StatusCode.ERROR, outcome.failure.message))
        span.end(end_time=finished_ns)

    def _span_attributes_of(self, cls: OutcomeClass, kind: FailureKind | None) -> Attributes:
        """The span's attributes: the identity, the final class, the last failure kind."""
        attributes = self._span_attributes.get((cls, kind))
        if attributes is None:
            attributes = dict(self._identity)
            attributes[attr.OUTCOME_CLASS] = cls.value
            if kind is not None:
                attributes[attr.FAILURE_KIND] = kind.value
            self._span_attributes[cls, kind] = attributes
        return attributes

    def _lifecycle_attributes(self, transition: Transition) -> Attributes:
        """The attributes of a ``tool.lifecycle`` event (rule TELEMETRY-LIFECYCLE)."""
        lifecycle = transition.lifecycle
        attributes: Attributes = dict(self._identity)
        attributes[attr.OPERATION_ID] = lifecycle.operation.id
        attributes[attr.LIFECYCLE_STATE] = lifecycle.state.value
        if lifecycle.reason is not None:
            attributes[attr.LIFECYCLE_REASON] = lifecycle.reason
        if lifecycle.state is LifecycleState.PARTIAL and lifecycle.covered is not None:
            attributes[attr.COVERAGE] = lifecycle.covered
        evidence = (
            lifecycle.verified_by
            if lifecycle.state is LifecycleState.COMPLETED
            else transition.evidence
            if lifecycle.state is LifecycleState.ACCEPTED
            else None
        )
        if evidence is not None:
            attributes[attr.EVIDENCE_KIND] = evidence.kind.value
            attributes[attr.EVIDENCE_VALUE] = evidence.value
        resource = lifecycle.resource
        if resource is not None:
            attributes[attr.RESOURCE_ID] = resource.id
            if resource.version is not None:
                attributes[attr.RESOURCE_VERSION] = resource.version
        attributes.update(self._provenance)
        return attributes

    def _event_head(
        self, cls: OutcomeClass, kind: FailureKind | None, action: RetryAction | None
    ) -> Attributes:
        """The first attributes of a ``tool.outcome`` event: the identity, class, kind, action."""
        # A member of a vocabulary is a str of its wire spelling: str() is that spelling, as
        # a plain str, and is cheaper than the enum's ``value`` property.
        head = dict(self._identity)
        head[attr.OUTCOME_CLASS] = str(cls)
        if kind is not None:
            head[attr.FAILURE_KIND] = str(kind)
        if action is not None:
            head[attr.RETRY_ACTION] = str(action)
        self._event_heads[cls, kind, action] = head
        return head

    def _event_attributes(
        self,
        attempt: Attempt,
        max_attempts: int,
        truncation: Truncation | None,
        evidence: Evidence | None,
    ) -> Attributes:
        """The attributes of a ``tool.outcome`` event (rule TELEMETRY-EVENT).

        ``truncation`` is the call's on its Partial event, ``evidence`` the envelope's on the
        event that ends the call.
        """
        cls, kind, action = attempt.outcome_class, attempt.failure_kind, attempt.retry_action
        head = self._event_heads.get((cls, kind, action))
        if head is None:
            head = self._event_head(cls, kind, action)
        attributes = head.copy()
        attributes[attr.RETRY_ATTEMPT] = attempt.number
        attributes[attr.RETRY_MAX_ATTEMPTS] = max_attempts
        if action is RetryAction.RETRY:
            attributes[attr.RETRY_BACKOFF_MS] = _i64(attempt.backoff_ms or 0)
        if attempt.status is not None:
            attributes[attr.HTTP_STATUS_CODE] = attempt.status
        if attempt.error_type is not None:
            attributes[attr.ERROR_TYPE] = attempt.error_type
        if truncation is not None and cls is OutcomeClass.PARTIAL:
            if truncation.returned is not None:
                attributes[attr.PARTIAL_RETURNED] = _i64(truncation.returned)
            if truncation.expected is not None:
                attributes[attr.PARTIAL_EXPECTED] = _i64(truncation.expected)
            attributes[attr.COVERAGE] = truncation.covered
            attributes[attr.DROPPED] = truncation.dropped
        if evidence is not None:
            # str() of a vocabulary member: its wire spelling (see _event_head).
            attributes[attr.EVIDENCE_KIND] = str(evidence.kind)
            attributes[attr.EVIDENCE_VALUE] = evidence.value
        attributes.update(self._provenance)
        return attributes


def _event_ns(attempt: Attempt, started_ns: int) -> int:
    """An attempt's event time: its start plus its whole milliseconds (rule TELEMETRY-EVENT)."""
    return started_ns + attempt.duration_ms * _NS_PER_MS


def _is_terminal(last: Attempt) -> bool:
    """Whether the call's last attempt ends it with an event (rule TELEMETRY-TERMINAL-EVENT).

    That is an AccessFailure or a Partial with an action that ends the call (``exhausted``,
    ``permanent`` or ``accept_partial``, not ``retry``).
    """
    action = last.retry_action
    return (
        action is not None and action is not RetryAction.RETRY and last.outcome_class in _EVENTFUL
    )


def _mirror(tool: str, target: str, attempt: Attempt) -> None:
    """Logs one ``tool.outcome`` event for local logs."""
    retrying = attempt.retry_action is RetryAction.RETRY
    level = logging.INFO if retrying else logging.WARNING
    if not _log.isEnabledFor(level):
        return
    # str() of a vocabulary member: its wire spelling (see Telemetry._event_head).
    fields = {
        "tool": tool,
        "tool_target": target,
        "class": str(attempt.outcome_class),
        "kind": "" if attempt.failure_kind is None else str(attempt.failure_kind),
        "action": "" if attempt.retry_action is None else str(attempt.retry_action),
        "attempt": attempt.number,
        "status": attempt.status or 0,
    }
    extra = {"candor": fields}
    if type(_log) is not logging.Logger:
        # A logger class of the application's own may log in its own way: ask it.
        if retrying:
            _log.info(_RETRYING, attempt.backoff_ms or 0, fields, extra=extra)
        else:
            _log.warning(_ENDED, fields, extra=extra)
        return
    # What Logger.info and Logger.warning do once the level is enabled, less the search of
    # the stack for the caller, which is this function: the record is the same.
    args = (attempt.backoff_ms or 0, fields) if retrying else (fields,)
    if logging._srcfile is None:  # the application turned the caller's lookup off
        path, line, function = "(unknown file)", 0, "(unknown function)"
    else:
        frame = sys._getframe()
        path, line, function = frame.f_code.co_filename, frame.f_lineno, "_mirror"
        # A frame object held by a variable of its own frame is a reference cycle: it would
        # keep this call's frames, and every object they hold, alive until the garbage
        # collector runs.
        del frame
    _log.handle(
        _log.makeRecord(
            _log.name,
            level,
            path,
            line,
            _RETRYING if retrying else _ENDED,
            args,
            None,
            function,
            extra,
        )
    )
