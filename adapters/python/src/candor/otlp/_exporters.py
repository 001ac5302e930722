"""The span, log and metric exporters that hand their batches to a ``Resender``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, Generic, Protocol, TypeVar

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from candor.otlp._queue import _SHUTDOWN_TIMEOUT, ExportStats, ResendConfig, Resender

# The size of a batch is estimated, not encoded: the inner exporter encodes it when it sends it,
# and encoding every batch a second time only to weigh it would double the exporters' work. The
# estimate counts the strings and values a batch carries and a fixed size for the rest of each
# span, event, link, log record and data point (ids, times, kinds and the protobuf framing
# around them).
_SPAN_BYTES: Final = 96
_LOG_RECORD_BYTES: Final = 72
_EVENT_BYTES: Final = 24
_LINK_BYTES: Final = 40
_POINT_BYTES: Final = 40
_ATTRIBUTE_BYTES: Final = 6
_SCALAR_BYTES: Final = 8


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


def _logs_bytes(batch: Sequence[ReadableLogRecord]) -> int:
    """The estimated encoded size of a log batch."""
    size = 0
    for readable in batch:
        record = readable.log_record
        size += (
            _LOG_RECORD_BYTES
            + len(record.event_name or "")
            + len(record.severity_text or "")
            + (0 if record.body is None else _value_bytes(record.body))
            + _attributes_bytes(record.attributes)
        )
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


class _Closable(Protocol):
    """An inner exporter, as far as :class:`_Resending` needs it."""

    def shutdown(self) -> object: ...


_Inner = TypeVar("_Inner", bound=_Closable)


class _Resending(Generic[_Inner]):
    """What the resending exporters share: ``inner``, and the resender they hand batches to.

    The resender is the exporter's own, made from ``config``, or a shared ``resender``. Raises
    :class:`ValueError` when given both ``config`` and ``resender``.
    """

    def __init__(
        self,
        inner: _Inner,
        config: ResendConfig | None = None,
        *,
        resender: Resender | None = None,
        shutdown_timeout: timedelta = _SHUTDOWN_TIMEOUT,
    ) -> None:
        self.inner = inner
        """The exporter that sends each batch."""
        if resender is None:
            self._resender, self._owned = Resender(config), True
        elif config is not None:
            raise ValueError("pass a ResendConfig or a shared Resender, not both")
        else:
            self._resender, self._owned = resender, False
        self._shutdown_timeout_s = shutdown_timeout.total_seconds()

    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        """Waits for every queued batch to be sent, as :meth:`Resender.drained` does."""
        return self._resender.drained(timeout_millis / 1000)

    def stats(self) -> ExportStats:
        """The resender's counts (a shared one counts the other exporters' batches too)."""
        return self._resender.stats()

    def _close(self, timeout_millis: float | None = None) -> None:
        """What :meth:`shutdown` does: closes an own resender, then shuts ``inner`` down.

        An own resender sends what is queued within ``shutdown_timeout`` (and ``timeout_millis``,
        when given) and drops and counts the rest. A shared one, and ``inner`` with it, is left
        to whoever made it.
        """
        if not self._owned:
            return
        timeout_s = self._shutdown_timeout_s
        if timeout_millis is not None:
            timeout_s = min(timeout_s, timeout_millis / 1000)
        self._resender.close(timeout_s)
        self.inner.shutdown()


class ResendingSpanExporter(_Resending[SpanExporter], SpanExporter):
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

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Closes an own resender, then shuts ``inner`` down; with a shared one, does nothing.

        What is queued is sent within ``shutdown_timeout`` (and ``timeout_millis``, when given),
        and the rest is dropped and counted.
        """
        self._close(timeout_millis)


class ResendingLogExporter(_Resending[LogRecordExporter], LogRecordExporter):
    """A log record exporter that queues each batch and sends it through ``inner`` from a thread.

    It is to the batch log record processor what :class:`ResendingSpanExporter` is to the batch
    span processor, with the same arguments: the events the adapter records at the moment they
    happen (contract rule ``TELEMETRY-MOMENT``) go through the same bounded queue as the spans,
    and a log batch that is dropped is counted (``dropped_log_batches``, ``lost_log_records``).
    """

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        """Queues the batch and returns ``SUCCESS`` at once.

        After :meth:`shutdown` the batch is dropped and counted, and the result is ``FAILURE``.
        """
        records = list(batch)
        inner = self.inner

        def send() -> bool:
            return inner.export(records) is LogRecordExportResult.SUCCESS

        queued = self._resender.submit(send, log_records=len(records), size=_logs_bytes(records))
        return LogRecordExportResult.SUCCESS if queued else LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        """Closes an own resender, then shuts ``inner`` down; with a shared one, does nothing.

        What is queued is sent within ``shutdown_timeout``, and the rest is dropped and counted.
        """
        self._close()


class ResendingMetricExporter(_Resending[MetricExporter], MetricExporter):
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
        MetricExporter.__init__(
            self,
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        _Resending.__init__(
            self, inner, config, resender=resender, shutdown_timeout=shutdown_timeout
        )
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

        queued = self._resender.submit(send, size=_metrics_bytes(metrics_data))
        return MetricExportResult.SUCCESS if queued else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Waits for every queued export to be sent, as :meth:`Resender.drained` does."""
        return super().force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:  # noqa: ARG002
        """Closes an own resender, then shuts ``inner`` down; with a shared one, does nothing.

        What is queued is sent within ``shutdown_timeout`` and ``timeout_millis``, and the rest
        is dropped and counted.
        """
        self._close(timeout_millis)
