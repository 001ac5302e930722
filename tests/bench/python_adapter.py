"""The Python adapter's overhead per call, beside a bare OpenTelemetry SDK span, in one process.

Run from the repository root, with the adapter (``candor``) and ``opentelemetry-sdk`` installed::

    python tests/bench/python_adapter.py                 # a table
    python tests/bench/python_adapter.py --json          # the same figures as JSON
    python tests/bench/python_adapter.py --iterations 200000 --rounds 50

What is measured, per call, in microseconds (median and p99 of every timed call, each call timed
on its own with :func:`time.perf_counter_ns`, after a warm-up; the timed calls are split into
rounds that interleave the cases, in an order that rotates, so that a change of load on the
machine falls on every case alike):

``bare``
    The OpenTelemetry SDK alone: start a ``tool.call`` span with the attributes the adapter
    puts on one, add one ``tool.outcome`` event with seven attributes, set an error status, end
    it. What a hand-instrumented tool call costs. (``start_span``, not
    ``start_as_current_span``: the adapter does not make its span current either, and the
    cheaper baseline is the stricter one.)
``bare + counter``
    The same plus one synchronous ``Counter.add`` with three attributes: the adapter counts
    every call too, so this is the like-for-like baseline. (The adapter's ``tool.outcomes`` is
    an observable counter: a call adds one to a total under a lock, which is cheaper than
    ``Counter.add``, and the totals are read at collection.)
``adapter success``
    ``adapter.call(fn)`` whose ``fn`` returns a prebuilt 200 with a small JSON body, classified
    by an :class:`~candor.HttpClassifier`: a Success. By default the adapter records no span for
    a Success, only the count.
``adapter success, traced``
    The same with ``trace_every_call=True``: one span, no event, the count.
``adapter failure``
    ``adapter.call(fn)`` whose ``fn`` returns a prebuilt 401: an AccessFailure ``auth``, which
    is permanent, so one attempt, one span with one ``tool.outcome`` event, the count, and the
    event's mirror record on the ``candor.outcome`` logger. This is the cost per failure event.

The tool functions return prebuilt objects and do nothing else, so the adapter figures are the
adapter's own work: the attempt context, classification, the retry decision, the envelope and
telemetry. The adapter runs with its defaults (the real clock and random jitter): nothing is
retried, so nothing sleeps, and a check fails loudly if any call makes a second attempt.

The OpenTelemetry setup is the same for every case, and does the work a production setup does
on the calling thread, with no network:

- a ``TracerProvider`` (default sampler, always on) with a ``BatchSpanProcessor`` over an
  exporter that counts and discards. The batch processor is what production runs: ending a span
  enqueues it and a background thread exports. A ``SimpleSpanProcessor`` would export on the
  calling thread and add its context attach/detach to every span, the same absolute cost to
  every case with a span, which flatters the ratios a little. ``--processor simple`` measures
  that too.
- a ``MeterProvider`` with an ``InMemoryMetricReader``, which is collected only after the
  timing: an instrument's cost on the calling thread does not depend on the reader, and a
  periodic reader collects once a minute by default.
- the ``candor.outcome`` logger has a ``NullHandler`` and does not propagate: the record is made
  (the adapter's cost) but not formatted or written (the application's). ``--mirror-log off``
  raises the logger's level above WARNING instead, as an application that does not want the
  mirror would.

The script reports; it does not assert: it exits 0 whether or not the goal (each adapter case at
most 1.5 times the bare span's median) is met. Expect a few microseconds of noise on a loaded
machine: the spread of the rounds' medians shows how much.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, Final

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from candor import Adapter, AttemptContext, HttpClassifier, HttpResponse, NotFound
from candor.names import OUTCOME_EVENT, OUTCOMES_COUNTER, TOOL_CALL_SPAN, attr
from candor.telemetry import MIRROR_LOGGER

GOAL: Final = 1.5
"""The most an adapter call may cost, as a multiple of the bare span's median."""

TARGET: Final = "https://search.example/v1/items"
SUCCESS_BODY: Final = b'{"items":[1,2],"next":null}'
FAILURE_BODY: Final = b'{"error":"invalid credentials"}'


class DiscardingExporter(SpanExporter):
    """Counts the spans and events it is handed, and drops them."""

    def __init__(self) -> None:
        self.spans = 0
        self.events = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Counts, and drops."""
        self.spans += len(spans)
        self.events += sum(len(span.events) for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""


@dataclass
class Case:
    """One measured case: what it calls, and what each call should leave behind."""

    name: str
    run: Callable[[], object]
    spans: int
    """Spans exported per call."""
    events: int
    """Span events exported per call."""
    counted: Callable[[], int] = field(default=lambda: 0)
    """How many calls the case's counter holds (read after the timing)."""
    samples: list[int] = field(default_factory=list)
    round_medians: list[float] = field(default_factory=list)
    calls: int = 0


def _json_response(status: int, body: bytes) -> HttpResponse:
    return HttpResponse(
        status,
        {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "X-Request-Id": "req-42",
        },
        body,
    )


def _sum_points(reader: InMemoryMetricReader, name: str) -> dict[str, int]:
    """The points of the counter ``name`` summed by ``tool.name``."""
    sums: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    tool = str((point.attributes or {}).get(attr.TOOL_NAME))
                    sums[tool] = sums.get(tool, 0) + int(point.value)  # type: ignore[union-attr]
    return sums


class Bench:
    """The shared OpenTelemetry setup, and the cases that run on it."""

    def __init__(self, processor: str, mirror_log: str) -> None:
        self.exporter = DiscardingExporter()
        span_processor: SpanProcessor = (
            BatchSpanProcessor(self.exporter)
            if processor == "batch"
            else SimpleSpanProcessor(self.exporter)
        )
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(span_processor)
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        mirror = logging.getLogger(MIRROR_LOGGER)
        mirror.propagate = False
        mirror.addHandler(logging.NullHandler())
        mirror.setLevel(logging.INFO if mirror_log == "null" else logging.CRITICAL)
        self.cases = [
            self._bare("bare", with_counter=False),
            self._bare("bare + counter", with_counter=True),
            self._adapter("adapter success", 200, SUCCESS_BODY, traced=False),
            self._adapter("adapter success, traced", 200, SUCCESS_BODY, traced=True),
            self._adapter("adapter failure", 401, FAILURE_BODY, traced=False),
        ]

    def _counted(self, tool: str, name: str) -> Callable[[], int]:
        def counted() -> int:
            return _sum_points(self.reader, name).get(tool, 0)

        return counted

    def _bare(self, name: str, *, with_counter: bool) -> Case:
        tool = name.replace(" ", "")
        tracer = self.tracer_provider.get_tracer("bench-bare", "1")
        meter = self.meter_provider.get_meter("bench-bare", "1")
        span_attributes: dict[str, AttributeValue] = {
            attr.TOOL_NAME: tool,
            attr.TOOL_TARGET: TARGET,
            attr.OUTCOME_CLASS: "access_failure",
            attr.FAILURE_KIND: "auth",
        }
        event_attributes: dict[str, AttributeValue] = {
            attr.TOOL_NAME: tool,
            attr.TOOL_TARGET: TARGET,
            attr.OUTCOME_CLASS: "access_failure",
            attr.FAILURE_KIND: "auth",
            attr.RETRY_ATTEMPT: 1,
            attr.HTTP_STATUS_CODE: 401,
            attr.ERROR_TYPE: "401",
        }
        count_attributes: dict[str, AttributeValue] = {
            attr.TOOL_NAME: tool,
            attr.TOOL_TARGET: TARGET,
            attr.OUTCOME_CLASS: "access_failure",
        }
        status = Status(StatusCode.ERROR, "HTTP 401 Unauthorized")

        def run() -> None:
            span = tracer.start_span(
                TOOL_CALL_SPAN, kind=SpanKind.CLIENT, attributes=span_attributes
            )
            span.add_event(OUTCOME_EVENT, event_attributes)
            span.set_status(status)
            span.end()

        if not with_counter:
            return Case(name, run, spans=1, events=1)
        counter = meter.create_counter(OUTCOMES_COUNTER, unit="{call}")

        def run_counted() -> None:
            run()
            counter.add(1, count_attributes)

        return Case(
            name,
            run_counted,
            spans=1,
            events=1,
            counted=self._counted(tool, OUTCOMES_COUNTER),
        )

    def _adapter(self, name: str, status: int, body: bytes, *, traced: bool) -> Case:
        tool = name.replace(" ", "").replace(",", "-")
        adapter: Adapter[HttpResponse] = Adapter(
            tool,
            TARGET,
            HttpClassifier(NotFound.UNREACHABLE, items_at="/items"),
            trace_every_call=traced,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
        )
        response = _json_response(status, body)
        expected = "success" if status < 300 else "access_failure"

        def tool_fn(_attempt: AttemptContext) -> HttpResponse:
            return response

        def run() -> None:
            envelope = adapter.call(tool_fn)
            if len(envelope.attempts) != 1:
                raise RuntimeError(f"{name}: {len(envelope.attempts)} attempts, not 1")

        check = adapter.call(tool_fn)
        if check.outcome_class.value != expected:
            raise RuntimeError(f"{name}: {check.outcome_class.value}, not {expected}")
        failing = status >= 300
        return Case(
            name,
            run,
            spans=1 if traced or failing else 0,
            events=1 if failing else 0,
            counted=self._counted(tool, OUTCOMES_COUNTER),
            calls=1,  # the check above
        )

    def run(self, iterations: int, rounds: int, warmup: int) -> None:
        """Warms every case up, then times ``iterations`` calls of each in interleaved rounds."""
        for case in self.cases:
            for _ in range(warmup):
                case.run()
            case.calls += warmup
        clock = time.perf_counter_ns
        for round_ in range(rounds):
            # Rotate the order so that no case always runs right after the same other one.
            turn = round_ % len(self.cases)
            count = iterations // rounds + (1 if round_ < iterations % rounds else 0)
            for case in self.cases[turn:] + self.cases[:turn]:
                run = case.run
                samples = [0] * count
                gc.collect()
                for i in range(count):
                    started = clock()
                    run()
                    samples[i] = clock() - started
                case.samples.extend(samples)
                case.round_medians.append(statistics.median(samples) / 1000)
                case.calls += count

    def checks(self) -> list[str]:
        """What the run should have recorded and did not (empty when all is well)."""
        self.tracer_provider.force_flush()
        problems: list[str] = []
        spans = sum(case.spans * case.calls for case in self.cases)
        events = sum(case.events * case.calls for case in self.cases)
        if self.exporter.spans != spans:
            problems.append(f"{self.exporter.spans} spans exported, {spans} expected (dropped?)")
        if self.exporter.events != events:
            problems.append(f"{self.exporter.events} events exported, {events} expected")
        for case in self.cases[1:]:
            counted = case.counted()
            if counted != case.calls:
                problems.append(f"{case.name}: {counted} calls counted, {case.calls} made")
        return problems

    def shutdown(self) -> None:
        """Stops the batch processor's thread."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _timer_floor_ns() -> float:
    """The median cost of the timing itself: two clock reads around a no-op call."""
    clock = time.perf_counter_ns

    def nothing() -> None:
        pass

    samples = []
    for _ in range(20_000):
        started = clock()
        nothing()
        samples.append(clock() - started)
    return float(statistics.median(samples))


def _percentile(sorted_samples: list[int], fraction: float) -> float:
    index = min(len(sorted_samples) - 1, round(fraction * (len(sorted_samples) - 1)))
    return float(sorted_samples[index])


def report(bench: Bench, args: argparse.Namespace, floor_ns: float) -> dict[str, Any]:
    """The figures, as the JSON output holds them."""
    medians = {case.name: statistics.median(case.samples) / 1000 for case in bench.cases}
    bare, bare_counter = medians["bare"], medians["bare + counter"]
    cases = []
    for case in bench.cases:
        ordered = sorted(case.samples)
        median = medians[case.name]
        cases.append(
            {
                "case": case.name,
                "median_us": round(median, 3),
                "p99_us": round(_percentile(ordered, 0.99) / 1000, 3),
                "round_medians_us": [round(m, 3) for m in case.round_medians],
                "ratio_to_bare": round(median / bare, 3),
                "ratio_to_bare_counter": round(median / bare_counter, 3),
                "within_goal": None if case.name.startswith("bare") else median <= GOAL * bare,
                "samples": len(case.samples),
            }
        )
    return {
        "python": platform.python_version(),
        "opentelemetry_sdk": version("opentelemetry-sdk"),
        "candor_adapter": version("candor-adapter"),
        "processor": args.processor,
        "mirror_log": args.mirror_log,
        "iterations": args.iterations,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "timer_floor_us": round(floor_ns / 1000, 3),
        "goal_ratio_to_bare": GOAL,
        "cases": cases,
        "problems": bench.checks(),
    }


def print_table(figures: dict[str, Any]) -> None:
    """The figures as a table, then the verdict."""
    print(
        f"Python {figures['python']}, opentelemetry-sdk {figures['opentelemetry_sdk']}, "
        f"candor-adapter {figures['candor_adapter']}; {figures['processor']} span processor, "
        f"mirror log {figures['mirror_log']}; {figures['iterations']} calls per case in "
        f"{figures['rounds']} interleaved rounds, after {figures['warmup']} warm-up calls; "
        f"timer floor {figures['timer_floor_us']:.3f} µs (included in every figure)"
    )
    header = (
        f"{'case':<26}{'median µs':>10}{'p99 µs':>9}{'× bare':>8}{'× bare+ctr':>11}"
        "  rounds' medians µs"
    )
    print(header)
    print("-" * len(header))
    for case in figures["cases"]:
        spread = f"{min(case['round_medians_us']):.2f}–{max(case['round_medians_us']):.2f}"
        print(
            f"{case['case']:<26}{case['median_us']:>10.2f}{case['p99_us']:>9.2f}"
            f"{case['ratio_to_bare']:>8.2f}{case['ratio_to_bare_counter']:>11.2f}  {spread}"
        )
    verdicts = [
        f"{case['case']} {case['ratio_to_bare']:.2f}× "
        + ("within" if case["within_goal"] else "OVER")
        for case in figures["cases"]
        if case["within_goal"] is not None
    ]
    print(
        f"goal: each adapter case at most {GOAL}× the bare span (medians): " + "; ".join(verdicts)
    )
    sys.stdout.flush()
    for problem in figures["problems"]:
        print(f"CHECK FAILED: {problem}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark and prints its figures; exits 0 whatever they are."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--iterations",
        type=int,
        default=60_000,
        help="timed calls per case, in all rounds together (default 60000)",
    )
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds (default 30)")
    parser.add_argument(
        "--warmup", type=int, default=3_000, help="untimed calls per case first (default 3000)"
    )
    parser.add_argument(
        "--processor",
        choices=("batch", "simple"),
        default="batch",
        help="the span processor (default batch, as in production)",
    )
    parser.add_argument(
        "--mirror-log",
        choices=("null", "off"),
        default="null",
        help="the candor.outcome logger: records made into a NullHandler, or disabled",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= args.iterations or args.warmup < 0:
        parser.error("--rounds must be 1 to --iterations, --warmup not negative")
    floor_ns = _timer_floor_ns()
    bench = Bench(args.processor, args.mirror_log)
    try:
        bench.run(args.iterations, args.rounds, args.warmup)
        figures = report(bench, args, floor_ns)
    finally:
        bench.shutdown()
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
