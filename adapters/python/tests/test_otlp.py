"""``candor.otlp``: the resend queue, its exporters, and ``providers`` against a real receiver."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry import metrics, trace
from opentelemetry._logs import LogRecord
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2_grpc import (
    LogsServiceServicer,
    add_LogsServiceServicer_to_server,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import (
    MetricsServiceServicer,
    add_MetricsServiceServicer_to_server,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import candor.otlp
from candor import (
    Adapter,
    AttemptContext,
    FixedJitter,
    HttpClassifier,
    HttpResponse,
    NotFound,
    OutcomeClass,
    names,
)
from candor.names import attr
from candor.otlp import (
    ExportStats,
    OtlpConfig,
    ResendConfig,
    Resender,
    ResendingLogExporter,
    ResendingMetricExporter,
    ResendingSpanExporter,
    init,
    providers,
)
from candor.testing import FakeClock

MS = timedelta(milliseconds=1)
PATIENCE_S = 5.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Waits, up to the test's patience, until ``condition`` holds."""
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def quick(**fields: Any) -> ResendConfig:
    """Resend settings for tests: backoffs of milliseconds unless told otherwise."""
    settings: dict[str, Any] = {"initial_backoff": 2 * MS, "max_backoff": 8 * MS}
    settings.update(fields)
    return ResendConfig(**settings)


def spans(*span_names: str, **attributes: str) -> list[ReadableSpan]:
    return [ReadableSpan(name=name, attributes=attributes) for name in span_names]


class FakeSpans(SpanExporter):
    """An inner exporter that refuses its first ``failures`` sends, or raises while ``broken``.

    With a ``gate``, each send waits until the test opens it.
    """

    def __init__(
        self, failures: int = 0, *, gate: threading.Event | None = None, broken: int = 0
    ) -> None:
        self.failures = failures
        self.broken = broken
        self.gate = gate
        self.lock = threading.Lock()
        self.calls: list[float] = []
        self.received: list[str] = []
        self.called = threading.Event()
        self.is_shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock:
            self.calls.append(time.monotonic())
            call = len(self.calls)
        self.called.set()
        if self.gate is not None:
            assert self.gate.wait(PATIENCE_S)
        if call <= self.broken:
            raise RuntimeError("cannot encode")
        if call <= self.failures:
            return SpanExportResult.FAILURE
        with self.lock:
            self.received.extend(span.name for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.is_shut_down = True


def test_refused_batches_are_sent_again_once_each_and_in_order() -> None:
    inner = FakeSpans(failures=2)
    exporter = ResendingSpanExporter(inner, quick())
    for batch in (spans("a", "b"), spans("c"), spans("d", "e")):
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    wait_for(lambda: exporter.stats().sent_batches == 3, "three batches sent")
    assert inner.received == ["a", "b", "c", "d", "e"]
    assert exporter.stats() == ExportStats(sent_batches=3, sent_spans=5, refused_sends=2)
    assert len(inner.calls) == 5
    assert exporter.force_flush(1000)
    exporter.shutdown()
    assert inner.is_shut_down


def test_export_returns_at_once_while_the_inner_exporter_is_still_sending() -> None:
    gate = threading.Event()
    inner = FakeSpans(failures=1, gate=gate)
    exporter = ResendingSpanExporter(inner, quick())
    assert exporter.export(spans("first")) is SpanExportResult.SUCCESS
    assert inner.called.wait(PATIENCE_S)
    # The sender is held inside the inner exporter: queueing does not wait for it.
    assert exporter.export(spans("second")) is SpanExportResult.SUCCESS
    assert exporter.stats().queued_batches == 2
    assert not exporter.force_flush(10)
    gate.set()
    wait_for(lambda: exporter.stats().sent_batches == 2, "both batches sent")
    assert inner.received == ["first", "second"]
    assert exporter.stats().refused_sends == 1
    exporter.shutdown()


def test_backoff_doubles_from_the_initial_wait_to_the_cap() -> None:
    inner = FakeSpans(failures=3)
    config = ResendConfig(initial_backoff=40 * MS, max_backoff=80 * MS)
    # A draw of 0 waits exactly half of each step: 20, 40, then 40 ms.
    exporter = ResendingSpanExporter(inner, resender=Resender(config, jitter=FixedJitter(0.0)))
    exporter.export(spans("a"))
    wait_for(lambda: exporter.stats().sent_batches == 1, "the batch sent")
    gaps = [later - earlier for earlier, later in zip(inner.calls, inner.calls[1:], strict=False)]
    assert len(gaps) == 3
    assert gaps[0] >= 0.020
    assert gaps[1] >= 0.040
    assert gaps[2] >= 0.040


def test_a_full_queue_drops_its_oldest_batches_and_shutdown_drops_the_rest() -> None:
    gate = threading.Event()
    inner = FakeSpans(failures=1000, gate=gate)
    # The first refusal waits at least 30 s: nothing is sent again during the test.
    exporter = ResendingSpanExporter(
        inner,
        ResendConfig(max_batches=2, initial_backoff=timedelta(seconds=60)),
        shutdown_timeout=timedelta(0),
    )
    exporter.export(spans("1"))
    assert inner.called.wait(PATIENCE_S)
    for size in (2, 3, 4, 5):
        exporter.export(spans(*(str(size),) * size))
    gate.set()
    wait_for(lambda: exporter.stats().refused_sends == 1, "the first send refused")
    # The batch put back is the oldest: it goes with the two that did not fit behind it.
    assert exporter.stats() == ExportStats(
        refused_sends=1,
        dropped_span_batches=3,
        lost_spans=1 + 2 + 3,
        queued_batches=2,
        queued_bytes=exporter.stats().queued_bytes,
    )
    assert exporter.stats().queued_bytes > 0
    started = time.monotonic()
    exporter.shutdown()
    assert time.monotonic() - started < 5
    assert exporter.stats() == ExportStats(refused_sends=1, dropped_span_batches=5, lost_spans=15)
    assert inner.is_shut_down
    # After shutdown a batch is refused and counted.
    assert exporter.export(spans("late")) is SpanExportResult.FAILURE
    assert exporter.stats().dropped_span_batches == 6
    assert exporter.stats().lost_spans == 16


def test_the_byte_bound_drops_a_batch_larger_than_it_at_once() -> None:
    inner = FakeSpans()
    exporter = ResendingSpanExporter(inner, quick(max_bytes=1000))
    exporter.export(spans("big", payload="x" * 2000))
    assert exporter.stats().dropped_span_batches == 1
    assert exporter.stats().lost_spans == 1
    exporter.export(spans("small", payload="x" * 100))
    wait_for(lambda: exporter.stats().sent_batches == 1, "the small batch sent")
    assert inner.received == ["small"]
    exporter.shutdown()


def test_a_batch_older_than_max_age_is_given_up() -> None:
    inner = FakeSpans(failures=1000)
    exporter = ResendingSpanExporter(inner, quick(max_age=50 * MS))
    exporter.export(spans("a", "b"))
    wait_for(lambda: exporter.stats().dropped_span_batches == 1, "the batch given up")
    stats = exporter.stats()
    assert stats.lost_spans == 2
    assert stats.queued_batches == 0
    assert stats.sent_batches == 0
    assert stats.refused_sends >= 1
    assert inner.received == []
    exporter.shutdown()


def test_without_resending_a_refused_batch_is_rejected_and_the_next_is_sent() -> None:
    inner = FakeSpans(failures=1)
    exporter = ResendingSpanExporter(inner, ResendConfig.off())
    exporter.export(spans("refused"))
    exporter.export(spans("taken"))
    wait_for(lambda: exporter.stats().sent_batches == 1, "the second batch sent")
    assert exporter.stats() == ExportStats(
        sent_batches=1, sent_spans=1, rejected_batches=1, lost_spans=1
    )
    assert inner.received == ["taken"]
    exporter.shutdown()


def test_a_send_that_raises_is_rejected_and_the_sender_goes_on() -> None:
    inner = FakeSpans(broken=1)
    exporter = ResendingSpanExporter(inner, quick())
    exporter.export(spans("broken"))
    exporter.export(spans("fine"))
    wait_for(lambda: exporter.stats().sent_batches == 1, "the second batch sent")
    assert exporter.stats().rejected_batches == 1
    assert exporter.stats().lost_spans == 1
    assert exporter.stats().refused_sends == 0
    assert inner.received == ["fine"]
    exporter.shutdown()


def test_shutdown_sends_what_is_queued_within_its_timeout() -> None:
    inner = FakeSpans(failures=2)
    resender = Resender(quick())
    exporter = ResendingSpanExporter(inner, resender=resender)
    exporter.export(spans("a"))
    exporter.export(spans("b"))
    # A shared resender is closed by whoever made it, not by the exporter.
    exporter.shutdown()
    assert not inner.is_shut_down
    assert resender.close(PATIENCE_S)
    assert inner.received == ["a", "b"]
    assert resender.stats() == ExportStats(sent_batches=2, sent_spans=2, refused_sends=2)
    assert exporter.export(spans("late")) is SpanExportResult.FAILURE


def test_a_config_and_a_shared_resender_are_not_both_taken() -> None:
    resender = Resender()
    with pytest.raises(ValueError, match="not both"):
        ResendingSpanExporter(FakeSpans(), ResendConfig(), resender=resender)
    assert resender.close(1)


class FakeMetrics(MetricExporter):
    """An inner metric exporter that refuses its first ``failures`` exports."""

    def __init__(self, failures: int) -> None:
        super().__init__(preferred_temporality={Counter: AggregationTemporality.DELTA})
        self.failures = failures
        self.calls = 0
        self.received: list[MetricsData] = []
        self.is_shut_down = False

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.calls += 1
        if self.calls <= self.failures:
            return MetricExportResult.FAILURE
        self.received.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.is_shut_down = True


def test_the_metric_exporter_queues_and_sends_again_in_order() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("test").create_counter("calls").add(1)
    first = reader.get_metrics_data()
    second = reader.get_metrics_data()
    assert first is not None
    assert second is not None
    inner = FakeMetrics(failures=1)
    exporter = ResendingMetricExporter(inner, quick())
    assert exporter._preferred_temporality == {Counter: AggregationTemporality.DELTA}
    assert exporter.export(first) is MetricExportResult.SUCCESS
    assert exporter.export(second) is MetricExportResult.SUCCESS
    wait_for(lambda: exporter.stats().sent_batches == 2, "both exports sent")
    assert [id(data) for data in inner.received] == [id(first), id(second)]
    assert exporter.stats() == ExportStats(sent_batches=2, refused_sends=1)
    exporter.shutdown()
    assert inner.is_shut_down
    assert exporter.export(first) is MetricExportResult.FAILURE
    assert exporter.stats().dropped_metric_batches == 1
    assert exporter.stats().lost_spans == 0
    provider.shutdown()


class FakeLogs(LogRecordExporter):
    """An inner log record exporter that refuses its first ``failures`` exports."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls = 0
        self.received: list[str | None] = []
        self.is_shut_down = False

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.calls += 1
        if self.calls <= self.failures:
            return LogRecordExportResult.FAILURE
        self.received.extend(record.log_record.event_name for record in batch)
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        self.is_shut_down = True


def records(*event_names: str) -> list[ReadableLogRecord]:
    return [
        ReadableLogRecord(
            LogRecord(event_name=name, attributes={attr.TOOL_NAME: "search"}), Resource({})
        )
        for name in event_names
    ]


def test_the_log_exporter_queues_sends_again_in_order_and_counts_what_it_drops() -> None:
    inner = FakeLogs(failures=1)
    exporter = ResendingLogExporter(inner, quick())
    assert exporter.export(records("a", "b")) is LogRecordExportResult.SUCCESS
    assert exporter.export(records("c")) is LogRecordExportResult.SUCCESS
    wait_for(lambda: exporter.stats().sent_batches == 2, "both batches sent")
    assert inner.received == ["a", "b", "c"]
    assert exporter.stats() == ExportStats(sent_batches=2, sent_log_records=3, refused_sends=1)
    assert exporter.force_flush(1000)
    exporter.shutdown()
    assert inner.is_shut_down
    assert exporter.export(records("late", "later")) is LogRecordExportResult.FAILURE
    stats = exporter.stats()
    assert stats.dropped_log_batches == 1
    assert stats.lost_log_records == 2
    assert stats.dropped_span_batches == 0
    assert stats.lost_spans == 0


def test_a_batch_holds_spans_or_log_records_not_both() -> None:
    resender = Resender(quick())
    with pytest.raises(ValueError, match="not both"):
        resender.submit(lambda: True, spans=1, log_records=1, size=10)
    assert resender.close(1)


def test_the_otlp_exporter_is_imported_only_by_providers() -> None:
    script = (
        "import sys\n"
        "sys.modules['opentelemetry.exporter.otlp.proto.grpc'] = None\n"
        "from candor.otlp import OtlpConfig, ResendConfig, Resender, providers\n"
        "assert Resender(ResendConfig()).close(1)\n"
        "try:\n"
        "    providers(OtlpConfig('http://127.0.0.1:4317', 'x'))\n"
        "except ImportError:\n"
        "    print('needs the exporter')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "needs the exporter\n"


def test_stats_read_as_a_sentence() -> None:
    stats = ExportStats(
        sent_batches=3,
        sent_spans=5,
        sent_log_records=4,
        refused_sends=1,
        lost_spans=2,
        dropped_log_batches=1,
        lost_log_records=3,
    )
    assert str(stats) == (
        "3 batches sent (5 spans, 4 log records), 1 sends refused and kept to send again, "
        "0 batches queued (0 bytes), 0 span batches, 1 log batches and 0 metric exports "
        "dropped, 0 batches rejected: 2 spans and 3 log records lost"
    )


@dataclass
class Collector:
    """A real OTLP/gRPC receiver on the loopback that refuses the first span and log exports."""

    refuse_spans: int = 0
    refuse_logs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    trace_calls: int = 0
    spans: list[str] = field(default_factory=list)
    span_ids: list[tuple[bytes, bytes]] = field(default_factory=list)
    """Each span's trace and span ids."""
    resources: list[dict[str, str]] = field(default_factory=list)
    log_calls: int = 0
    logs: list[tuple[str, bytes, bytes, dict[str, str | int]]] = field(default_factory=list)
    """Each log record's event name, trace and span ids, and attributes."""
    log_resources: list[dict[str, str]] = field(default_factory=list)
    gauge: list[float] = field(default_factory=list)
    endpoint: str = ""


class Traces(TraceServiceServicer):
    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def Export(  # noqa: N802 - the service's method
        self, request: ExportTraceServiceRequest, context: Any
    ) -> ExportTraceServiceResponse:
        collector = self.collector
        with collector.lock:
            collector.trace_calls += 1
            refuse = collector.trace_calls <= collector.refuse_spans
        if refuse:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the collector is restarting")
        with collector.lock:
            for resource_spans in request.resource_spans:
                collector.resources.append(
                    {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
                )
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        collector.spans.append(span.name)
                        collector.span_ids.append((span.trace_id, span.span_id))
        return ExportTraceServiceResponse()


class Logs(LogsServiceServicer):
    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def Export(  # noqa: N802 - the service's method
        self, request: ExportLogsServiceRequest, context: Any
    ) -> ExportLogsServiceResponse:
        collector = self.collector
        with collector.lock:
            collector.log_calls += 1
            refuse = collector.log_calls <= collector.refuse_logs
        if refuse:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the collector is restarting")
        with collector.lock:
            for resource_logs in request.resource_logs:
                collector.log_resources.append(
                    {kv.key: kv.value.string_value for kv in resource_logs.resource.attributes}
                )
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        attributes: dict[str, str | int] = {
                            kv.key: (
                                kv.value.int_value
                                if kv.value.HasField("int_value")
                                else kv.value.string_value
                            )
                            for kv in record.attributes
                        }
                        collector.logs.append(
                            (record.event_name, record.trace_id, record.span_id, attributes)
                        )
        return ExportLogsServiceResponse()


class Metrics(MetricsServiceServicer):
    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def Export(  # noqa: N802 - the service's method
        self, request: ExportMetricsServiceRequest, context: Any
    ) -> ExportMetricsServiceResponse:
        with self.collector.lock:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        if metric.name == names.EXPORT_INTERVAL_GAUGE:
                            self.collector.gauge.extend(
                                point.as_double for point in metric.gauge.data_points
                            )
        return ExportMetricsServiceResponse()


@pytest.fixture
def collector() -> Iterator[Collector]:
    state = Collector()
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    add_TraceServiceServicer_to_server(Traces(state), server)  # type: ignore[no-untyped-call]
    add_MetricsServiceServicer_to_server(Metrics(state), server)  # type: ignore[no-untyped-call]
    add_LogsServiceServicer_to_server(Logs(state), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    state.endpoint = f"http://127.0.0.1:{port}"
    yield state
    server.stop(None)


def config(endpoint: str, **fields: Any) -> OtlpConfig:
    """Small intervals and an attempt timeout below the OTLP exporter's first own retry (about
    1 s), so that a refusal comes back at once."""
    settings: dict[str, Any] = {
        "service_instance_id": "checkout-1",
        "span_interval": 20 * MS,
        "metric_interval": timedelta(seconds=30),
        "resend": quick(initial_backoff=20 * MS, max_backoff=50 * MS, attempt_timeout=500 * MS),
        "shutdown_timeout": timedelta(seconds=2),
    }
    settings.update(fields)
    return OtlpConfig(endpoint, "checkout", **settings)


def test_providers_send_a_refused_span_batch_again_and_the_heartbeat(
    collector: Collector,
) -> None:
    collector.refuse_spans = 1
    guard = providers(config(collector.endpoint, sampler=ALWAYS_OFF))
    tracer = guard.tracer_provider.get_tracer("test")
    # The failure span is kept by KeepToolFailures; the other is left to the sampler (off).
    tracer.start_span(names.TOOL_CALL_SPAN, attributes={attr.FAILURE_KIND: "timeout"}).end()
    tracer.start_span("ignored").end()
    wait_for(lambda: guard.stats().sent_spans == 1, "the span sent again")
    assert guard.force_flush(timedelta(seconds=PATIENCE_S))
    stats = guard.shutdown()
    assert collector.spans == [names.TOOL_CALL_SPAN]
    assert collector.trace_calls == 2
    assert collector.resources == [
        {"service.name": "checkout", "service.instance.id": "checkout-1"}
    ]
    # The flush's export, then the last one at shutdown.
    assert collector.gauge == [30.0, 0.0]
    assert stats == ExportStats(sent_batches=3, sent_spans=1, refused_sends=1)
    assert guard.shutdown() == stats


def test_a_failed_attempt_reaches_the_collector_as_a_log_record_before_its_call_ends(
    collector: Collector,
) -> None:
    collector.refuse_logs = 1
    guard = providers(config(collector.endpoint))
    adapter = Adapter(
        "search",
        "https://search.example/v1/items",
        HttpClassifier(NotFound.UNREACHABLE),
        clock=FakeClock(),
        tracer_provider=guard.tracer_provider,
        meter_provider=guard.meter_provider,
        logger_provider=guard.logger_provider,
    )
    # What the collector had while the second attempt ran: log records and spans.
    during: list[tuple[int, int]] = []

    def attempt(context: AttemptContext) -> HttpResponse:
        if context.number == 2:
            # Refused once, then sent again.
            wait_for(lambda: guard.stats().sent_log_records == 1, "the first failure's record")
            with collector.lock:
                during.append((len(collector.logs), len(collector.spans)))
        return (
            HttpResponse(503, body=b"busy")
            if context.number == 1
            else HttpResponse(200, body=b"{}")
        )

    envelope = adapter.call(attempt)
    assert envelope.outcome_class is OutcomeClass.SUCCESS
    assert during == [(1, 0)], "the failure reached the collector while the call ran"
    assert guard.force_flush(timedelta(seconds=PATIENCE_S))
    stats = guard.shutdown()
    [(event_name, trace_id, span_id, attributes)] = collector.logs
    assert event_name == names.OUTCOME_EVENT
    assert collector.spans == [names.TOOL_CALL_SPAN]
    assert collector.span_ids == [(trace_id, span_id)], "the record is in the call's span"
    assert attributes[attr.RETRY_ACTION] == "retry"
    assert attributes[attr.HTTP_STATUS_CODE] == 503
    assert attributes[attr.PROVENANCE_SOURCE_SYSTEM] == "search.example"
    assert collector.log_resources == [
        {"service.name": "checkout", "service.instance.id": "checkout-1"}
    ]
    assert collector.log_calls == 2
    assert stats.sent_log_records == 1
    assert stats.lost_log_records == 0
    assert stats.sent_spans == 1
    assert stats.refused_sends == 1


def test_shutdown_drops_what_the_collector_never_took_and_returns_the_counts(
    closed_port: int,
) -> None:
    guard = providers(
        config(f"http://127.0.0.1:{closed_port}", shutdown_timeout=timedelta(milliseconds=300))
    )
    guard.tracer_provider.get_tracer("test").start_span("lost").end()
    guard.logger_provider.get_logger("test").emit(LogRecord(event_name=names.OUTCOME_EVENT))
    wait_for(lambda: guard.stats().refused_sends >= 1, "the span batch refused")
    started = time.monotonic()
    stats = guard.shutdown()
    assert time.monotonic() - started < 3
    assert stats.dropped_span_batches == 1
    assert stats.lost_spans == 1
    assert stats.dropped_log_batches == 1
    assert stats.lost_log_records == 1
    # The last metric export, made at shutdown, was never taken either.
    assert stats.dropped_metric_batches == 1
    assert stats.sent_batches == 0
    assert stats.queued_batches == 0
    assert stats.rejected_batches == 0


def test_init_installs_the_providers_globally(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    installed: list[object] = []
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    monkeypatch.setattr(metrics, "set_meter_provider", installed.append)
    monkeypatch.setattr(candor.otlp, "set_logger_provider", installed.append)
    guard = init(config(f"http://127.0.0.1:{closed_port}", shutdown_timeout=300 * MS))
    assert installed == [guard.tracer_provider, guard.meter_provider, guard.logger_provider]
    guard.shutdown()
