"""Sends span events, log-based events and counter points with the official OpenTelemetry
Python SDK.

Reads a JSON spec on stdin (written by the Rust end-to-end suite, which owns every wire name):
  {"protocol": "grpc"|"http", "endpoint": "...", "resource": {...}, "span": "...",
   "event": "...", "events": [{attributes}], "log_events": [{attributes}], "counter": "...",
   "unit": "...", "points": [{"value": n, "attributes": {...}}]}
The span carries `events` as span events; `log_events` are log records named `event`, emitted
inside the span (the log-based form of an event).
Prints {"trace_id": hex, "span_id": hex} of the span it sent. Exits 1 when an export failed.
"""

import json
import sys
from collections.abc import Sequence
from typing import TypedDict

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.types import AttributeValue


class Point(TypedDict):
    """One counter point."""

    value: float
    attributes: dict[str, AttributeValue]


class Spec(TypedDict):
    """What the suite asks for."""

    protocol: str
    endpoint: str
    resource: dict[str, AttributeValue]
    span: str
    event: str
    events: list[dict[str, AttributeValue]]
    log_events: list[dict[str, AttributeValue]]
    counter: str
    unit: str
    points: list[Point]


def log_exporter(spec: Spec) -> LogRecordExporter:
    if spec["protocol"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
            OTLPLogExporter as GrpcLogExporter,
        )

        return GrpcLogExporter(endpoint=spec["endpoint"], insecure=True)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(endpoint=spec["endpoint"] + "/v1/logs")


def exporters(spec: Spec) -> tuple[SpanExporter, MetricExporter]:
    if spec["protocol"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return (
            GrpcSpanExporter(endpoint=spec["endpoint"], insecure=True),
            GrpcMetricExporter(endpoint=spec["endpoint"], insecure=True),
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return (
        HttpSpanExporter(endpoint=spec["endpoint"] + "/v1/traces"),
        HttpMetricExporter(endpoint=spec["endpoint"] + "/v1/metrics"),
    )


class Recording(SpanExporter):
    """Wraps an exporter and remembers whether every export succeeded."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed = True
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def main() -> None:
    spec: Spec = json.load(sys.stdin)
    inner_span_exporter, metric_exporter = exporters(spec)
    span_exporter = Recording(inner_span_exporter)
    resource = Resource.create(spec["resource"])
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=3_600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter(spec)))
    logger = logger_provider.get_logger("candor-e2e-python")

    tracer = tracer_provider.get_tracer("candor-e2e-python")
    with tracer.start_as_current_span(spec["span"]) as span:
        for attributes in spec["events"]:
            span.add_event(spec["event"], attributes=attributes)
        for attributes in spec.get("log_events", []):
            logger.emit(event_name=spec["event"], attributes=attributes)
        context = span.get_span_context()
    counter = meter_provider.get_meter("candor-e2e-python").create_counter(
        spec["counter"], unit=spec["unit"]
    )
    for point in spec["points"]:
        counter.add(point["value"], attributes=point["attributes"])

    metrics_ok = meter_provider.force_flush(timeout_millis=20_000)
    logs_ok = logger_provider.force_flush(timeout_millis=20_000)
    meter_provider.shutdown()
    tracer_provider.shutdown()
    logger_provider.shutdown()
    print(
        json.dumps(
            {
                "trace_id": format(context.trace_id, "032x"),
                "span_id": format(context.span_id, "016x"),
            }
        )
    )
    if span_exporter.failed or not metrics_ok or not logs_ok:
        print("an export failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
