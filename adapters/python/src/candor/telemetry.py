"""Telemetry through the OpenTelemetry API: the ``tool.call`` span and ``tool.outcomes``.

The span carries one ``tool.outcome`` event per AccessFailure attempt and per Partial, and one
``tool.lifecycle`` event per state of an asynchronous operation that the call saw.

Everything is derived from the finished envelope (but for the states a followed operation went
through, which the call hands over as :class:`Transition` values), after the call, with the
real timestamps: a Success or an Empty costs one counter increment and no span, unless every
call was asked to be traced. ``tool.outcomes`` is an observable counter over per-class totals:
each meter provider gets one instrument, whose callback reports four totals per tool and target,
zeros included. Each event is also logged on the ``candor.outcome`` logger.

:class:`ExportHeartbeat` is for a host that sets up its own SDK: the gauge
``candor.adapter.export_interval``, which tells Candor when the instance's next metric export is
due, and that none follows after the one at shutdown.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Counter, Meter, MeterProvider, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from candor import names
from candor._version import __version__
from candor.envelope import AccessFailure, Attempt, Envelope, Evidence, Lifecycle, Partial
from candor.names import attr
from candor.vocab import FailureKind, LifecycleState, OutcomeClass, RetryAction

__all__ = ["MIRROR_LOGGER", "ExportHeartbeat", "Telemetry", "Transition"]

MIRROR_LOGGER: Final = "candor.outcome"
"""The logger that mirrors each ``tool.outcome`` event for local logs."""

_log = logging.getLogger(MIRROR_LOGGER)
_EVENTFUL: Final = frozenset({OutcomeClass.ACCESS_FAILURE, OutcomeClass.PARTIAL})
_CLASSES: Final = tuple(OutcomeClass)

Attributes = dict[str, AttributeValue]
_I64_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Transition:
    """A state of an asynchronous operation that a call saw, and when."""

    at_ns: int
    """When the call saw it, in nanoseconds since the epoch."""
    lifecycle: Lifecycle
    """The state, with the operation."""
    evidence: Evidence | None = None
    """For an acceptance, the evidence of the answer that accepted it."""


def _i64(value: int) -> int:
    """An integer attribute, held within a signed 64-bit integer as every exporter needs."""
    return min(value, _I64_MAX)


class _Counts:
    """Calls of one tool and target by final class and its acceptances, with their attributes."""

    __slots__ = ("accepted", "accepted_attributes", "attributes", "totals")

    def __init__(self, tool: str, target: str) -> None:
        self.totals = dict.fromkeys(_CLASSES, 0)
        self.attributes: dict[OutcomeClass, Attributes] = {
            cls: {attr.TOOL_NAME: tool, attr.TOOL_TARGET: target, attr.OUTCOME_CLASS: cls.value}
            for cls in _CLASSES
        }
        self.accepted = 0
        self.accepted_attributes: Attributes = {
            attr.TOOL_NAME: tool,
            attr.TOOL_TARGET: target,
            attr.LIFECYCLE_STATE: LifecycleState.ACCEPTED.value,
        }


class _Instruments:
    """The instruments of one meter provider, shared by every adapter that reports to it.

    The totals are kept per tool and target, for as long as the provider: adapters of the same
    tool and target add to one series, and a call counted by an adapter that is gone is still
    reported.
    """

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], _Counts] = {}
        self.unrecorded: Counter = meter.create_counter(
            names.UNRECORDED_SPANS_COUNTER,
            unit="{span}",
            description="Failure spans the host's sampler dropped",
        )
        meter.create_observable_counter(
            names.OUTCOMES_COUNTER,
            callbacks=[self._observe],
            unit=names.OUTCOMES_COUNTER_UNIT,
            description="Tool calls by final outcome class",
        )

    def counts(self, tool: str, target: str) -> _Counts:
        """The totals of ``tool`` at ``target``, reported from now on (zeros included)."""
        with self._lock:
            return self._counts.setdefault((tool, target), _Counts(tool, target))

    def add(self, counts: _Counts, cls: OutcomeClass) -> None:
        """Counts one call."""
        with self._lock:
            counts.totals[cls] += 1

    def add_accepted(self, counts: _Counts) -> None:
        """Counts one call whose answer accepted an operation: never as a success."""
        with self._lock:
            counts.accepted += 1

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            observations = [
                Observation(counts.totals[cls], counts.attributes[cls])
                for counts in self._counts.values()
                for cls in _CLASSES
            ]
            # Acceptances from the first one on.
            observations.extend(
                Observation(counts.accepted, counts.accepted_attributes)
                for counts in self._counts.values()
                if counts.accepted
            )
            return observations


_GLOBAL: Final = object()
_registry_lock = threading.Lock()
_registry: weakref.WeakKeyDictionary[object, _Instruments] = weakref.WeakKeyDictionary()
_global_instruments: list[_Instruments] = []


def _instruments(provider: MeterProvider | None) -> _Instruments:
    """The instruments of ``provider`` (``None``: the global one), made on first use."""
    with _registry_lock:
        if provider is None or provider is metrics.get_meter_provider():
            if not _global_instruments:
                _global_instruments.append(
                    _Instruments(metrics.get_meter(names.ADAPTER_NAME, __version__))
                )
            return _global_instruments[0]
        instruments = _registry.get(provider)
        if instruments is None:
            instruments = _Instruments(provider.get_meter(names.ADAPTER_NAME, __version__))
            _registry[provider] = instruments
        return instruments


class ExportHeartbeat:
    """The gauge ``candor.adapter.export_interval`` of one meter provider (contract, 10.6).

    A host that sets up its own OpenTelemetry SDK makes one per meter provider, right after
    building it, with the interval of its periodic metric reader in seconds (the reader's
    ``export_interval_millis / 1000``). Every metric export then carries the gauge, without
    attributes, beside ``tool.outcomes``: the seconds until the next export, and 0 once
    :meth:`final` was called, so that the export at shutdown says that none follows. Without it,
    Candor cannot tell an instance that shut down from one that went silent, and answers about
    its targets turn partial after its last export.

    The gauge is registered on the meter of ``meter_provider`` (the global provider when
    ``None``) under this adapter's instrumentation scope, and lives as long as the provider. The
    SDK keeps the first instrument of a name: a second heartbeat on the same provider reports
    nothing, and its :meth:`final` changes nothing.

    Raises :class:`ValueError` unless ``interval_s`` is a finite number of seconds above 0.
    """

    def __init__(self, interval_s: float, *, meter_provider: MeterProvider | None = None) -> None:
        if (
            isinstance(interval_s, bool)
            or not isinstance(interval_s, int | float)
            or not (math.isfinite(interval_s) and interval_s > 0)
        ):
            raise ValueError(
                "the export interval must be a finite number of seconds above 0, "
                f"not {interval_s!r}"
            )
        self._interval_s = float(interval_s)
        # Set once by final(), on the thread that shuts down, and read by the callback on the
        # reader's thread: an Event is safe to share between them without relying on the GIL.
        self._final = threading.Event()
        meter = (
            metrics.get_meter(names.ADAPTER_NAME, __version__)
            if meter_provider is None
            else meter_provider.get_meter(names.ADAPTER_NAME, __version__)
        )
        meter.create_observable_gauge(
            names.EXPORT_INTERVAL_GAUGE,
            callbacks=[self._observe],
            unit=names.EXPORT_INTERVAL_GAUGE_UNIT,
            description="Seconds until this instance's next metric export; 0 in its last",
        )

    @property
    def interval_s(self) -> float:
        """The seconds between two metric exports, as reported until :meth:`final`."""
        return self._interval_s

    def final(self) -> None:
        """From now on the gauge reports 0: no export follows the next one.

        Call right before ``meter_provider.shutdown()``: the SDK's shutdown collects once more,
        and that export then says no export follows. Calling it again changes nothing; calling
        it without shutting down makes every later export say the instance stopped.
        """
        self._final.set()

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(0.0 if self._final.is_set() else self._interval_s)]


class Telemetry:
    """Where one adapter's spans and counts go; the global providers unless told otherwise."""

    def __init__(
        self,
        tool: str,
        target: str,
        authority: str | None,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        trace_every_call: bool = False,
    ) -> None:
        self._tracer: Tracer = (
            trace.get_tracer(names.ADAPTER_NAME, __version__)
            if tracer_provider is None
            else tracer_provider.get_tracer(names.ADAPTER_NAME, __version__)
        )
        self._instruments = _instruments(meter_provider)
        self._counts = self._instruments.counts(tool, target)
        self._identity: Attributes = {attr.TOOL_NAME: tool, attr.TOOL_TARGET: target}
        if authority is not None:
            self._identity[attr.AUTHORITY] = authority
        # The span's attributes by final class and last failure kind, made on first use and
        # shared by every span of that kind: the API takes attributes as a read-only mapping,
        # and the SDK copies them into the span.
        self._span_attributes: dict[tuple[OutcomeClass, FailureKind | None], Attributes] = {}
        self.trace_every_call = trace_every_call

    def record(
        self,
        envelope: Envelope,
        max_attempts: int,
        *,
        started_ns: int,
        finished_ns: int,
        attempts_started_ns: Sequence[int],
        transitions: Sequence[Transition] | None = None,
    ) -> None:
        """Records a finished call.

        The counter counts every call; the span and its events are recorded when something
        went wrong, when the call saw an asynchronous operation, or when every call is traced.
        ``started_ns``, ``finished_ns`` and ``attempts_started_ns`` are the envelope's times
        (the provenance's and each attempt's ``started_at``) in nanoseconds since the epoch, as
        the call measured them. ``transitions`` are the states of an operation the call saw, in
        order; by default the envelope's lifecycle, seen when the call ended.
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
        # One pass over the attempts: those that carry an event, and the kind of the last one
        # that failed, which marks the span as a failure span for samplers even when a retry
        # later succeeded.
        eventful: list[tuple[Attempt, int]] = []
        kind: FailureKind | None = None
        for attempt, started in zip(envelope.attempts, attempts_started_ns, strict=True):
            if attempt.failure_kind is not None:
                kind = attempt.failure_kind
            if attempt.outcome_class in _EVENTFUL:
                eventful.append((attempt, started))
        if eventful or self.trace_every_call or lifecycle is not None:
            if transitions is None:
                transitions = (
                    ()
                    if lifecycle is None
                    else (Transition(finished_ns, lifecycle, envelope.evidence),)
                )
            self._emit_span(
                envelope, max_attempts, cls, kind, started_ns, finished_ns, eventful, transitions
            )

    def _emit_span(
        self,
        envelope: Envelope,
        max_attempts: int,
        cls: OutcomeClass,
        kind: FailureKind | None,
        started_ns: int,
        finished_ns: int,
        eventful: list[tuple[Attempt, int]],
        transitions: Sequence[Transition],
    ) -> None:
        lifecycle = envelope.lifecycle
        attributes = self._span_attributes_of(cls, kind)
        if lifecycle is not None:
            # The operation's state marks the span as an operation's for samplers.
            attributes = {**attributes, attr.LIFECYCLE_STATE: lifecycle.state.value}
        span = self._tracer.start_span(
            names.TOOL_CALL_SPAN,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=started_ns,
        )
        for name, event_attributes, at_ns in self._events(
            envelope, max_attempts, eventful, transitions
        ):
            span.add_event(name, event_attributes, timestamp=at_ns)
        if not span.is_recording():
            self._instruments.unrecorded.add(1, self._counts.attributes[cls])
            _log.warning(
                "the host's sampler dropped a tool failure or operation span of %s; keep "
                "tool.call spans that carry tool.failure.kind or tool.lifecycle.state",
                envelope.tool,
            )
        if isinstance(envelope.outcome, AccessFailure):
            span.set_status(Status(StatusCode.ERROR, envelope.outcome.failure.message))
        span.end(end_time=finished_ns)

    def _events(
        self,
        envelope: Envelope,
        max_attempts: int,
        eventful: list[tuple[Attempt, int]],
        transitions: Sequence[Transition],
    ) -> list[tuple[str, Attributes, int]]:
        """The span's events in time order: each name, attributes and time.

        The operation's states (rule TELEMETRY-LIFECYCLE) come before an outcome event of the
        same moment, so that the call's terminal event stays its last.
        """
        events = [
            (
                names.LIFECYCLE_EVENT,
                self._lifecycle_attributes(envelope, transition),
                transition.at_ns,
            )
            for transition in transitions
        ]
        for attempt, attempt_started_ns in eventful:
            _mirror(envelope, attempt)
            events.append(
                (
                    names.OUTCOME_EVENT,
                    self._event_attributes(envelope, attempt, max_attempts),
                    attempt_started_ns + attempt.duration_ms * 1_000_000,
                )
            )
        if transitions:
            # Stable: the states, listed first, stay first among events of the same moment.
            events.sort(key=lambda event: event[2])
        return events

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

    def _lifecycle_attributes(self, envelope: Envelope, transition: Transition) -> Attributes:
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
        provenance = envelope.provenance
        attributes[attr.PROVENANCE_SOURCE_SYSTEM] = provenance.source_system
        if provenance.actor is not None:
            attributes[attr.PROVENANCE_ACTOR] = provenance.actor
        attributes[attr.PROVENANCE_ADAPTER] = provenance.adapter
        return attributes

    def _event_attributes(
        self, envelope: Envelope, attempt: Attempt, max_attempts: int
    ) -> Attributes:
        # A member of a vocabulary is a str of its wire spelling: str() is that spelling, as
        # a plain str, and is cheaper than the enum's ``value`` property.
        attributes = dict(self._identity)
        attributes[attr.OUTCOME_CLASS] = str(attempt.outcome_class)
        if attempt.failure_kind is not None:
            attributes[attr.FAILURE_KIND] = str(attempt.failure_kind)
        if attempt.retry_action is not None:
            attributes[attr.RETRY_ACTION] = str(attempt.retry_action)
        attributes[attr.RETRY_ATTEMPT] = attempt.number
        attributes[attr.RETRY_MAX_ATTEMPTS] = max_attempts
        if attempt.retry_action is RetryAction.RETRY:
            attributes[attr.RETRY_BACKOFF_MS] = _i64(attempt.backoff_ms or 0)
        if attempt.status is not None:
            attributes[attr.HTTP_STATUS_CODE] = attempt.status
        if attempt.error_type is not None:
            attributes[attr.ERROR_TYPE] = attempt.error_type
        outcome = envelope.outcome
        if attempt.outcome_class is OutcomeClass.PARTIAL and isinstance(outcome, Partial):
            truncation = outcome.truncation
            if truncation.returned is not None:
                attributes[attr.PARTIAL_RETURNED] = _i64(truncation.returned)
            if truncation.expected is not None:
                attributes[attr.PARTIAL_EXPECTED] = _i64(truncation.expected)
            attributes[attr.COVERAGE] = truncation.covered
            attributes[attr.DROPPED] = truncation.dropped
        evidence = envelope.evidence
        if evidence is not None and _is_terminal(envelope, attempt):
            attributes[attr.EVIDENCE_KIND] = str(evidence.kind)
            attributes[attr.EVIDENCE_VALUE] = evidence.value
        return attributes


def _is_terminal(envelope: Envelope, attempt: Attempt) -> bool:
    """Whether ``attempt``'s event is the call's terminal event.

    That is the envelope's last attempt, with an action that ends the call (``exhausted``,
    ``permanent`` or ``accept_partial``, not ``retry``).
    """
    return (
        attempt.retry_action is not None
        and attempt.retry_action is not RetryAction.RETRY
        and bool(envelope.attempts)
        and envelope.attempts[-1].number == attempt.number
    )


def _mirror(envelope: Envelope, attempt: Attempt) -> None:
    """Logs one ``tool.outcome`` event for local logs."""
    retrying = attempt.retry_action is RetryAction.RETRY
    if not _log.isEnabledFor(logging.INFO if retrying else logging.WARNING):
        return
    # str() of a vocabulary member: its wire spelling (see _event_attributes).
    fields = {
        "tool": envelope.tool,
        "tool_target": envelope.target,
        "class": str(attempt.outcome_class),
        "kind": "" if attempt.failure_kind is None else str(attempt.failure_kind),
        "action": "" if attempt.retry_action is None else str(attempt.retry_action),
        "attempt": attempt.number,
        "status": attempt.status or 0,
    }
    if retrying:
        _log.info(
            "tool attempt failed; retrying after %d ms: %s",
            attempt.backoff_ms or 0,
            fields,
            extra={"candor": fields},
        )
    else:
        _log.warning(
            "tool call ended without a complete answer: %s", fields, extra={"candor": fields}
        )
