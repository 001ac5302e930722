"""One call that sets up OTLP/gRPC tracer, logger and meter providers for an application.

This module needs the OpenTelemetry SDK and the OTLP/gRPC exporter, which the extra
``candor-adapter[otlp]`` installs; ``import candor`` does not import it, and the exporter is only
imported by :func:`providers`.

    from candor import Adapter
    from candor.otlp import OtlpConfig, providers

    telemetry = providers(OtlpConfig("http://127.0.0.1:4317", "orders-api"))
    search = Adapter(..., tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider,
                     logger_provider=telemetry.logger_provider)
    ...
    stats = telemetry.shutdown()  # sends what is queued; counts what it could not

Every metric export also carries the export heartbeat, ``candor.adapter.export_interval``: the
reader's interval, and 0 in the last export at :meth:`OtlpGuard.shutdown`, so that readers tell
an instance that shut down from one that went silent.

Spans go through a batch processor, the events recorded at the moment they happen (contract rule
``TELEMETRY-MOMENT``: a failed attempt that is retried, a state of an operation) through a batch
log record processor as log records, and counters through a periodic reader, all off the call
path, and their exporters only queue what they are given: when the collector is down a call never
blocks on telemetry. One sender thread sends the queued batches in the order they came; a batch
the collector cannot take yet (it is restarting, or its broker is away) stays at the head of the
queue and is sent again after a backoff, within a bounded age and size (:class:`ResendConfig`).
Every batch ends counted in :class:`ExportStats`: sent, dropped or rejected, and what is dropped
is logged on the ``candor.otlp`` logger.

:func:`init` installs the tracer and meter providers globally and sets the logger provider with
:func:`candor.set_logger_provider`, not as OpenTelemetry's global logger provider: the queue is
for Candor's telemetry, and the application's own log records, which a global provider would
attract, would crowd out spans in its bounds.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Self

from opentelemetry import metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
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
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler

from candor.otlp._exporters import (
    ResendingLogExporter,
    ResendingMetricExporter,
    ResendingSpanExporter,
)
from candor.otlp._queue import _SHUTDOWN_TIMEOUT, ExportStats, ResendConfig, Resender, _log
from candor.sampling import KeepToolFailures
from candor.telemetry import ExportHeartbeat, set_logger_provider

__all__ = [
    "ExportStats",
    "OtlpConfig",
    "OtlpGuard",
    "ResendConfig",
    "Resender",
    "ResendingLogExporter",
    "ResendingMetricExporter",
    "ResendingSpanExporter",
    "init",
    "providers",
]


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
    """The longest a finished span, or an event recorded as a log record, waits in its batch
    before it is exported (not the SDK's 5 s and 1 s: an AccessFailure should reach ``candor
    incident --live`` within 2 s)."""
    sampler: Sampler = field(default_factory=_default_sampler)
    """The application's sampler, wrapped in :class:`~candor.sampling.KeepToolFailures`
    (default: parent-based, on)."""
    resend: ResendConfig = field(default_factory=ResendConfig)
    """How batches the collector cannot take yet are kept and sent again."""
    shutdown_timeout: timedelta = _SHUTDOWN_TIMEOUT
    """How long :meth:`OtlpGuard.shutdown` sends what is queued before it drops the rest."""


class OtlpGuard:
    """The providers :func:`providers` made; :meth:`shutdown` sends what is queued.

    It shuts down at the interpreter's exit if it was not shut down before (the SDK's providers
    would otherwise do so without the heartbeat's last word or the queue's last sends), and as
    a context manager when its block ends.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider,
        logger_provider: LoggerProvider,
        meter_provider: MeterProvider,
        resender: Resender,
        heartbeat: ExportHeartbeat,
        inner: tuple[SpanExporter, LogRecordExporter, MetricExporter],
        shutdown_timeout: timedelta,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._logger_provider = logger_provider
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
    def logger_provider(self) -> LoggerProvider:
        """The logger provider adapters emit the events of calls that have not ended through.

        :func:`init` sets it for every adapter built without one
        (:func:`candor.set_logger_provider`); give it to an adapter with
        ``Adapter(..., logger_provider=...)`` otherwise.
        """
        return self._logger_provider

    @property
    def meter_provider(self) -> MeterProvider:
        """The meter provider (installed globally by :func:`init`)."""
        return self._meter_provider

    def stats(self) -> ExportStats:
        """Everything the exporters counted so far, and what is queued now."""
        return self._resender.stats()

    def force_flush(self, timeout: timedelta | None = None) -> bool:
        """Hands the finished spans, log records and counters to the queue; waits for it to go.

        Waits up to ``timeout`` (default: the shutdown timeout); returns false at the timeout, or
        at once while the collector is away: what is queued stays queued, to be sent again.
        """
        timeout_s = (self._shutdown_timeout if timeout is None else timeout).total_seconds()
        deadline = time.monotonic() + timeout_s

        def left_millis() -> int:
            return max(int((deadline - time.monotonic()) * 1000), 0)

        logs = self._logger_provider.force_flush(left_millis())
        traces = self._tracer_provider.force_flush(left_millis())
        counters = self._meter_provider.force_flush(left_millis())
        return self._resender.drained(left_millis() / 1000) and logs and traces and counters

    def shutdown(self) -> ExportStats:
        """Shuts the providers down and returns the exporters' final counts.

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
            # The batch processors hand their last log records and spans to the queue. The
            # providers' errors are logged, not raised: what they could not hand over is counted
            # by the queue.
            try:
                self._logger_provider.shutdown()
            except Exception:  # noqa: BLE001 - logged; the queue is still closed
                _log.warning("candor: shutting down the logger provider failed", exc_info=True)
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
                or stats.lost_log_records > before.lost_log_records
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
    """Tracer, logger and meter providers that export OTLP over gRPC, without installing them.

    For a process that reports as several services, each adapter is given its service's
    providers (``Adapter(..., tracer_provider=..., meter_provider=..., logger_provider=...)``).
    The spans are sampled by ``config.sampler`` wrapped in
    :class:`~candor.sampling.KeepToolFailures`, and batched for ``config.span_interval``, as
    are the log records (the events recorded at the moment they happen); the counters are
    exported every ``config.metric_interval`` with the export heartbeat. All go through one
    :class:`Resender`, and the OTLP exporters under it give each send
    ``config.resend.attempt_timeout``. The resource holds ``service.name`` and
    ``service.instance.id`` only.

    Raises :class:`ImportError` when the OTLP/gRPC exporter is not installed
    (``pip install "candor-adapter[otlp]"``).
    """
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
        OTLPMetricExporter,
    )
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter,
    )

    attempt_s = config.resend.attempt_timeout.total_seconds()
    inner_spans = OTLPSpanExporter(endpoint=config.endpoint, timeout=attempt_s)
    inner_logs = OTLPLogExporter(endpoint=config.endpoint, timeout=attempt_s)
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
    batch_millis = config.span_interval.total_seconds() * 1000
    tracer_provider.add_span_processor(
        BatchSpanProcessor(
            ResendingSpanExporter(inner_spans, resender=resender),
            schedule_delay_millis=batch_millis,
        )
    )
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(
            ResendingLogExporter(inner_logs, resender=resender),
            schedule_delay_millis=batch_millis,
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
        logger_provider,
        meter_provider,
        resender,
        heartbeat,
        (inner_spans, inner_logs, inner_metrics),
        config.shutdown_timeout,
    )


def init(config: OtlpConfig) -> OtlpGuard:
    """:func:`providers`, installed as the global tracer and meter providers.

    The logger provider is set for every adapter built without one
    (:func:`candor.set_logger_provider`), not as OpenTelemetry's global logger provider. The
    OpenTelemetry API installs global providers once: when others were installed before, it
    logs a warning and keeps them, and the guard's providers are only reachable through it.
    """
    guard = providers(config)
    trace.set_tracer_provider(guard.tracer_provider)
    metrics.set_meter_provider(guard.meter_provider)
    set_logger_provider(guard.logger_provider)
    return guard
