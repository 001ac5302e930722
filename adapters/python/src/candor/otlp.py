"""One call that sets up OTLP/gRPC tracer and meter providers for an application.

This module needs the OpenTelemetry SDK and the OTLP/gRPC exporter, which the extra
``candor-adapter[otlp]`` installs; ``import candor`` does not import it, and the exporter is only
imported by :func:`providers`.

    from candor import Adapter
    from candor.otlp import OtlpConfig, providers

    telemetry = providers(OtlpConfig("http://127.0.0.1:4317", "orders-api"))
    search = Adapter(..., tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider)
    ...
    stats = telemetry.shutdown()  # sends what is queued; counts what it could not

Every metric export also carries the export heartbeat, ``candor.adapter.export_interval``: the
reader's interval, and 0 in the last export at :meth:`OtlpGuard.shutdown`, so that readers tell
an instance that shut down from one that went silent.

Spans go through a batch processor and counters through a periodic reader, both off the call
path, and their exporters only queue what they are given: when the collector is down a call never
blocks on telemetry. One sender thread sends the queued batches in the order they came; a batch
the collector cannot take yet (it is restarting, or its broker is away) stays at the head of the
queue and is sent again after a backoff, within a bounded age and size (:class:`ResendConfig`).
Every batch ends counted in :class:`ExportStats`: sent, dropped or rejected, and what is dropped
is logged on the ``candor.otlp`` logger.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Any, Final, Self

from opentelemetry import metrics, trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, set_value
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    MeterProvider,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler

from candor.retry import Jitter, RandomJitter
from candor.sampling import KeepToolFailures
from candor.telemetry import ExportHeartbeat

__all__ = [
    "ExportStats",
    "OtlpConfig",
    "OtlpGuard",
    "ResendConfig",
    "Resender",
    "ResendingMetricExporter",
    "ResendingSpanExporter",
    "init",
    "providers",
]

_log = logging.getLogger(__name__)

_SHUTDOWN_TIMEOUT: Final = timedelta(seconds=5)

# The size of a batch is estimated, not encoded: the inner exporter encodes it when it sends it,
# and encoding every batch a second time only to weigh it would double the exporters' work. The
# estimate counts the strings and values a batch carries and a fixed size for the rest of each
# span, event, link and data point (ids, times, kinds and the protobuf framing around them).
_SPAN_BYTES: Final = 96
_EVENT_BYTES: Final = 24
_LINK_BYTES: Final = 40
_POINT_BYTES: Final = 40
_ATTRIBUTE_BYTES: Final = 6
_SCALAR_BYTES: Final = 8


@dataclass(frozen=True, slots=True)
class ResendConfig:
    """How batches the collector could not take are kept and sent again."""

    enabled: bool = True
    """Whether a refused batch is sent again. Off, a batch refused once is lost and counted, as
    a plain OTLP exporter does."""
    max_age: timedelta = timedelta(minutes=10)
    """The oldest a batch may grow before it is given up."""
    max_batches: int = 4096
    """The most batches kept (ten minutes of a service exporting a span batch every 500 ms and
    counters every 10 s, three times over); at least 1."""
    max_bytes: int = 64 << 20
    """The most bytes kept, by each batch's estimated encoded size."""
    initial_backoff: timedelta = timedelta(milliseconds=250)
    """The first wait before a batch is sent again; it doubles after each refusal up to
    :attr:`max_backoff`, and each wait is drawn between half of it and all of it."""
    max_backoff: timedelta = timedelta(seconds=10)
    """The longest wait between two sends."""
    attempt_timeout: timedelta = timedelta(seconds=10)
    """The longest one send may take, connecting included: the OTLP exporter's ``timeout``,
    within which it makes its own attempts."""

    @classmethod
    def off(cls) -> ResendConfig:
        """No resending: a refused batch is lost and counted."""
        return cls(enabled=False)


@dataclass(frozen=True, slots=True)
class ExportStats:
    """What the exporters have done so far."""

    sent_batches: int = 0
    """Batches the collector took (span batches and metric exports)."""
    sent_spans: int = 0
    """Spans in the span batches the collector took."""
    refused_sends: int = 0
    """Sends that were refused for now and left their batch queued to be sent again."""
    dropped_span_batches: int = 0
    """Span batches dropped unsent: the queue was full, the batch grew older than ``max_age``,
    or shutdown's deadline passed."""
    dropped_metric_batches: int = 0
    """Metric exports dropped unsent, for the same reasons."""
    rejected_batches: int = 0
    """Batches refused for good: refused while resending is off, or whose send raised."""
    lost_spans: int = 0
    """Spans in every span batch dropped or rejected: spans lost before the collector."""
    queued_batches: int = 0
    """Batches waiting to be sent now, the one being sent included."""
    queued_bytes: int = 0
    """Estimated encoded bytes waiting to be sent now, the batch being sent included."""

    def __str__(self) -> str:
        return (
            f"{self.sent_batches} batches sent ({self.sent_spans} spans), "
            f"{self.refused_sends} sends refused and kept to send again, "
            f"{self.queued_batches} batches queued ({self.queued_bytes} bytes), "
            f"{self.dropped_span_batches} span batches and {self.dropped_metric_batches} metric "
            f"exports dropped, {self.rejected_batches} batches rejected: "
            f"{self.lost_spans} spans lost"
        )


def _default_instance_id() -> str:
    """The host name and the process id, as the Rust adapter's default."""
    return f"{socket.gethostname() or 'unknown-host'}-{os.getpid()}"


def _default_sampler() -> Sampler:
    return ParentBased(ALWAYS_ON)


@dataclass(slots=True)
class OtlpConfig:
    """Where and as whom to export; defaults for everything but the endpoint and the service."""

    endpoint: str
    """The collector's OTLP/gRPC endpoint, e.g. ``http://127.0.0.1:4317`` (``https://`` for
    TLS)."""
    service_name: str
    """``service.name``."""
    service_instance_id: str | None = None
    """``service.instance.id`` (default: the host name and the process id)."""
    metric_interval: timedelta = timedelta(seconds=10)
    """How often counters are exported."""
    span_interval: timedelta = timedelta(milliseconds=500)
    """The longest a finished span waits in the batch before it is exported (not the SDK's 5 s:
    an AccessFailure should reach ``candor incident --live`` within 2 s)."""
    sampler: Sampler = field(default_factory=_default_sampler)
    """The application's sampler, wrapped in :class:`~candor.sampling.KeepToolFailures`
    (default: parent-based, on)."""
    resend: ResendConfig = field(default_factory=ResendConfig)
    """How batches the collector cannot take yet are kept and sent again."""
    shutdown_timeout: timedelta = _SHUTDOWN_TIMEOUT
    """How long :meth:`OtlpGuard.shutdown` sends what is queued before it drops the rest."""


@dataclass(slots=True, eq=False)
class _Batch:
    """One export handed over by the SDK, and how to send it through the inner exporter."""

    send: Callable[[], bool]
    """Sends it once: true when the collector took it, false when it was refused; raises when
    it cannot be sent at all."""
    spans: int | None
    """How many spans it holds; ``None`` for a metric export."""
    size: int
    """Its estimated encoded size in bytes."""
    queued_at: float
    """When it was queued, on the monotonic clock."""


class _Backoff:
    """Exponential backoff with equal jitter: each wait is between half of its step and all."""

    def __init__(self, config: ResendConfig, jitter: Jitter) -> None:
        self._initial = config.initial_backoff.total_seconds()
        self._max = max(config.max_backoff.total_seconds(), self._initial)
        self._next = self._initial
        self._jitter = jitter

    def delay(self) -> float:
        base = self._next
        self._next = min(self._next * 2, self._max)
        return base / 2 + base * self._jitter.next_fraction() / 2

    def reset(self) -> None:
        self._next = self._initial


class Resender:
    """The queue between exporters and the collector, with the thread that sends it in order.

    The exporters of one service share one resender (:func:`providers` makes it): its bounds
    hold for spans and counters together, and its :meth:`stats` count both. A batch whose send
    is refused goes back to the head of the queue and is sent again after a backoff; past
    ``max_batches`` or ``max_bytes`` the oldest batch is dropped, and a batch older than
    ``max_age`` is given up. The sender thread starts here and ends at :meth:`close`; it is a
    daemon thread, so a process that never closes it exits without sending what is queued.

    ``jitter`` draws where each backoff falls between half of its step and all of it (default:
    :class:`~candor.retry.RandomJitter`).
    """

    def __init__(self, config: ResendConfig | None = None, *, jitter: Jitter | None = None) -> None:
        self._config = ResendConfig() if config is None else config
        self._max_age = self._config.max_age.total_seconds()
        self._max_batches = max(self._config.max_batches, 1)
        self._max_bytes = self._config.max_bytes
        self._jitter: Jitter = RandomJitter() if jitter is None else jitter
        self._changed = threading.Condition()
        self._queue: deque[_Batch] = deque()
        self._bytes = 0
        # The last send was refused and the collector has not taken a batch since.
        self._backing_off = False
        # The batch the sender took from the queue and is sending, if any.
        self._sending: _Batch | None = None
        # Set by close(): the sender ends when the queue is empty or at this instant.
        self._closing_at: float | None = None
        # The sender thread has ended; batches handed over now are dropped.
        self._finished = False
        self._sent_batches = 0
        self._sent_spans = 0
        self._refused_sends = 0
        self._dropped_span_batches = 0
        self._dropped_metric_batches = 0
        self._rejected_batches = 0
        self._lost_spans = 0
        self._thread = threading.Thread(
            target=self._send_in_order, name="candor-otlp-sender", daemon=True
        )
        self._thread.start()

    @property
    def config(self) -> ResendConfig:
        """How batches are kept and sent again."""
        return self._config

    def submit(self, send: Callable[[], bool], *, spans: int | None, size: int) -> bool:
        """Queues a batch and returns at once; false when the resender is closed.

        ``send`` sends the batch once and says whether the collector took it (it raises when the
        batch cannot be sent at all); ``spans`` is how many spans it holds (``None`` for a
        metric export), and ``size`` its estimated encoded size in bytes. A batch handed over
        after the sender ended is dropped and counted.
        """
        batch = _Batch(send, spans, size, time.monotonic())
        with self._changed:
            if self._finished:
                self._drop([batch], "the exporter was shut down")
                return False
            self._queue.append(batch)
            self._bytes += batch.size
            self._drop(self._evict(), "the resend queue is full")
            self._changed.notify_all()
            return True

    def drained(self, timeout_s: float) -> bool:
        """Waits up to ``timeout_s`` seconds for every queued batch to be sent.

        Returns true once nothing is queued or being sent, and false at the timeout, or at once
        while the collector is away (a refused batch waits for its backoff) or after
        :meth:`close`.
        """
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._changed:
            while True:
                if not self._queue and self._sending is None:
                    return True
                now = time.monotonic()
                if self._backing_off or self._finished or now >= deadline:
                    return False
                self._changed.wait(deadline - now)

    def close(self, timeout_s: float) -> bool:
        """Sends what is queued for up to ``timeout_s`` seconds, then ends the sender thread.

        What is still queued at the deadline is dropped and counted; a send in flight then is
        given the attempt timeout to end. Returns true when nothing was dropped and nothing is
        left queued. Closing again only shortens the deadline.
        """
        before = self.stats()
        closing_at = time.monotonic() + max(timeout_s, 0.0)
        give_up = closing_at + self._config.attempt_timeout.total_seconds()
        with self._changed:
            if self._closing_at is None or closing_at < self._closing_at:
                self._closing_at = closing_at
            self._changed.notify_all()
            while not self._finished:
                now = time.monotonic()
                if now >= give_up:
                    break
                self._changed.wait(give_up - now)
        after = self.stats()
        return (
            after.dropped_span_batches == before.dropped_span_batches
            and after.dropped_metric_batches == before.dropped_metric_batches
            and after.queued_batches == 0
        )

    def stats(self) -> ExportStats:
        """The counts so far, and what is queued now."""
        with self._changed:
            sending = self._sending
            return ExportStats(
                sent_batches=self._sent_batches,
                sent_spans=self._sent_spans,
                refused_sends=self._refused_sends,
                dropped_span_batches=self._dropped_span_batches,
                dropped_metric_batches=self._dropped_metric_batches,
                rejected_batches=self._rejected_batches,
                lost_spans=self._lost_spans,
                queued_batches=len(self._queue) + (sending is not None),
                queued_bytes=self._bytes + (0 if sending is None else sending.size),
            )

    # What follows runs with the lock held, but for the sender thread's own loop.

    def _evict(self) -> list[_Batch]:
        """Removes the oldest batches that no longer fit within the bounds."""
        evicted: list[_Batch] = []
        while self._queue and (
            len(self._queue) > self._max_batches or self._bytes > self._max_bytes
        ):
            evicted.append(self._pop())
        return evicted

    def _pop(self) -> _Batch:
        batch = self._queue.popleft()
        self._bytes -= batch.size
        return batch

    def _drop(self, batches: list[_Batch], why: str) -> None:
        """Counts batches that leave unsent."""
        for batch in batches:
            if batch.spans is None:
                self._dropped_metric_batches += 1
            else:
                self._dropped_span_batches += 1
                self._lost_spans += batch.spans
            _log.warning(
                "candor: a telemetry batch (%s) was dropped before the collector: %s",
                "metrics" if batch.spans is None else f"{batch.spans} spans",
                why,
            )

    def _next_batch(self) -> _Batch | None:
        """The next batch to send, waiting for one; ``None`` when the sender should end."""
        with self._changed:
            while True:
                now = time.monotonic()
                # Batches are queued in time order, and one put back was queued before all
                # others: the expired ones are at the head.
                expired: list[_Batch] = []
                while self._queue and self._queue[0].queued_at < now - self._max_age:
                    expired.append(self._pop())
                self._drop(expired, "older than the resend queue's max_age")
                closing_at = self._closing_at
                if closing_at is not None and now >= closing_at:
                    left = list(self._queue)
                    self._queue.clear()
                    self._bytes = 0
                    self._drop(left, "shutdown's deadline passed")
                if self._queue:
                    self._sending = self._pop()
                    return self._sending
                if closing_at is not None:
                    self._finished = True
                    self._changed.notify_all()
                    return None
                self._changed.wait(max(self._max_age, 1.0))

    def _delivered(self, batch: _Batch) -> None:
        with self._changed:
            self._sent_batches += 1
            self._sent_spans += batch.spans or 0
            if self._backing_off:
                _log.info(
                    "candor: the collector takes telemetry again (%d batches queued)",
                    len(self._queue),
                )
            self._backing_off = False
            self._sending = None
            self._changed.notify_all()

    def _rejected(self, batch: _Batch, reason: str) -> None:
        with self._changed:
            self._rejected_batches += 1
            self._lost_spans += batch.spans or 0
            _log.warning("candor: a telemetry batch was rejected: %s", reason)
            self._sending = None
            self._changed.notify_all()

    def _refused(self, batch: _Batch, delay: float) -> None:
        """Puts a refused batch back at the head and waits ``delay`` or until the deadline."""
        with self._changed:
            self._refused_sends += 1
            if not self._backing_off:
                _log.warning(
                    "candor: the collector cannot take telemetry now; batches are kept and "
                    "sent again"
                )
            self._backing_off = True
            self._sending = None
            self._queue.appendleft(batch)
            self._bytes += batch.size
            self._drop(self._evict(), "the resend queue is full")
            self._changed.notify_all()
            until = time.monotonic() + delay
            while True:
                now = time.monotonic()
                closing_at = self._closing_at
                end = until if closing_at is None else min(until, closing_at)
                if now >= end:
                    return
                self._changed.wait(end - now)

    def _send_in_order(self) -> None:
        """The sender thread: one batch at a time, in order."""
        # What the inner exporters do (a gRPC call) is not itself traced, as the SDK's own
        # export threads ensure.
        attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        backoff = _Backoff(self._config, self._jitter)
        while (batch := self._next_batch()) is not None:
            try:
                taken = batch.send()
            except Exception as error:  # noqa: BLE001 - counted; the sender goes on
                self._rejected(batch, f"its export raised {error!r}")
                continue
            if taken:
                backoff.reset()
                self._delivered(batch)
            elif self._config.enabled:
                self._refused(batch, backoff.delay())
            else:
                self._rejected(batch, "the collector refused it and resending is off")


def _value_bytes(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, Sequence):
        return sum(_value_bytes(item) for item in value)
    return _SCALAR_BYTES


def _attributes_bytes(attributes: Mapping[str, object] | None) -> int:
    if not attributes:
        return 0
    return sum(
        _ATTRIBUTE_BYTES + len(key) + _value_bytes(value) for key, value in attributes.items()
    )


def _spans_bytes(spans: Sequence[ReadableSpan]) -> int:
    """The estimated encoded size of a span batch."""
    size = 0
    for span in spans:
        size += _SPAN_BYTES + len(span.name) + _attributes_bytes(span.attributes)
        for event in span.events:
            size += _EVENT_BYTES + len(event.name) + _attributes_bytes(event.attributes)
        for link in span.links:
            size += _LINK_BYTES + _attributes_bytes(link.attributes)
    return size


def _metrics_bytes(data: MetricsData) -> int:
    """The estimated encoded size of a metric export."""
    size = 0
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                size += len(metric.name) + len(metric.description or "") + len(metric.unit or "")
                for point in metric.data.data_points:
                    size += _POINT_BYTES + _attributes_bytes(point.attributes)
                    if isinstance(point, HistogramDataPoint):
                        size += _SCALAR_BYTES * (
                            len(point.bucket_counts) + len(point.explicit_bounds)
                        )
    return size


def _resender_of(config: ResendConfig | None, resender: Resender | None) -> tuple[Resender, bool]:
    """The resender an exporter hands its batches to, and whether the exporter owns it."""
    if resender is None:
        return Resender(config), True
    if config is not None:
        raise ValueError("pass a ResendConfig or a shared Resender, not both")
    return resender, False


class ResendingSpanExporter(SpanExporter):
    """A span exporter that queues each batch and sends it through ``inner`` from a thread.

    :meth:`export` returns at once: the batch span processor never waits on the collector. The
    batch is sent by the ``resender``'s thread, and sent again while ``inner`` reports a failure,
    as :class:`Resender` says. ``inner`` should give up on a send within
    ``ResendConfig.attempt_timeout`` (the OTLP exporter's ``timeout``).

    Without ``resender`` the exporter makes its own from ``config`` and owns it: its
    :meth:`shutdown` closes it within ``shutdown_timeout``, then shuts ``inner`` down. With a
    shared ``resender``, whoever made it closes it, then shuts ``inner`` down, and
    :meth:`shutdown` does neither (as in :class:`OtlpGuard`). Raises :class:`ValueError` when
    given both ``config`` and ``resender``.
    """

    def __init__(
        self,
        inner: SpanExporter,
        config: ResendConfig | None = None,
        *,
        resender: Resender | None = None,
        shutdown_timeout: timedelta = _SHUTDOWN_TIMEOUT,
    ) -> None:
        self.inner = inner
        """The exporter that sends each batch."""
        self._resender, self._owned = _resender_of(config, resender)
        self._shutdown_timeout_s = shutdown_timeout.total_seconds()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Queues the batch and returns ``SUCCESS`` at once.

        After :meth:`shutdown` the batch is dropped and counted, and the result is ``FAILURE``.
        """
        batch = list(spans)
        inner = self.inner

        def send() -> bool:
            return inner.export(batch) is SpanExportResult.SUCCESS

        queued = self._resender.submit(send, spans=len(batch), size=_spans_bytes(batch))
        return SpanExportResult.SUCCESS if queued else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Waits for every queued batch to be sent, as :meth:`Resender.drained` does."""
        return self._resender.drained(timeout_millis / 1000)

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Closes an own resender, then shuts ``inner`` down; with a shared one, does nothing.

        The resender sends what is queued within ``shutdown_timeout`` (and ``timeout_millis``,
        when given), and drops and counts the rest.
        """
        if not self._owned:
            return
        timeout_s = self._shutdown_timeout_s
        if timeout_millis is not None:
            timeout_s = min(timeout_s, timeout_millis / 1000)
        self._resender.close(timeout_s)
        self.inner.shutdown()

    def stats(self) -> ExportStats:
        """The resender's counts (a shared one counts the metric exports too)."""
        return self._resender.stats()


class ResendingMetricExporter(MetricExporter):
    """A metric exporter that queues each export and sends it through ``inner`` from a thread.

    It is to the periodic metric reader what :class:`ResendingSpanExporter` is to the batch span
    processor, with the same arguments; it prefers the temporality and aggregation ``inner``
    prefers. Counters should be cumulative, so that an export that arrives late, or not at all,
    leaves the next one complete.
    """

    def __init__(
        self,
        inner: MetricExporter,
        config: ResendConfig | None = None,
        *,
        resender: Resender | None = None,
        shutdown_timeout: timedelta = _SHUTDOWN_TIMEOUT,
    ) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self.inner = inner
        """The exporter that sends each export."""
        self._resender, self._owned = _resender_of(config, resender)
        self._shutdown_timeout_s = shutdown_timeout.total_seconds()
        self._attempt_millis = self._resender.config.attempt_timeout.total_seconds() * 1000

    def export(
        self,
        metrics_data: MetricsData,
        timeout_millis: float = 10_000,  # noqa: ARG002 - the send has the attempt timeout
        **kwargs: Any,  # noqa: ARG002 - the SDK's signature
    ) -> MetricExportResult:
        """Queues the export and returns ``SUCCESS`` at once.

        After :meth:`shutdown` the export is dropped and counted, and the result is ``FAILURE``.
        """
        inner = self.inner
        attempt_millis = self._attempt_millis

        def send() -> bool:
            result = inner.export(metrics_data, timeout_millis=attempt_millis)
            return result is MetricExportResult.SUCCESS

        queued = self._resender.submit(send, spans=None, size=_metrics_bytes(metrics_data))
        return MetricExportResult.SUCCESS if queued else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Waits for every queued export to be sent, as :meth:`Resender.drained` does."""
        return self._resender.drained(timeout_millis / 1000)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:  # noqa: ARG002
        """Closes an own resender, then shuts ``inner`` down; with a shared one, does nothing.

        The resender sends what is queued within ``shutdown_timeout`` (and ``timeout_millis``),
        and drops and counts the rest.
        """
        if not self._owned:
            return
        self._resender.close(min(self._shutdown_timeout_s, timeout_millis / 1000))
        self.inner.shutdown()

    def stats(self) -> ExportStats:
        """The resender's counts (a shared one counts the span batches too)."""
        return self._resender.stats()


class OtlpGuard:
    """The providers :func:`providers` made; :meth:`shutdown` sends what is queued.

    It shuts down at the interpreter's exit if it was not shut down before (the SDK's providers
    would otherwise do so without the heartbeat's last word or the queue's last sends), and as
    a context manager when its block ends.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        resender: Resender,
        heartbeat: ExportHeartbeat,
        inner: tuple[SpanExporter, MetricExporter],
        shutdown_timeout: timedelta,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._resender = resender
        self._heartbeat = heartbeat
        self._inner = inner
        self._shutdown_timeout = shutdown_timeout
        self._lock = threading.Lock()
        self._final: ExportStats | None = None
        atexit.register(self._at_exit)

    @property
    def tracer_provider(self) -> TracerProvider:
        """The tracer provider (installed globally by :func:`init`)."""
        return self._tracer_provider

    @property
    def meter_provider(self) -> MeterProvider:
        """The meter provider (installed globally by :func:`init`)."""
        return self._meter_provider

    def stats(self) -> ExportStats:
        """Everything the exporters counted so far, and what is queued now."""
        return self._resender.stats()

    def force_flush(self, timeout: timedelta | None = None) -> bool:
        """Hands every finished span and the counters to the queue and waits for it to be sent.

        Waits up to ``timeout`` (default: the shutdown timeout); returns false at the timeout, or
        at once while the collector is away: what is queued stays queued, to be sent again.
        """
        timeout_s = (self._shutdown_timeout if timeout is None else timeout).total_seconds()
        deadline = time.monotonic() + timeout_s

        def left_millis() -> int:
            return max(int((deadline - time.monotonic()) * 1000), 0)

        traces = self._tracer_provider.force_flush(left_millis())
        counters = self._meter_provider.force_flush(left_millis())
        return self._resender.drained(left_millis() / 1000) and traces and counters

    def shutdown(self) -> ExportStats:
        """Shuts both providers down and returns the exporters' final counts.

        What is queued is sent within the shutdown timeout; the batches still queued after it
        are dropped and counted. The last metric export carries the export heartbeat's 0.
        Shutting down again returns the same counts. What shutting down dropped is logged; to
        check for it, compare the counts with :meth:`stats` taken before.
        """
        with self._lock:
            if self._final is not None:
                return self._final
            atexit.unregister(self._at_exit)
            deadline = time.monotonic() + self._shutdown_timeout.total_seconds()
            before = self._resender.stats()
            # The batch processor hands its last spans to the queue. The providers' errors are
            # logged, not raised: what they could not hand over is counted by the queue.
            try:
                self._tracer_provider.shutdown()
            except Exception:  # noqa: BLE001 - logged; the queue is still closed
                _log.warning("candor: shutting down the tracer provider failed", exc_info=True)
            # The meter provider collects once more when it shuts down: that export says no
            # other follows.
            self._heartbeat.final()
            left_millis = max(deadline - time.monotonic(), 0.0) * 1000
            try:
                self._meter_provider.shutdown(timeout_millis=left_millis)
            except Exception:  # noqa: BLE001 - logged; the queue is still closed
                _log.warning("candor: shutting down the meter provider failed", exc_info=True)
            sent = self._resender.close(max(deadline - time.monotonic(), 0.0))
            for inner in self._inner:
                inner.shutdown()
            stats = self._resender.stats()
            lost = (
                stats.lost_spans > before.lost_spans
                or stats.dropped_metric_batches > before.dropped_metric_batches
                or stats.rejected_batches > before.rejected_batches
            )
            if not sent or lost:
                _log.warning("candor: shutting down telemetry did not send everything: %s", stats)
            self._final = stats
            return stats

    def _at_exit(self) -> None:
        self.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.shutdown()


def _cumulative() -> dict[type, AggregationTemporality]:
    """Cumulative temporality for every instrument kind."""
    kinds: tuple[type, ...] = (
        Counter,
        UpDownCounter,
        Histogram,
        ObservableCounter,
        ObservableUpDownCounter,
        ObservableGauge,
    )
    return dict.fromkeys(kinds, AggregationTemporality.CUMULATIVE)


def providers(config: OtlpConfig) -> OtlpGuard:
    """Tracer and meter providers that export OTLP over gRPC, without installing them globally.

    For a process that reports as several services, each adapter is given its service's
    providers (``Adapter(..., tracer_provider=..., meter_provider=...)``). The spans are
    sampled by ``config.sampler`` wrapped in :class:`~candor.sampling.KeepToolFailures`, and
    batched for ``config.span_interval``; the counters are exported every
    ``config.metric_interval`` with the export heartbeat. Both go through one
    :class:`Resender`, and the OTLP exporters under it give each send
    ``config.resend.attempt_timeout``. The resource holds ``service.name`` and
    ``service.instance.id`` only.

    Raises :class:`ImportError` when the OTLP/gRPC exporter is not installed
    (``pip install "candor-adapter[otlp]"``).
    """
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
        OTLPMetricExporter,
    )
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter,
    )

    attempt_s = config.resend.attempt_timeout.total_seconds()
    inner_spans = OTLPSpanExporter(endpoint=config.endpoint, timeout=attempt_s)
    inner_metrics = OTLPMetricExporter(
        endpoint=config.endpoint, timeout=attempt_s, preferred_temporality=_cumulative()
    )
    resender = Resender(config.resend)
    instance = config.service_instance_id
    resource = Resource(
        {
            SERVICE_NAME: config.service_name,
            SERVICE_INSTANCE_ID: _default_instance_id() if instance is None else instance,
        }
    )
    tracer_provider = TracerProvider(
        sampler=KeepToolFailures(config.sampler), resource=resource, shutdown_on_exit=False
    )
    tracer_provider.add_span_processor(
        BatchSpanProcessor(
            ResendingSpanExporter(inner_spans, resender=resender),
            schedule_delay_millis=config.span_interval.total_seconds() * 1000,
        )
    )
    interval_s = config.metric_interval.total_seconds()
    reader = PeriodicExportingMetricReader(
        ResendingMetricExporter(inner_metrics, resender=resender),
        export_interval_millis=interval_s * 1000,
    )
    meter_provider = MeterProvider(
        metric_readers=[reader], resource=resource, shutdown_on_exit=False
    )
    heartbeat = ExportHeartbeat(interval_s, meter_provider=meter_provider)
    return OtlpGuard(
        tracer_provider,
        meter_provider,
        resender,
        heartbeat,
        (inner_spans, inner_metrics),
        config.shutdown_timeout,
    )


def init(config: OtlpConfig) -> OtlpGuard:
    """:func:`providers`, installed as the global tracer and meter providers.

    The OpenTelemetry API installs global providers once: when others were installed before,
    it logs a warning and keeps them, and the guard's providers are only reachable through it.
    """
    guard = providers(config)
    trace.set_tracer_provider(guard.tracer_provider)
    metrics.set_meter_provider(guard.meter_provider)
    return guard
