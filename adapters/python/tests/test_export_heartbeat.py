"""``ExportHeartbeat``: the gauge ``candor.adapter.export_interval`` (the contract's 10.6)."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Metric,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)

from candor import Adapter, ExportHeartbeat, FnClassifier, Success, names

from .conftest import Telemetry


def gauges(data: MetricsData | None) -> list[Metric]:
    """Every ``candor.adapter.export_interval`` metric in one collection."""
    return [
        metric
        for resource in (data.resource_metrics if data else [])
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == names.EXPORT_INTERVAL_GAUGE
    ]


def values(data: MetricsData | None) -> list[tuple[dict[str, Any], int | float]]:
    """The gauge's data points in one collection, as (attributes, value) pairs."""
    return [
        (dict(point.attributes or {}), point.value)  # type: ignore[union-attr]
        for metric in gauges(data)
        for point in metric.data.data_points
    ]


def test_the_gauge_reports_the_interval_in_seconds_without_attributes(
    telemetry: Telemetry,
) -> None:
    ExportHeartbeat(15, meter_provider=telemetry.meter_provider)
    data = telemetry.reader.get_metrics_data()
    (metric,) = gauges(data)
    assert metric.unit == names.EXPORT_INTERVAL_GAUGE_UNIT == "s"
    assert values(data) == [({}, 15.0)]
    # Every collection says it again.
    assert values(telemetry.reader.get_metrics_data()) == [({}, 15.0)]


def test_the_gauge_is_reported_under_the_adapters_scope_beside_the_counter(
    telemetry: Telemetry,
) -> None:
    def classify(rows: list[int]) -> Success:
        return Success(rows)

    ExportHeartbeat(0.5, meter_provider=telemetry.meter_provider)
    adapter = Adapter(
        "queue",
        "amqp://broker/q",
        FnClassifier(classify),
        meter_provider=telemetry.meter_provider,
    )
    adapter.call(lambda _context: [1, 2])
    data = telemetry.reader.get_metrics_data()
    assert data is not None
    scopes = {
        scope.scope.name: {metric.name for metric in scope.metrics}
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
    }
    assert {names.EXPORT_INTERVAL_GAUGE, names.OUTCOMES_COUNTER} <= scopes[names.ADAPTER_NAME]
    assert values(data) == [({}, 0.5)]


def test_after_final_the_gauge_reports_zero(telemetry: Telemetry) -> None:
    heartbeat = ExportHeartbeat(60.0, meter_provider=telemetry.meter_provider)
    assert values(telemetry.reader.get_metrics_data()) == [({}, 60.0)]
    heartbeat.final()
    assert values(telemetry.reader.get_metrics_data()) == [({}, 0.0)]
    heartbeat.final()
    assert values(telemetry.reader.get_metrics_data()) == [({}, 0.0)]
    assert heartbeat.interval_s == 60.0


@pytest.mark.parametrize("interval", [0, 0.0, -1, -0.5, math.nan, math.inf, -math.inf, True])
def test_an_interval_that_is_not_a_finite_positive_number_is_refused(interval: float) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(interval))):
        ExportHeartbeat(interval)


class RecordingExporter(MetricExporter):
    """Keeps every batch the periodic reader exports, in order."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._batches: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        with self._lock:
            self._batches.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass

    def batches(self) -> Sequence[MetricsData]:
        with self._lock:
            return list(self._batches)


def test_final_then_shutdown_makes_the_last_export_say_zero() -> None:
    exporter = RecordingExporter()
    # An interval long enough that only the flush and the shutdown export.
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=60_000)
    meter_provider = MeterProvider(metric_readers=[reader])
    heartbeat = ExportHeartbeat(60_000 / 1000, meter_provider=meter_provider)

    assert meter_provider.force_flush(timeout_millis=10_000)
    heartbeat.final()
    meter_provider.shutdown(timeout_millis=10_000)

    batches = exporter.batches()
    # The flush's export, then the one the shutdown collects after final().
    assert len(batches) >= 2
    assert values(batches[0]) == [({}, 60.0)]
    assert values(batches[-1]) == [({}, 0.0)]
