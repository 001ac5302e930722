"""The adapter's call forms: synchronous, asynchronous, decorated and observed, on a fake clock."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler, SamplingResult
from opentelemetry.trace import Link, NoOpTracerProvider, SpanKind, TraceState
from opentelemetry.util.types import Attributes

from candor import (
    ADAPTER_VERSION,
    AccessFailure,
    AccessFailureKind,
    Adapter,
    AttemptContext,
    Authority,
    BodyTimedOut,
    Classification,
    Empty,
    Envelope,
    Evidence,
    EvidenceKind,
    FixedJitter,
    FnClassifier,
    HttpArrival,
    HttpClassifier,
    HttpExchange,
    HttpResponse,
    Lifecycle,
    LifecycleState,
    NextAction,
    NotFound,
    Operation,
    OutcomeClass,
    Partial,
    PartialKind,
    Resource,
    RetryAction,
    RetryPolicy,
    StatusUrl,
    Success,
    TransportError,
    TransportErrorKind,
    set_logger_provider,
)
from candor.names import UNRECORDED_SPANS_COUNTER
from candor.sampling import KeepToolFailures
from candor.testing import FakeClock

from .conftest import Telemetry

START = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
START_NS = int(START.timestamp()) * 1_000_000_000
MS = 1_000_000


def make(telemetry: Telemetry, clock: FakeClock, **settings: object) -> Adapter[HttpExchange]:
    return Adapter(
        "search",
        "https://user:pw@search.example/v1/items?api_key=k",
        HttpClassifier(NotFound.CONFIRMED_ABSENT, items_at="/items"),
        jitter=FixedJitter(0.5),
        clock=clock,
        meter_provider=telemetry.meter_provider,
        **{  # type: ignore[arg-type]
            "tracer_provider": telemetry.tracer_provider,
            "logger_provider": telemetry.logger_provider,
            **settings,
        },
    )


def ok(clock: FakeClock, body: bytes = b'{"items":[1]}') -> HttpResponse:
    return HttpResponse(200, {}, body, received_at=clock.wall_ns())


def busy(clock: FakeClock) -> HttpResponse:
    return HttpResponse(503, {"Retry-After": "1"}, b"busy", received_at=clock.wall_ns())


def broken(clock: FakeClock) -> HttpResponse:
    return HttpResponse(500, {}, b"oops", received_at=clock.wall_ns())


def reset(clock: FakeClock) -> HttpExchange:
    return TransportError(TransportErrorKind.RESET, "connection reset by peer")


def refused(clock: FakeClock) -> HttpExchange:
    return TransportError(TransportErrorKind.CONNECT, "connection refused")


NOT_SENT_AGAIN = "the request may have been applied, so it was not sent again: "
KEY = re.compile(r"candor-[0-9a-f]{32}")


class Script:
    """A tool that plays its answers in turn and records what each attempt was told."""

    def __init__(self, clock: FakeClock, *answers: Callable[[FakeClock], HttpExchange]) -> None:
        self.clock = clock
        self.answers = deque(answers)
        self.seen: list[AttemptContext] = []

    def __call__(self, context: AttemptContext) -> HttpExchange:
        self.seen.append(context)
        self.clock.advance(timedelta(milliseconds=20))
        return self.answers.popleft()(self.clock)

    def attempt_async(self) -> Callable[[AttemptContext], Awaitable[HttpExchange]]:
        """The same tool, answering asynchronously."""

        async def attempt(context: AttemptContext) -> HttpExchange:
            return self(context)

        return attempt

    @property
    def keys(self) -> list[str | None]:
        return [context.idempotency_key for context in self.seen]


def test_the_sync_path_retries_with_the_clock_and_records_the_schedule(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    answers = deque([busy, busy, ok])
    seen: list[AttemptContext] = []

    def attempt(context: AttemptContext) -> HttpExchange:
        seen.append(context)
        clock.advance(timedelta(milliseconds=40))
        return answers.popleft()(clock)

    envelope = adapter.call(attempt)
    assert isinstance(envelope.outcome, Success)
    assert [context.number for context in seen] == [1, 2, 3]
    assert seen[0].timeout == timedelta(seconds=10)
    assert seen[0].timeout_seconds == 10.0
    assert clock.slept == [1000 * MS, 1000 * MS]
    assert [a.started_at for a in envelope.attempts] == [
        START,
        START + timedelta(milliseconds=1040),
        START + timedelta(milliseconds=2080),
    ]
    assert envelope.provenance.finished_at == START + timedelta(milliseconds=2120)
    assert envelope.target == "https://REDACTED@search.example/v1/items?api_key=REDACTED"
    [span] = telemetry.spans()
    assert [event.name for event in span.events] == ["tool.outcome", "tool.outcome"]
    assert telemetry.outcomes() == {"success": 1, "empty": 0, "partial": 0, "access_failure": 0}


def test_a_sync_attempt_that_returns_after_its_timeout_timed_out(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry, clock, attempt_timeout=timedelta(seconds=2), retry=RetryPolicy.no_retry()
    )

    def late(context: AttemptContext) -> HttpExchange:
        clock.advance(timedelta(seconds=3))
        return ok(clock)

    envelope = adapter.call(late)
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.TIMEOUT
    assert envelope.outcome.failure.message == "no answer within the attempt timeout of 2s"
    assert envelope.attempts[0].duration_ms == 3000


def test_a_sync_attempt_whose_body_was_arriving_when_its_time_ran_out_is_what_arrived(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry, clock, attempt_timeout=timedelta(seconds=2), retry=RetryPolicy.no_retry()
    )

    def stalled(context: AttemptContext) -> HttpExchange:
        clock.advance(timedelta(milliseconds=40))
        arrival = context.receiving(HttpArrival(200, received_at=clock.wall_ns()))
        arrival.add(b'{"items":[1,2,')
        clock.advance(timedelta(milliseconds=2010))
        return ok(clock)  # late: dropped for what had arrived when the time ran out

    envelope = adapter.call(stalled)
    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.payload == '{"items":[1,2,'
    assert envelope.outcome.truncation.kind is PartialKind.MID_STREAM
    assert envelope.outcome.truncation.dropped == (
        "the rest of the body (the attempt's 2s ran out while it was arriving)"
    )
    assert envelope.attempts[0].retry_action is RetryAction.ACCEPT_PARTIAL
    assert envelope.attempts[0].duration_ms == 2050

    def cut_by_its_client(context: AttemptContext) -> HttpExchange:
        arrival = context.receiving(HttpArrival(200, received_at=clock.wall_ns()))
        arrival.add(b"[1,")
        clock.advance(timedelta(seconds=2))
        return arrival.finish(BodyTimedOut(context.timeout_ns))

    envelope = adapter.call(cut_by_its_client)
    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.payload == "[1,"


def test_a_sync_attempt_whose_answer_arrived_whole_in_time_is_that_answer(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry, clock, attempt_timeout=timedelta(seconds=2), retry=RetryPolicy.no_retry()
    )

    def slow_after_reading(context: AttemptContext) -> HttpExchange:
        arrival = context.receiving(HttpArrival(200, received_at=clock.wall_ns()))
        arrival.add(b'{"items":[1]}')
        response = arrival.finish()
        clock.advance(timedelta(seconds=3))
        return response

    envelope = adapter.call(slow_after_reading)
    assert isinstance(envelope.outcome, Success)
    assert envelope.attempts[0].duration_ms == 3000


def test_a_late_arrival_is_no_answer_for_a_classifier_that_does_not_read_arrivals(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    http = HttpClassifier(NotFound.UNREACHABLE)
    adapter: Adapter[HttpExchange] = Adapter(
        "search",
        "https://search.example/v1/items",
        FnClassifier(lambda raw: http.classify(raw).outcome),
        attempt_timeout=timedelta(seconds=2),
        retry=RetryPolicy.no_retry(),
        clock=clock,
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
    )

    def stalled(context: AttemptContext) -> HttpExchange:
        context.receiving(HttpArrival(200)).add(b"[1,")
        clock.advance(timedelta(seconds=3))
        return HttpResponse(200, body=b"[1,2]")

    envelope = adapter.call(stalled)
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.TIMEOUT


def test_an_observed_attempt_whose_body_was_arriving_when_its_time_ran_out(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock, attempt_timeout=timedelta(seconds=2))
    with adapter.attempt() as observed:
        arrival = observed.context.receiving(HttpArrival(500, received_at=clock.wall_ns()))
        arrival.add(b"upstream overlo")
        clock.advance(timedelta(seconds=3))
        observed.record(TransportError(TransportErrorKind.TIMEOUT, "read timed out"))
    outcome = observed.envelope.outcome
    assert isinstance(outcome, AccessFailure)
    assert outcome.failure.status == 500, "a failing status is classified by its status"


@pytest.mark.parametrize("client_ms", [40, 50, 60])
def test_an_async_attempt_cut_mid_body_is_what_arrived_whichever_timer_fires_first(
    telemetry: Telemetry, client_ms: int
) -> None:
    adapter = Adapter(
        "search",
        "https://search.example/v1/items",
        HttpClassifier(NotFound.UNREACHABLE, items_at="/items"),
        attempt_timeout=timedelta(milliseconds=50),
        retry=RetryPolicy.no_retry(),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
    )

    async def stalled(context: AttemptContext) -> HttpExchange:
        arrival = context.receiving(HttpArrival(200))
        arrival.add(b'{"items":[1,2,')
        # The client's own reading stops at the attempt's time too: before, with or after
        # the adapter's timer.
        await asyncio.sleep(client_ms / 1000)
        return arrival.finish(BodyTimedOut(context.timeout_ns))

    envelope = asyncio.run(adapter.acall(stalled))
    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.payload == '{"items":[1,2,'
    assert envelope.outcome.truncation.dropped == (
        "the rest of the body (the attempt's 0.05s ran out while it was arriving)"
    )


def test_an_async_attempt_with_no_status_when_its_time_ran_out_timed_out(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry, clock, attempt_timeout=timedelta(seconds=2), retry=RetryPolicy.no_retry()
    )

    async def silent(context: AttemptContext) -> HttpExchange:
        await asyncio.get_running_loop().create_future()
        raise AssertionError("never answers")

    envelope = asyncio.run(adapter.acall(silent))
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.TIMEOUT
    assert envelope.attempts[0].duration_ms == 2000


def test_the_deadline_cuts_the_last_attempt(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry,
        clock,
        attempt_timeout=timedelta(seconds=2),
        deadline=timedelta(milliseconds=2500),
        retry=RetryPolicy(max_attempts=5),
    )

    async def hang(context: AttemptContext) -> HttpExchange:
        await asyncio.get_running_loop().create_future()
        raise AssertionError("never answers")  # pragma: no cover

    envelope = asyncio.run(adapter.acall(hang))
    assert isinstance(envelope.outcome, AccessFailure)
    assert [a.failure_kind for a in envelope.attempts] == ["timeout", "deadline"]
    assert envelope.outcome.failure.message == (
        "the call's deadline ran out 0.45s into the attempt, with no answer"
    )
    assert envelope.attempts[-1].retry_action is RetryAction.EXHAUSTED
    assert clock.elapsed_ns == 2500 * MS


def test_a_raised_transport_error_is_classified(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START), retry=RetryPolicy.no_retry())

    def refused(context: AttemptContext) -> HttpExchange:
        raise TransportError(TransportErrorKind.CONNECT, "refused by http://u:p@h/x")

    envelope = adapter.call(refused)
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.message == "refused by http://REDACTED@h/x"
    assert envelope.next_actions == (NextAction.RETRY, NextAction.ESCALATE)


def test_an_exception_that_is_no_outcome_propagates_and_counts_nothing(
    telemetry: Telemetry,
) -> None:
    adapter = make(telemetry, FakeClock(START))

    def broken(context: AttemptContext) -> HttpExchange:
        raise KeyError("a bug in the calling code")

    with pytest.raises(KeyError):
        adapter.call(broken)

    async def broken_async(context: AttemptContext) -> HttpExchange:
        raise KeyError("a bug in the calling code")

    with pytest.raises(KeyError):
        asyncio.run(adapter.acall(broken_async))
    assert telemetry.outcomes() == {"success": 0, "empty": 0, "partial": 0, "access_failure": 0}


def test_the_decorator_passes_the_attempt_and_returns_the_envelope(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    numbers: list[int] = []

    @adapter.wrap
    def lookup(key: str, *, attempt: AttemptContext) -> HttpExchange:
        numbers.append(attempt.number)
        return HttpResponse(404 if key == "gone" else 200, body=b'{"items":[1]}')

    @adapter.wrap
    async def lookup_async(key: str, *, attempt: AttemptContext) -> HttpExchange:
        return HttpResponse(200, body=b'{"items":[]}')

    assert isinstance(lookup("gone"), Envelope)
    assert isinstance(lookup("gone").outcome, Empty)
    assert isinstance(lookup("here").outcome, Success)
    assert numbers == [1, 1, 1]
    assert lookup.__name__ == "lookup"
    assert isinstance(asyncio.run(lookup_async("x")).outcome, Empty)


def test_the_context_manager_records_one_attempt(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    with adapter.attempt() as observed:
        assert observed.context.number == 1
        clock.advance(timedelta(milliseconds=25))
        observed.record(ok(clock))
    assert isinstance(observed.envelope.outcome, Success)
    assert observed.envelope.attempts[0].duration_ms == 25
    assert observed.envelope.provenance.finished_at == START + timedelta(milliseconds=25)


def test_the_context_manager_never_retries(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    with adapter.attempt() as observed:
        observed.record(busy(clock))
    envelope = observed.envelope
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.attempts[0].retry_action is RetryAction.EXHAUSTED
    assert envelope.next_actions == (NextAction.RETRY, NextAction.ESCALATE)
    assert clock.slept == []
    [span] = telemetry.spans()
    assert span.events[0].attributes is not None
    assert span.events[0].attributes["tool.retry.max_attempts"] == 1


def test_the_context_manager_classifies_a_raised_transport_error(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START))
    with adapter.attempt() as observed:
        raise TransportError(TransportErrorKind.RESET, "connection reset by peer")
    assert isinstance(observed.envelope.outcome, AccessFailure)
    assert observed.envelope.outcome.failure.error_type == "connection_reset"


def test_the_context_manager_lets_other_exceptions_through(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START))
    with pytest.raises(ZeroDivisionError), adapter.attempt() as observed:
        _ = 1 / 0
    with pytest.raises(RuntimeError, match="when the with block is left"):
        _ = observed.envelope
    with pytest.raises(RuntimeError, match="recorded no result"), adapter.attempt():
        pass
    with adapter.attempt() as twice:
        twice.record(ok(FakeClock(START)))
        with pytest.raises(RuntimeError, match="record was called twice"):
            twice.record(ok(FakeClock(START)))
    assert isinstance(twice.envelope.outcome, Success)
    assert telemetry.outcomes()["success"] == 1


def test_the_context_manager_works_in_async_code(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START))

    async def run() -> Envelope:
        async with adapter.attempt() as observed:
            observed.record(HttpResponse(200, body=b'{"items":[1,2]}'))
        return observed.envelope

    assert isinstance(asyncio.run(run()).outcome, Success)


def test_the_counter_reports_every_class_from_the_start(telemetry: Telemetry) -> None:
    make(telemetry, FakeClock(START))
    assert telemetry.outcomes() == {"success": 0, "empty": 0, "partial": 0, "access_failure": 0}


def test_adapters_of_one_tool_share_a_series(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    for _ in range(2):
        make(telemetry, clock).call(lambda context: ok(clock))
    other = Adapter(
        "other",
        "https://other.example",
        HttpClassifier(NotFound.UNREACHABLE),
        meter_provider=telemetry.meter_provider,
        tracer_provider=telemetry.tracer_provider,
    )
    other.call(lambda context: HttpResponse(204))
    points = {
        (dict(key)["tool.name"], dict(key)["tool.outcome.class"]): value
        for key, value in telemetry.metric_points("tool.outcomes").items()
    }
    assert points[("search", "success")] == 2
    assert points[("other", "empty")] == 1
    assert len(points) == 8


def test_trace_every_call_records_a_span_for_a_success(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry, clock, trace_every_call=True, authority=Authority("svc-search", "tenant-7")
    )
    adapter.call(lambda context: ok(clock))
    [span] = telemetry.spans()
    assert span.events == ()
    assert span.attributes is not None
    assert span.attributes["tool.authority"] == "svc-search scope=tenant-7"
    assert span.attributes["tool.outcome.class"] == "success"
    assert "tool.failure.kind" not in span.attributes


def test_the_span_is_a_child_of_the_current_span(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    tracer = telemetry.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("agent.step") as parent:
        adapter.call(lambda context: HttpResponse(500))
    call = next(span for span in telemetry.spans() if span.name == "tool.call")
    assert call.parent is not None
    assert call.parent.span_id == parent.get_span_context().span_id


def test_a_dropped_failure_span_is_counted(telemetry: Telemetry) -> None:
    exporter = InMemorySpanExporter()
    dropping = TracerProvider(sampler=ALWAYS_OFF)
    dropping.add_span_processor(SimpleSpanProcessor(exporter))
    clock = FakeClock(START)
    adapter = make(telemetry, clock, tracer_provider=dropping, retry=RetryPolicy.no_retry())
    adapter.call(lambda context: HttpResponse(401))
    assert exporter.get_finished_spans() == ()
    [(key, value)] = telemetry.metric_points(UNRECORDED_SPANS_COUNTER).items()
    assert value == 1
    assert dict(key)["tool.outcome.class"] == "access_failure"


def test_keep_tool_failures_records_failure_spans_only(telemetry: Telemetry) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=KeepToolFailures(ALWAYS_OFF))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = FakeClock(START)
    adapter = make(
        telemetry,
        clock,
        tracer_provider=provider,
        trace_every_call=True,
        retry=RetryPolicy.no_retry(),
    )
    adapter.call(lambda context: HttpResponse(401))
    adapter.call(lambda context: ok(clock))
    [span] = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["tool.outcome.class"] == "access_failure"
    assert "KeepToolFailures" in KeepToolFailures(ALWAYS_OFF).get_description()


def test_a_partial_event_carries_coverage(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    envelope = adapter.call(
        lambda context: HttpResponse(200, {"X-Total-Count": "10"}, b'{"items":[1,2,3]}')
    )
    assert isinstance(envelope.outcome, Partial)
    [span] = telemetry.spans()
    assert span.events[0].attributes is not None
    assert dict(span.events[0].attributes) == {
        "tool.name": "search",
        "tool.target": "https://REDACTED@search.example/v1/items?api_key=REDACTED",
        "tool.outcome.class": "partial",
        "tool.failure.kind": "declared_total",
        "tool.retry.action": "accept_partial",
        "tool.retry.attempt": 1,
        "tool.retry.max_attempts": 3,
        "tool.partial.returned": 3,
        "tool.partial.expected": 10,
        "tool.coverage": "items 1-3 of 10",
        "tool.dropped": "7 item(s)",
        "tool.provenance.source_system": "search.example",
        "tool.provenance.adapter": ADAPTER_VERSION,
    }


def test_each_event_has_its_own_attributes_in_order(telemetry: Telemetry) -> None:
    """Events of one class, kind and action share their first attributes, never the rest."""
    clock = FakeClock(START)
    adapter = make(telemetry, clock, retry=RetryPolicy.no_retry())
    adapter.call(lambda context: HttpResponse(401, {"X-Request-Id": "req-1"}))
    adapter.call(lambda context: HttpResponse(403))
    adapter.call(lambda context: HttpResponse(503))
    events = [list((span.events[0].attributes or {}).items()) for span in telemetry.spans()]
    identity = [
        ("tool.name", "search"),
        ("tool.target", "https://REDACTED@search.example/v1/items?api_key=REDACTED"),
    ]
    provenance = [
        ("tool.provenance.source_system", "search.example"),
        ("tool.provenance.adapter", ADAPTER_VERSION),
    ]
    auth = [
        ("tool.outcome.class", "access_failure"),
        ("tool.failure.kind", "auth"),
        ("tool.retry.action", "permanent"),
        ("tool.retry.attempt", 1),
        ("tool.retry.max_attempts", 1),
    ]
    assert events == [
        [
            *identity,
            *auth,
            ("http.response.status_code", 401),
            ("error.type", "401"),
            ("tool.evidence.kind", "request_id"),
            ("tool.evidence.value", "req-1"),
            *provenance,
        ],
        [*identity, *auth, ("http.response.status_code", 403), ("error.type", "403"), *provenance],
        [
            *identity,
            ("tool.outcome.class", "access_failure"),
            ("tool.failure.kind", "server_error"),
            ("tool.retry.action", "exhausted"),
            ("tool.retry.attempt", 1),
            ("tool.retry.max_attempts", 1),
            ("http.response.status_code", 503),
            ("error.type", "503"),
            *provenance,
        ],
    ]


def test_only_the_terminal_event_carries_the_evidence(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock, retry=RetryPolicy(max_attempts=2))

    def answering(*answers: HttpResponse) -> list[dict[str, object]]:
        """The events of one call that gets ``answers`` in order."""
        pending = deque(answers)
        adapter.call(lambda context: pending.popleft())
        span = telemetry.spans()[-1]
        return [dict(event.attributes or {}) for event in span.events]

    retried, terminal = answering(
        HttpResponse(503, {"X-Request-Id": "req-1"}),
        HttpResponse(503, {"X-Request-Id": "req-2"}),
    )
    assert retried["tool.retry.action"] == "retry"
    assert "tool.evidence.kind" not in retried
    assert "tool.evidence.value" not in retried
    assert terminal["tool.retry.action"] == "exhausted"
    assert terminal["tool.evidence.kind"] == "request_id"
    assert terminal["tool.evidence.value"] == "req-2"
    assert list(terminal)[-4:] == [
        "tool.evidence.kind",
        "tool.evidence.value",
        "tool.provenance.source_system",
        "tool.provenance.adapter",
    ]

    # A Partial's event ends the call too.
    [partial] = answering(
        HttpResponse(200, {"X-Request-Id": "req-3", "X-Total-Count": "5"}, b'{"items":[1,2]}')
    )
    assert partial["tool.retry.action"] == "accept_partial"
    assert partial["tool.evidence.kind"] == "request_id"
    assert partial["tool.evidence.value"] == "req-3"

    # A call that a retry rescued has evidence but no terminal event: its one event has none.
    [rescued] = answering(
        HttpResponse(503, {"X-Request-Id": "req-4"}),
        HttpResponse(200, {"X-Request-Id": "req-5"}, b'{"items":[1]}'),
    )
    assert rescued["tool.retry.action"] == "retry"
    assert "tool.evidence.kind" not in rescued
    assert "tool.evidence.value" not in rescued


class RecordingSampler(Sampler):
    """Samples every span, and keeps the attributes each span started with."""

    def __init__(self) -> None:
        self.started: list[dict[str, object]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        self.started.append(dict(attributes or {}))
        return ALWAYS_ON.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return "RecordingSampler"


def test_a_failed_attempt_is_logged_when_it_ends_not_when_the_call_does(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    sampler = RecordingSampler()
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.exporter))
    adapter = make(telemetry, clock, tracer_provider=tracer_provider, actor="triage-bot")
    # What the pipeline could see while each attempt ran: log records, spans started and ended.
    seen: list[tuple[int, int, int]] = []

    def attempt(context: AttemptContext) -> HttpResponse:
        seen.append((len(telemetry.log_records()), len(sampler.started), len(telemetry.spans())))
        clock.advance(timedelta(milliseconds=30))
        return HttpResponse(503 if context.number < 3 else 500, received_at=clock.wall_ns())

    envelope = adapter.call(attempt)
    assert envelope.outcome_class is OutcomeClass.ACCESS_FAILURE
    assert seen == [(0, 0, 0), (1, 1, 0), (2, 1, 0)], (
        "during the third attempt the first two failures are logged, and no span has ended"
    )
    first_kind = str(envelope.attempts[0].failure_kind)
    assert sampler.started == [
        {
            "tool.name": "search",
            "tool.target": "https://REDACTED@search.example/v1/items?api_key=REDACTED",
            "tool.failure.kind": first_kind,
        }
    ], "the span started at the first event, with what a sampler keeps it by"
    [span] = telemetry.spans()
    assert span.start_time == START_NS
    # Three attempts of 30 ms, after backoffs of 50 and 100 ms (the jitter draws 0.5).
    assert span.end_time == START_NS + (30 + 50 + 30 + 100 + 30) * MS
    assert span.attributes is not None
    assert span.attributes["tool.outcome.class"] == "access_failure"
    assert span.attributes["tool.failure.kind"] == str(envelope.attempts[-1].failure_kind)
    actions = [(event.attributes or {})["tool.retry.action"] for event in span.events]
    assert actions == ["retry", "retry", "exhausted"]

    records = telemetry.log_records()
    assert len(records) == 2, "the terminal event is the span's only"
    context = span.get_span_context()
    assert context is not None
    for emitted, event in zip(records, span.events[:2], strict=True):
        record = emitted.log_record
        assert record.event_name == event.name == "tool.outcome"
        assert (record.trace_id, record.span_id) == (context.trace_id, context.span_id)
        assert record.timestamp == event.timestamp
        assert record.severity_number is SeverityNumber.WARN
        assert record.severity_text == "WARN"
        assert record.body is None
        assert list((record.attributes or {}).items()) == list((event.attributes or {}).items())
        assert (record.attributes or {})["tool.provenance.actor"] == "triage-bot"
    assert emitted.instrumentation_scope is not None
    assert emitted.instrumentation_scope.name == "candor-adapter-python"
    tracer_provider.shutdown()


def test_the_span_ends_with_the_kind_of_the_last_failure_it_started_without(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    sampler = RecordingSampler()
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.exporter))
    adapter = make(telemetry, clock, tracer_provider=tracer_provider)
    answers = deque([HttpResponse(429), HttpResponse(500), ok(clock)])
    envelope = adapter.call(lambda context: answers.popleft())
    assert envelope.outcome_class is OutcomeClass.SUCCESS
    [started] = sampler.started
    assert started["tool.failure.kind"] == "rate_limited"
    [span] = telemetry.spans()
    assert span.attributes is not None
    assert span.attributes["tool.failure.kind"] == "server_error"
    assert span.attributes["tool.outcome.class"] == "success"
    assert len(telemetry.log_records()) == 2
    tracer_provider.shutdown()


def test_an_acceptance_is_logged_when_the_call_sees_it(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock, retry=RetryPolicy(max_attempts=2))
    answers = deque(
        [busy(clock), HttpResponse(202, {"Operation-Location": "https://jobs.example/op/1"})]
    )

    def attempt(context: AttemptContext) -> HttpResponse:
        clock.advance(timedelta(milliseconds=40))
        return answers.popleft()

    envelope = adapter.call(attempt)
    assert envelope.lifecycle is not None
    [span] = telemetry.spans()
    assert [event.name for event in span.events] == ["tool.outcome", "tool.lifecycle"]
    records = telemetry.log_records()
    assert [emitted.log_record.event_name for emitted in records] == [
        "tool.outcome",
        "tool.lifecycle",
    ]
    acceptance = records[1].log_record
    # The second attempt started after the first's 40 ms and its backoff of 1 s.
    assert acceptance.timestamp == span.events[1].timestamp == START_NS + (40 + 1000 + 40) * MS
    assert list((acceptance.attributes or {}).items()) == list(
        (span.events[1].attributes or {}).items()
    )
    assert (span.attributes or {})["tool.lifecycle.state"] == "accepted"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_ended_by_an_exception_ends_the_span_its_failures_started(
    telemetry: Telemetry, mode: str
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)

    def attempt(context: AttemptContext) -> HttpResponse:
        clock.advance(timedelta(milliseconds=20))
        if context.number == 1:
            return busy(clock)
        raise RuntimeError("the tool's own bug")

    async def aattempt(context: AttemptContext) -> HttpResponse:
        return attempt(context)

    def run() -> Envelope:
        if mode == "sync":
            return adapter.call(attempt)
        return asyncio.run(adapter.acall(aattempt))

    with pytest.raises(RuntimeError, match="own bug"):
        run()
    [span] = telemetry.spans()
    assert [(event.attributes or {})["tool.retry.action"] for event in span.events] == ["retry"]
    assert span.end_time == START_NS + (20 + 1000 + 20) * MS
    assert "tool.outcome.class" not in (span.attributes or {}), "the call has no outcome"
    assert len(telemetry.log_records()) == 1
    assert sum(telemetry.outcomes().values()) == 0, "the call is not counted"


def test_a_call_cancelled_during_its_backoff_ends_the_span_its_failure_started(
    telemetry: Telemetry,
) -> None:
    adapter = Adapter(  # on the real clock: the backoff really waits
        "search",
        "https://search.example/v1/items",
        HttpClassifier(NotFound.UNREACHABLE),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
    )

    async def busy_once(context: AttemptContext) -> HttpResponse:
        return HttpResponse(503, {"Retry-After": "5"})

    async def cancelled() -> None:
        await asyncio.wait_for(adapter.acall(busy_once), timeout=0.05)

    with pytest.raises(TimeoutError):
        asyncio.run(cancelled())
    [span] = telemetry.spans()
    assert [event.name for event in span.events] == ["tool.outcome"]
    assert len(telemetry.log_records()) == 1


def test_no_log_record_is_emitted_for_a_span_without_a_valid_context(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock, tracer_provider=NoOpTracerProvider())
    envelope = adapter.call(lambda context: busy(clock) if context.number == 1 else ok(clock))
    assert envelope.outcome_class is OutcomeClass.SUCCESS
    assert telemetry.log_records() == []


def test_an_adapter_without_a_logger_provider_emits_through_the_one_set_for_all(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock, logger_provider=None)
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))

    def flaky(context: AttemptContext) -> HttpResponse:
        return busy(clock) if context.number == 1 else ok(clock)

    set_logger_provider(provider)
    try:
        adapter.call(flaky)
    finally:
        set_logger_provider(None)
    assert len(logs.get_finished_logs()) == 1, "an adapter built before it was set uses it"
    adapter.call(flaky)
    assert len(logs.get_finished_logs()) == 1, "unset, it is not used"
    assert telemetry.log_records() == []
    provider.shutdown()


def test_without_a_provider_set_the_records_go_to_opentelemetrys_global_one() -> None:
    script = """
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from candor import Adapter, HttpClassifier, HttpResponse, NotFound
from candor.testing import FakeClock

adapter = Adapter(
    "search",
    "https://search.example/v1/items",
    HttpClassifier(NotFound.UNREACHABLE),
    clock=FakeClock(),
    tracer_provider=TracerProvider(),
)
logs = InMemoryLogRecordExporter()
provider = LoggerProvider()
provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
set_logger_provider(provider)
adapter.call(lambda context: HttpResponse(503 if context.number == 1 else 200))
print([record.log_record.event_name for record in logs.get_finished_logs()])
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['tool.outcome']\n"


def test_a_lifecycle_event_names_the_resource_the_operation_left(telemetry: Telemetry) -> None:
    adapter: Adapter[Lifecycle] = Adapter(
        "export",
        "https://jobs.example/v1/jobs/j-77",
        FnClassifier(lambda lifecycle: Classification(Success(None), lifecycle=lifecycle)),
        clock=FakeClock(START),
        meter_provider=telemetry.meter_provider,
        tracer_provider=telemetry.tracer_provider,
    )

    def lifecycle_event(lifecycle: Lifecycle) -> dict[str, object]:
        """The attributes of the ``tool.lifecycle`` event of a call that saw ``lifecycle``."""
        adapter.call(lambda context: lifecycle)
        [event] = telemetry.spans()[-1].events
        assert event.name == "tool.lifecycle"
        return dict(event.attributes or {})

    completed = Lifecycle.completed(
        Operation("j-77"),
        Evidence(EvidenceKind.QUERY, "GET /v1/jobs/j-77 -> done"),
        Resource("https://store.example/exports/e-9", '"v7"'),
    )
    assert lifecycle_event(completed) == {
        "tool.name": "export",
        "tool.target": "https://jobs.example/v1/jobs/j-77",
        "tool.operation.id": "j-77",
        "tool.lifecycle.state": "completed",
        "tool.evidence.kind": "query",
        "tool.evidence.value": "GET /v1/jobs/j-77 -> done",
        "tool.resource.id": "https://store.example/exports/e-9",
        "tool.resource.version": '"v7"',
        "tool.provenance.source_system": "jobs.example",
        "tool.provenance.adapter": ADAPTER_VERSION,
    }
    partial = lifecycle_event(
        Lifecycle(
            LifecycleState.PARTIAL,
            Operation("j-78"),
            covered="3 of 5 files",
            resource=Resource("e-10"),
        )
    )
    assert partial["tool.resource.id"] == "e-10"
    assert "tool.resource.version" not in partial
    unnamed = lifecycle_event(
        Lifecycle.completed(Operation("j-79"), Evidence(EvidenceKind.JOB_ID, "j-79"))
    )
    assert not any(key.startswith("tool.resource.") for key in unnamed)


def test_a_custom_classifier(telemetry: Telemetry) -> None:
    def classify(rows: list[int] | None) -> Success | Empty | AccessFailure:
        if rows is None:
            from candor import Failure

            return AccessFailure(
                Failure(AccessFailureKind.CONNECT, retryable=False, message="no broker")
            )
        return Success(rows) if rows else Empty()

    adapter = Adapter(
        "queue",
        "amqp://broker/q",
        FnClassifier(classify),
        meter_provider=telemetry.meter_provider,
        tracer_provider=telemetry.tracer_provider,
    )
    assert adapter.call(lambda context: [1, 2]).outcome_class is OutcomeClass.SUCCESS
    assert adapter.call(lambda context: []).outcome_class is OutcomeClass.EMPTY
    assert adapter.call(lambda context: None).outcome_class is OutcomeClass.ACCESS_FAILURE
    assert adapter.source_system == "broker"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tool": " "}, "tool name must not be empty"),
        ({"target": ""}, "target must not be empty"),
        ({"attempt_timeout": timedelta(0)}, "attempt_timeout must be positive"),
        ({"deadline": timedelta(0)}, "deadline must be positive"),
        ({"method": ""}, "method must be an HTTP method name"),
        ({"method": "GET /items"}, "method must be an HTTP method name"),
    ],
)
def test_refused_settings_name_the_setting(settings: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"tool": "search", "target": "https://search.example"}
    arguments.update(settings)
    with pytest.raises(ValueError, match=message):
        Adapter(classifier=HttpClassifier(NotFound.UNREACHABLE), **arguments)  # type: ignore[arg-type]


def test_the_sync_path_refuses_an_async_attempt(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START))

    async def attempt(context: AttemptContext) -> HttpExchange:
        return HttpResponse(200)  # pragma: no cover - never awaited

    with pytest.raises(TypeError, match="use acall"):
        adapter.call(attempt)  # type: ignore[arg-type]


def test_an_attempt_that_raises_before_it_is_awaited_is_classified(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START), retry=RetryPolicy.no_retry())

    def attempt(context: AttemptContext) -> asyncio.Future[HttpExchange]:
        raise TransportError(TransportErrorKind.CONNECT, "no route")

    envelope = asyncio.run(adapter.acall(attempt))
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.CONNECT


# --- RETRY-UNSAFE: a call that may have been applied is not sent again ----------------------


def test_the_method_defaults_to_get_and_sets_whether_the_call_is_idempotent(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    assert make(telemetry, clock).method == "GET"
    assert make(telemetry, clock).idempotent is True
    by_method = {
        method: make(telemetry, clock, method=method).idempotent
        for method in ("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "POST", "PATCH")
    }
    assert by_method == {
        "GET": True,
        "HEAD": True,
        "OPTIONS": True,
        "TRACE": True,
        "PUT": True,
        "DELETE": True,
        "POST": False,
        "PATCH": False,
    }
    lower = make(telemetry, clock, method="post")
    assert (lower.method, lower.idempotent, lower.safe_to_repeat) == ("POST", False, False)
    assert make(telemetry, clock, method="put").idempotent is True
    # The author's declaration overrides the method's.
    assert make(telemetry, clock, method="POST", idempotent=True).safe_to_repeat is True
    assert make(telemetry, clock, method="GET", idempotent=False).safe_to_repeat is False
    assert make(telemetry, clock, method="POST", idempotency_key=True).safe_to_repeat is True


def test_every_attempt_of_a_call_is_given_one_idempotency_key_and_each_call_its_own(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock, method="POST", idempotency_key=True)
    first = Script(clock, broken, reset, ok)
    assert isinstance(adapter.call(first).outcome, Success)
    assert len(first.keys) == 3
    assert len(set(first.keys)) == 1
    key = first.keys[0]
    assert key is not None
    assert KEY.fullmatch(key) is not None

    second = Script(clock, reset, ok)
    assert isinstance(asyncio.run(adapter.acall(second.attempt_async())), Envelope)
    assert len(second.keys) == 2
    assert len(set(second.keys)) == 1
    assert second.keys[0] != key
    assert second.keys[0] is not None
    assert KEY.fullmatch(second.keys[0]) is not None

    with adapter.attempt() as observed:
        observed.record(ok(clock))
    assert observed.context.idempotency_key not in (None, key, second.keys[0])

    plain = Script(clock, busy, ok)
    assert isinstance(make(telemetry, clock).call(plain).outcome, Success)
    assert plain.keys == [None, None]


def test_a_post_answered_500_is_not_sent_again(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    script = Script(clock, broken, ok)
    envelope = make(telemetry, clock, method="POST").call(script)
    assert len(script.seen) == 1
    assert isinstance(envelope.outcome, AccessFailure)
    failure = envelope.outcome.failure
    assert failure.retryable is False
    assert failure.kind is AccessFailureKind.SERVER_ERROR
    assert failure.status == 500
    assert failure.message.startswith(NOT_SENT_AGAIN + "HTTP 500")
    assert [a.retry_action for a in envelope.attempts] == [RetryAction.PERMANENT]
    assert envelope.next_actions == (NextAction.ESCALATE,)
    assert clock.slept == []
    [span] = telemetry.spans()
    assert span.status.description is not None
    assert span.status.description.startswith(NOT_SENT_AGAIN)


def test_a_post_declared_idempotent_is_sent_again_after_a_500(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    script = Script(clock, broken, ok)
    envelope = make(telemetry, clock, method="POST", idempotent=True).call(script)
    assert len(script.seen) == 2
    assert isinstance(envelope.outcome, Success)
    assert [a.retry_action for a in envelope.attempts] == [RetryAction.RETRY, None]


def test_a_get_answered_500_is_sent_again(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    script = Script(clock, broken, ok)
    envelope = make(telemetry, clock).call(script)
    assert len(script.seen) == 2
    assert isinstance(envelope.outcome, Success)
    assert clock.slept == [50 * MS]


def test_a_lowercase_post_is_a_post(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    script = Script(clock, reset, ok)
    envelope = asyncio.run(make(telemetry, clock, method="post").acall(script.attempt_async()))
    assert len(script.seen) == 1
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.message == NOT_SENT_AGAIN + "connection reset by peer"
    assert envelope.outcome.failure.error_type == "connection_reset"


@pytest.mark.parametrize(
    ("answer", "error_type"),
    [(refused, "connect_error"), (busy, "503")],
)
def test_a_post_that_was_not_processed_is_sent_again(
    telemetry: Telemetry, answer: Callable[[FakeClock], HttpExchange], error_type: str
) -> None:
    clock = FakeClock(START)
    script = Script(clock, answer, ok)
    envelope = make(telemetry, clock, method="POST").call(script)
    assert len(script.seen) == 2
    assert isinstance(envelope.outcome, Success)
    assert envelope.attempts[0].error_type == error_type
    assert envelope.attempts[0].retry_action is RetryAction.RETRY


def test_a_post_that_timed_out_on_its_last_attempt_is_permanent(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    adapter = make(
        telemetry,
        clock,
        method="POST",
        attempt_timeout=timedelta(seconds=2),
        retry=RetryPolicy.no_retry(),
    )

    def late(context: AttemptContext) -> HttpExchange:
        clock.advance(timedelta(seconds=3))
        return ok(clock)

    envelope = adapter.call(late)
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.retryable is False
    assert envelope.outcome.failure.message == (
        NOT_SENT_AGAIN + "no answer within the attempt timeout of 2s"
    )
    assert envelope.attempts[0].retry_action is RetryAction.PERMANENT
    assert envelope.next_actions == (NextAction.ESCALATE,)


def test_an_observed_post_that_may_have_been_applied_is_not_offered_a_retry(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    with make(telemetry, clock, method="POST").attempt() as observed:
        observed.record(broken(clock))
    assert isinstance(observed.envelope.outcome, AccessFailure)
    assert observed.envelope.outcome.failure.message.startswith(NOT_SENT_AGAIN)
    assert observed.envelope.next_actions == (NextAction.ESCALATE,)


def test_the_status_reads_of_a_post_are_read_again_after_a_500(telemetry: Telemetry) -> None:
    clock = FakeClock(START)
    status_url = "https://search.example/v1/operations/op-1"
    adapter = make(telemetry, clock, method="POST", status_reader=StatusUrl())
    reads = deque(
        [
            HttpResponse(500, {}, b"oops"),
            HttpResponse(200, {}, b'{"status":"succeeded"}'),
        ]
    )
    contexts: list[AttemptContext] = []

    def read(operation: Operation, context: AttemptContext) -> HttpExchange:
        contexts.append(context)
        return reads.popleft()

    envelope = adapter.call_and_follow(
        lambda context: HttpResponse(202, {"Operation-Location": status_url}),
        read,
    )
    assert len(contexts) == 2
    assert isinstance(envelope.outcome, Success)
    assert envelope.lifecycle is not None
    assert envelope.lifecycle.state is LifecycleState.COMPLETED
