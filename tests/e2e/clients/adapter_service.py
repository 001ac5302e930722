"""A Python service that calls a scripted HTTP tool through Candor's Python adapter.

The adapter (``candor``, installed from ``adapters/python``) reports through the official
OpenTelemetry Python SDK, which exports OTLP over gRPC to the collector under test. Reads a JSON
spec on stdin, written by the Rust end-to-end suite (which owns every wire name and script):
  {"endpoint": "http://127.0.0.1:PORT", "resource": {...}, "tool": "...", "target": "...",
   "max_attempts": n, "jitter": fraction, "items_at": "/pointer", "total_at": "/pointer",
   "calls": [[{"status": n, "body": "..."}, ...], ...]}
Each call answers its attempts with its responses in order. Prints {"classes": [...]}, the
class of every call. Exits 1 when a flush did not finish in time.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from typing import TypedDict

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from candor import (
    Adapter,
    AttemptContext,
    ExportHeartbeat,
    FixedJitter,
    HttpClassifier,
    HttpResponse,
    NotFound,
    RetryPolicy,
)

EXPORT_INTERVAL_MILLIS = 500
"""The periodic metric reader's interval, which the export heartbeat reports."""


class Response(TypedDict):
    """One scripted response."""

    status: int
    body: str


class Spec(TypedDict):
    """What the suite asks for."""

    endpoint: str
    resource: dict[str, str]
    tool: str
    target: str
    max_attempts: int
    jitter: float
    items_at: str
    total_at: str
    calls: list[list[Response]]


def main() -> int:
    """Makes the calls, flushes both signals and reports the classes."""
    spec: Spec = json.load(sys.stdin)
    resource = Resource.create(dict(spec["resource"]))
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=spec["endpoint"], insecure=True))
    )
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=spec["endpoint"], insecure=True),
        export_interval_millis=EXPORT_INTERVAL_MILLIS,
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    # candor.adapter.export_interval in every export: the seconds until the next one, and 0 in
    # the one at shutdown, so that the collector reads this instance as stopped, not silent.
    heartbeat = ExportHeartbeat(EXPORT_INTERVAL_MILLIS / 1000, meter_provider=meter_provider)
    adapter = Adapter(
        spec["tool"],
        spec["target"],
        HttpClassifier(NotFound.UNREACHABLE, items_at=spec["items_at"], total_at=spec["total_at"]),
        retry=RetryPolicy(max_attempts=spec["max_attempts"]),
        jitter=FixedJitter(spec["jitter"]),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )

    classes: list[str] = []
    for script in spec["calls"]:
        responses = deque(script)

        def attempt(
            _context: AttemptContext, responses: deque[Response] = responses
        ) -> HttpResponse:
            response = responses.popleft()
            return HttpResponse(response["status"], body=response["body"].encode())

        classes.append(adapter.call(attempt).outcome_class.value)

    spans_ok = tracer_provider.force_flush(timeout_millis=20_000)
    metrics_ok = meter_provider.force_flush(timeout_millis=20_000)
    # The shutdown collects once more: that last export says no export follows.
    heartbeat.final()
    meter_provider.shutdown()
    tracer_provider.shutdown()
    print(json.dumps({"classes": classes}))
    if not (spans_ok and metrics_ok):
        print("an export failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
