"""Following asynchronous operations: a status URL, a long-running operation, an author's read.

Status reads are scripted raw results, and time is a fake clock: waits take no real time and are
recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import pytest

from candor import (
    ADAPTER_VERSION,
    AccessFailure,
    AccessFailureKind,
    Adapter,
    Attempt,
    AttemptContext,
    BodySizeCap,
    Envelope,
    Evidence,
    EvidenceKind,
    Failure,
    FailureKind,
    FixedJitter,
    FnStatus,
    HttpClassifier,
    HttpExchange,
    HttpResponse,
    JsonValue,
    Lifecycle,
    LifecycleState,
    LongRunning,
    NextAction,
    NotFound,
    Operation,
    OperationStatus,
    OutcomeClass,
    Partial,
    PartialKind,
    Resource,
    RetryAction,
    RetryPolicy,
    StatusRead,
    StatusReader,
    StatusUrl,
    Success,
    TransportError,
    TransportErrorKind,
)
from candor.names import OUTCOMES_COUNTER
from candor.testing import FakeClock

from .conftest import Telemetry

START = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
START_NS = int(START.timestamp()) * 10**9
S = 1_000_000_000
MS = 1_000_000
TARGET = "https://exports.example/v1/exports"
STATUS_URL = "https://exports.example/v1/operations/op-1"
OPERATION = Operation(STATUS_URL, STATUS_URL)
Mode = Literal["sync", "async"]
MODES: Final = ("sync", "async")


def reply(status: int, body: object = None, headers: dict[str, str] | None = None) -> HttpResponse:
    data = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(status, headers or {}, data, received_at=START)


def accepted(retry_after: int | None = None) -> HttpResponse:
    """A 202 whose status URL is ``STATUS_URL``, asking to wait ``retry_after`` seconds."""
    headers = {"Operation-Location": STATUS_URL}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return reply(202, headers=headers)


def status(state: str, **fields: Any) -> HttpResponse:
    return reply(200, {"status": state, **fields})


class Source:
    """A scripted tool: its start answers and status answers in turn, the last one repeated."""

    def __init__(self, start: Sequence[HttpExchange], reads: Sequence[HttpExchange]) -> None:
        self._start = deque(start)
        self._reads = deque(reads)
        self.starts = 0
        self.reads: list[tuple[Operation, AttemptContext]] = []

    @staticmethod
    def _next(answers: deque[HttpExchange]) -> HttpExchange:
        return answers.popleft() if len(answers) > 1 else answers[0]

    def start(self, context: AttemptContext) -> HttpExchange:
        self.starts += 1
        return self._next(self._start)

    def read(self, operation: Operation, context: AttemptContext) -> HttpExchange:
        self.reads.append((operation, context))
        return self._next(self._reads)

    async def astart(self, context: AttemptContext) -> HttpExchange:
        return self.start(context)

    async def aread(self, operation: Operation, context: AttemptContext) -> HttpExchange:
        return self.read(operation, context)


def make(
    telemetry: Telemetry,
    clock: FakeClock,
    reader: StatusReader[Any] | None = None,
    **settings: Any,
) -> Adapter[HttpExchange]:
    return Adapter(
        "export",
        TARGET,
        HttpClassifier(NotFound.UNREACHABLE),
        status_reader=StatusUrl() if reader is None else reader,
        retry=RetryPolicy(
            max_attempts=3, initial_backoff=timedelta(seconds=1), max_backoff=timedelta(seconds=8)
        ),
        jitter=FixedJitter(0.5),
        clock=clock,
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
        **{"operation_deadline": timedelta(seconds=300), **settings},
    )


def checked(envelope: Envelope) -> Envelope:
    """The envelope, once its JSON has been read back: its shape and next actions are legal."""
    assert Envelope.from_json(envelope.to_json()).to_json() == envelope.to_json()
    return envelope


def follow(adapter: Adapter[HttpExchange], source: Source, mode: Mode = "sync") -> Envelope:
    if mode == "sync":
        return checked(adapter.call_and_follow(source.start, source.read))
    return checked(asyncio.run(adapter.acall_and_follow(source.astart, source.aread)))


def failure_of(envelope: Envelope) -> Failure:
    assert isinstance(envelope.outcome, AccessFailure), envelope
    return envelope.outcome.failure


def lifecycle_of(envelope: Envelope) -> Lifecycle:
    assert envelope.lifecycle is not None, envelope
    return envelope.lifecycle


def following(envelope: Envelope) -> Attempt:
    """The last attempt: the following, after the start's one attempt."""
    assert len(envelope.attempts) == 2, envelope.attempts
    return envelope.attempts[1]


def events(telemetry: Telemetry) -> list[tuple[str, dict[str, Any]]]:
    """The events of the last span: each name and attributes."""
    span = telemetry.spans()[-1]
    return [(event.name, dict(event.attributes or {})) for event in span.events]


# A status URL -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_status_url_is_followed_to_a_verified_completion_honouring_retry_after(
    telemetry: Telemetry, mode: Mode
) -> None:
    clock = FakeClock(START)
    source = Source(
        [accepted(retry_after=7)],
        [
            reply(202, headers={"Retry-After": "3"}),
            status("Running", percentComplete=40),
            status("Succeeded", rows=1200),
        ],
    )
    envelope = follow(make(telemetry, clock), source, mode)

    assert envelope.outcome == Success({"status": "Succeeded", "rows": 1200})
    verified_by = Evidence(EvidenceKind.QUERY, STATUS_URL)
    assert envelope.lifecycle == Lifecycle.completed(OPERATION, verified_by)
    assert envelope.evidence == verified_by
    assert envelope.next_actions == (NextAction.FINISH,)
    # The acceptance asked for 7 s and the first read for 3 s: neither was shortened. The
    # third wait is the backoff of read 2: its ceiling of 2 s times the jitter of 0.5.
    assert clock.slept == [7 * S, 3 * S, 1 * S]
    assert source.starts == 1
    assert [(operation, context.number) for operation, context in source.reads] == [
        (OPERATION, 1),
        (OPERATION, 2),
        (OPERATION, 3),
    ]
    assert source.reads[0][1].timeout == timedelta(seconds=10)
    start, end = envelope.attempts
    assert (start.number, start.outcome_class, start.duration_ms) == (1, OutcomeClass.SUCCESS, 0)
    assert (end.number, end.started_at, end.duration_ms) == (2, START, 11_000)
    assert (end.outcome_class, end.retry_action) == (OutcomeClass.SUCCESS, None)
    assert envelope.provenance.finished_at == START + timedelta(seconds=11)


@pytest.mark.parametrize(
    ("read", "state", "resource"),
    [
        pytest.param(
            reply(303, headers={"Location": "https://store.example/e/1"}),
            LifecycleState.COMPLETED,
            Resource("https://store.example/e/1"),
            id="a 303's Location",
        ),
        pytest.param(
            status(
                "Succeeded", resourceLocation="https://bob:hunter2@store.example/e/1?sig=s3cret"
            ),
            LifecycleState.COMPLETED,
            Resource("https://REDACTED@store.example/e/1?sig=REDACTED"),
            id="resourceLocation, redacted",
        ),
        pytest.param(
            reply(200, {"rows": 1200}, {"ETag": '"v7"'}),
            LifecycleState.COMPLETED,
            Resource(STATUS_URL, '"v7"'),
            id="the status URL itself, its ETag the version",
        ),
        pytest.param(
            reply(200, {"rows": 1200}),
            LifecycleState.COMPLETED,
            Resource(STATUS_URL),
            id="the status URL itself, without a version",
        ),
        pytest.param(
            status(
                "PartiallySucceeded",
                covered="3 of 5 tables",
                resourceLocation="https://store.example/e/1",
            ),
            LifecycleState.PARTIAL,
            Resource("https://store.example/e/1"),
            id="a partial's resourceLocation",
        ),
        pytest.param(
            status("Succeeded"), LifecycleState.COMPLETED, None, id="a status that names none"
        ),
        pytest.param(
            status("Succeeded", resourceLocation=7),
            LifecycleState.COMPLETED,
            None,
            id="a resourceLocation that is not a string",
        ),
    ],
)
def test_a_status_url_end_names_the_resource_and_its_version(
    telemetry: Telemetry, read: HttpResponse, state: LifecycleState, resource: Resource | None
) -> None:
    envelope = follow(make(telemetry, FakeClock(START)), Source([accepted()], [read]))
    assert lifecycle_of(envelope).state is state
    assert lifecycle_of(envelope).resource == resource


def test_a_303_completes_with_its_location_as_result_and_evidence(telemetry: Telemetry) -> None:
    location = "https://store.example/e/1?token=s3cret"
    read = reply(303, headers={"Location": location})
    envelope = follow(make(telemetry, FakeClock(START)), Source([accepted()], [read]))
    redacted = "https://store.example/e/1?token=REDACTED"
    assert envelope.outcome == Success(redacted)
    assert envelope.evidence == Evidence(EvidenceKind.QUERY, redacted)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ({"code": "DiskFull", "message": "disk full"}, "disk full"),
        ({"code": "DiskFull"}, "error code DiskFull"),
        (None, "the operation reported failure without an error"),
    ],
)
def test_a_status_url_that_reports_failure_ends_the_call_as_a_permanent_tool_error(
    telemetry: Telemetry, error: dict[str, str] | None, reason: str
) -> None:
    read = status("Failed") if error is None else status("Failed", error=error)
    source = Source([accepted()], [read])
    envelope = follow(make(telemetry, FakeClock(START)), source)

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.TOOL_ERROR
    assert not failure.retryable
    assert failure.error_type == "operation_failed"
    assert failure.message == f"operation {STATUS_URL} failed: {reason}"
    assert envelope.lifecycle == Lifecycle(LifecycleState.FAILED, OPERATION, reason=reason)
    assert following(envelope).retry_action is RetryAction.PERMANENT
    assert envelope.next_actions == (NextAction.ESCALATE,)
    # Never started again.
    assert source.starts == 1


def test_a_status_url_that_reports_part_done_ends_the_call_as_partial(
    telemetry: Telemetry,
) -> None:
    read = status("PartiallySucceeded", covered="3 of 5 tables")
    envelope = follow(make(telemetry, FakeClock(START)), Source([accepted()], [read]))

    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.payload == {"status": "PartiallySucceeded", "covered": "3 of 5 tables"}
    truncation = envelope.outcome.truncation
    assert truncation.kind is PartialKind.OPERATION_PARTIAL
    assert (truncation.covered, truncation.dropped) == (
        "3 of 5 tables",
        "the rest of the operation's work",
    )
    assert envelope.lifecycle == Lifecycle(
        LifecycleState.PARTIAL, OPERATION, covered="3 of 5 tables"
    )
    assert following(envelope).retry_action is RetryAction.ACCEPT_PARTIAL
    assert following(envelope).failure_kind is FailureKind.OPERATION_PARTIAL
    assert envelope.evidence == Evidence(EvidenceKind.JOB_ID, STATUS_URL)


@pytest.mark.parametrize("spelling", ["Canceled", "cancelled", "CANCELLED"])
def test_a_status_url_that_reports_cancellation_ends_the_call_as_cancelled(
    telemetry: Telemetry, spelling: str
) -> None:
    read = status(spelling)
    envelope = follow(make(telemetry, FakeClock(START)), Source([accepted()], [read]))

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.CANCELLED
    assert failure.error_type == "operation_cancelled"
    assert not failure.retryable
    assert lifecycle_of(envelope).state is LifecycleState.CANCELLED
    assert envelope.next_actions == (NextAction.ESCALATE,)
    assert following(envelope).retry_action is RetryAction.PERMANENT


@pytest.mark.parametrize("mode", MODES)
def test_an_operation_that_never_finishes_ends_at_the_operation_deadline_with_its_last_state(
    telemetry: Telemetry, mode: Mode
) -> None:
    clock = FakeClock(START)
    source = Source(
        [accepted(retry_after=7)],
        [reply(200, {"status": "Running", "percentComplete": 10}, {"Retry-After": "60"})],
    )
    envelope = follow(make(telemetry, clock), source, mode)

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.DEADLINE
    assert failure.retryable
    assert failure.error_type == "deadline"
    assert failure.message == (
        f"operation {STATUS_URL} was still running when the operation deadline of 300s ran "
        "out, after 5 status read(s)"
    )
    assert envelope.lifecycle == Lifecycle(LifecycleState.RUNNING, OPERATION, percent_complete=10)
    assert envelope.evidence == Evidence(EvidenceKind.JOB_ID, STATUS_URL)
    assert envelope.next_actions == (NextAction.RETRY, NextAction.ESCALATE)
    assert following(envelope).retry_action is RetryAction.EXHAUSTED
    # Reads every 60 s from 7 s on; the one due at 307 s would start after the deadline.
    assert len(source.reads) == 5
    assert clock.elapsed_ns == 247 * S
    assert following(envelope).duration_ms == 247_000


def test_a_status_url_that_starts_failing_ends_the_call_with_the_last_state_known(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    source = Source(
        [accepted(retry_after=7)],
        [
            status("Running", percentComplete=70),
            reply(503, headers={"Retry-After": "20"}),
            reply(503),
            reply(503),
        ],
    )
    envelope = follow(make(telemetry, clock), source)

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.SERVER_ERROR
    assert failure.status == 503
    assert failure.message.startswith(
        f"reading the status of operation {STATUS_URL}, last seen running: HTTP 503"
    )
    assert envelope.lifecycle == Lifecycle(LifecycleState.RUNNING, OPERATION, percent_complete=70)
    # Three failed reads in a row spend the policy's three attempts.
    assert len(source.reads) == 4
    assert (following(envelope).retry_action, following(envelope).status) == (
        RetryAction.EXHAUSTED,
        503,
    )
    assert following(envelope).error_type == "503"
    # A failed read's Retry-After is a floor under the backoff too.
    assert clock.slept == [7 * S, S // 2, 20 * S, 2 * S]


def test_only_failed_reads_in_a_row_spend_the_policy(telemetry: Telemetry) -> None:
    source = Source(
        [accepted()],
        [reply(503), reply(503), status("Running"), reply(503), reply(503), status("Succeeded")],
    )
    envelope = follow(make(telemetry, FakeClock(START)), source)
    assert envelope.outcome_class is OutcomeClass.SUCCESS
    assert len(source.reads) == 6


def test_a_status_url_that_no_longer_exists_is_a_permanent_failure_after_one_read(
    telemetry: Telemetry,
) -> None:
    source = Source([accepted()], [reply(404)])
    envelope = follow(make(telemetry, FakeClock(START)), source)

    assert failure_of(envelope).kind is AccessFailureKind.CLIENT_ERROR
    assert envelope.lifecycle == Lifecycle.accepted(OPERATION)
    assert len(source.reads) == 1
    assert following(envelope).retry_action is RetryAction.PERMANENT


def test_a_status_no_rule_knows_is_a_protocol_failure_never_a_success(
    telemetry: Telemetry,
) -> None:
    source = Source([accepted()], [status("Paused")])
    envelope = follow(make(telemetry, FakeClock(START)), source)

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.PROTOCOL
    assert not failure.retryable
    assert failure.message.endswith('the status "Paused" is not one this reader knows')
    assert envelope.lifecycle == Lifecycle.accepted(OPERATION)


def test_an_acceptance_without_a_status_url_cannot_be_followed_and_says_so(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    source = Source([reply(202)], [status("Succeeded")])
    envelope = follow(make(telemetry, clock), source)

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.PROTOCOL
    assert failure.error_type == "no_status_url"
    assert not failure.retryable
    assert envelope.lifecycle is not None
    operation = envelope.lifecycle.operation
    assert operation.generated
    assert operation.id.startswith("candor-")
    assert operation.status_url is None
    assert following(envelope).retry_action is RetryAction.PERMANENT
    assert (source.starts, source.reads, clock.slept) == (1, [], [])


@pytest.mark.parametrize("raise_it", [False, True])
def test_a_status_url_that_cannot_be_reached_is_retried_then_exhausted(
    telemetry: Telemetry, raise_it: bool
) -> None:
    refused = TransportError(TransportErrorKind.CONNECT, "connection refused")
    source = Source([accepted()], [refused])

    def read(operation: Operation, context: AttemptContext) -> HttpExchange:
        answer = source.read(operation, context)
        if raise_it and isinstance(answer, TransportError):
            raise answer
        return answer

    envelope = checked(make(telemetry, FakeClock(START)).call_and_follow(source.start, read))
    failure = failure_of(envelope)
    assert (failure.kind, failure.error_type) == (AccessFailureKind.CONNECT, "connect_error")
    assert following(envelope).retry_action is RetryAction.EXHAUSTED
    assert len(source.reads) == 3


def test_a_status_read_that_raises_what_no_reader_reads_propagates(telemetry: Telemetry) -> None:
    def read(operation: Operation, context: AttemptContext) -> HttpExchange:
        raise KeyError("a bug in the calling code")

    adapter = make(telemetry, FakeClock(START))
    with pytest.raises(KeyError):
        adapter.call_and_follow(Source([accepted()], []).start, read)


def test_a_synchronous_status_read_that_returns_late_timed_out(telemetry: Telemetry) -> None:
    clock = FakeClock(START)

    def late(operation: Operation, context: AttemptContext) -> HttpExchange:
        clock.advance(context.timeout + timedelta(seconds=1))
        return status("Succeeded")

    envelope = make(telemetry, clock).call_and_follow(Source([accepted()], []).start, late)
    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.TIMEOUT
    assert failure.message.endswith("no answer within the attempt timeout of 10s")
    assert following(envelope).retry_action is RetryAction.EXHAUSTED


def test_an_asynchronous_status_read_that_never_answers_is_cut_at_its_timeout(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    cancelled: list[int] = []

    async def hang(operation: Operation, context: AttemptContext) -> HttpExchange:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.append(context.number)
        raise AssertionError("not reached")  # pragma: no cover

    adapter = make(telemetry, clock)
    envelope = asyncio.run(adapter.acall_and_follow(Source([accepted()], []).astart, hang))
    assert failure_of(envelope).kind is AccessFailureKind.TIMEOUT
    assert cancelled == [1, 2, 3]
    # Each read's timer ran its 10 s on the fake clock.
    assert clock.slept == [S // 2, 10 * S, S // 2, 10 * S, S, 10 * S]


# A long-running operation -----------------------------------------------------------------------


def operation_resource(**fields: Any) -> HttpResponse:
    return reply(200, {"name": "operations/op-7", **fields})


@pytest.mark.parametrize("mode", MODES)
def test_a_long_running_operation_is_followed_until_done_with_its_response(
    telemetry: Telemetry, mode: Mode
) -> None:
    response: JsonValue = {"name": "exports/e-7", "etag": 'W/"3"', "rows": 10}
    source = Source(
        [operation_resource(done=False)],
        [
            operation_resource(done=False, metadata={"progressPercent": 50}),
            operation_resource(done=True, response=response),
        ],
    )
    envelope = follow(make(telemetry, FakeClock(START), LongRunning()), source, mode)

    assert envelope.outcome == Success(response)
    operation = Operation("operations/op-7")
    assert envelope.lifecycle == Lifecycle.completed(
        operation,
        Evidence(EvidenceKind.JOB_ID, "operations/op-7"),
        Resource("exports/e-7", 'W/"3"'),
    )
    assert [read[0] for read in source.reads] == [operation, operation]
    assert [
        (name, attributes["tool.lifecycle.state"]) for name, attributes in events(telemetry)
    ] == [
        ("tool.lifecycle", "accepted"),
        ("tool.lifecycle", "running"),
        ("tool.lifecycle", "completed"),
    ]


@pytest.mark.parametrize(
    ("response", "resource"),
    [
        ({"name": "exports/e-7", "etag": "17"}, Resource("exports/e-7", "17")),
        ({"name": "exports/e-7", "etag": 17}, Resource("exports/e-7")),
        ({"name": "exports/e-7"}, Resource("exports/e-7")),
        ({"rows": 10}, None),
        ({"name": 7}, None),
        ("done", None),
    ],
)
def test_a_long_running_operation_names_its_response_as_the_resource(
    response: object, resource: Resource | None
) -> None:
    read = LongRunning().read(
        Operation("operations/op-7"), operation_resource(done=True, response=response)
    )
    assert isinstance(read.status, OperationStatus)
    assert read.status.resource == resource


@pytest.mark.parametrize(
    ("error", "kind", "state"),
    [
        ({"code": 13, "message": "internal"}, AccessFailureKind.TOOL_ERROR, LifecycleState.FAILED),
        (
            {"code": 1, "message": "cancelled by the caller"},
            AccessFailureKind.CANCELLED,
            LifecycleState.CANCELLED,
        ),
    ],
)
def test_a_long_running_operation_done_with_an_error_is_failed_or_cancelled_by_its_code(
    telemetry: Telemetry, error: dict[str, Any], kind: AccessFailureKind, state: LifecycleState
) -> None:
    source = Source([operation_resource(done=False)], [operation_resource(done=True, error=error)])
    envelope = follow(make(telemetry, FakeClock(START), LongRunning()), source)
    assert failure_of(envelope).kind is kind
    assert lifecycle_of(envelope).state is state


def test_a_completion_without_evidence_is_refused(telemetry: Telemetry) -> None:
    source = Source(
        [operation_resource(done=False)],
        [operation_resource(done=False), operation_resource(done=True)],
    )
    envelope = follow(make(telemetry, FakeClock(START), LongRunning()), source)

    failure = failure_of(envelope)
    assert failure.kind is AccessFailureKind.PROTOCOL
    assert not failure.retryable
    assert failure.message.endswith(
        "operation operations/op-7 says done with neither a response nor an error: its "
        "completion cannot be verified"
    )
    assert envelope.lifecycle == Lifecycle(LifecycleState.RUNNING, Operation("operations/op-7"))
    assert following(envelope).retry_action is RetryAction.PERMANENT


def test_an_operation_resource_already_done_ends_at_the_first_read(telemetry: Telemetry) -> None:
    done = operation_resource(done=True, response={"rows": 1})
    source = Source([done], [done])
    envelope = follow(make(telemetry, FakeClock(START), LongRunning()), source)
    assert envelope.outcome == Success({"rows": 1})
    assert len(source.reads) == 1


@pytest.mark.parametrize(
    "start",
    [reply(200, {"name": "exports/e-7"}), reply(200, [1, 2]), reply(503)],
    ids=["a resource", "a list", "a failure"],
)
def test_an_answer_that_accepted_nothing_is_returned_as_call_returns_it(
    telemetry: Telemetry, start: HttpResponse
) -> None:
    clock = FakeClock(START)
    source = Source([start], [])
    envelope = follow(make(telemetry, clock, LongRunning()), source)
    expected = make(telemetry, FakeClock(START), LongRunning()).call(Source([start], []).start)
    assert envelope.to_json() == expected.to_json()
    assert source.reads == []


@pytest.mark.parametrize(
    ("raw", "kind", "retryable"),
    [
        (reply(503, headers={"Retry-After": "4"}), AccessFailureKind.SERVER_ERROR, True),
        (reply(429), AccessFailureKind.RATE_LIMITED, True),
        (reply(401), AccessFailureKind.AUTH, False),
        (reply(302, headers={"Location": "/elsewhere"}), AccessFailureKind.PROTOCOL, False),
        (HttpResponse(200, {}, b"not json"), AccessFailureKind.PROTOCOL, True),
        (
            HttpResponse(200, {}, b'{"done":', BodySizeCap(8)),
            AccessFailureKind.PROTOCOL,
            True,
        ),
        (TransportError(TransportErrorKind.RESET, "reset"), AccessFailureKind.CONNECT, True),
    ],
)
@pytest.mark.parametrize("reader", [StatusUrl(), LongRunning()], ids=["status url", "aip-151"])
def test_an_answer_that_says_nothing_of_the_operation_is_a_failed_read(
    reader: StatusReader[HttpExchange],
    raw: HttpExchange,
    kind: AccessFailureKind,
    retryable: bool,
) -> None:
    read = reader.read(OPERATION, raw)
    assert isinstance(read.status, Failure)
    assert (read.status.kind, read.status.retryable) == (kind, retryable)
    if read.status.retry_after_ms is not None:
        assert read.retry_after_ms == read.status.retry_after_ms


# The status URL reader's rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"status": "NotStarted"}, OperationStatus.queued()),
        ({"status": "not_started"}, OperationStatus.queued()),
        ({"status": "Pending"}, OperationStatus.queued()),
        ({"status": "Accepted"}, OperationStatus.queued()),
        ({"status": "In Progress", "percentComplete": 55.5}, OperationStatus.running(55)),
        ({"status": "IN-PROGRESS", "percentComplete": 101}, OperationStatus.running()),
        ({"status": "started", "percentComplete": True}, OperationStatus.running()),
        ({"status": "Running"}, OperationStatus.running()),
        ({"status": "Canceled"}, OperationStatus.cancelled()),
        (
            {"status": "error", "error": {"message": "", "code": 42}},
            OperationStatus.failed("error code 42"),
        ),
        (
            {"status": "partial"},
            OperationStatus.partial(
                {"status": "partial"},
                "part of the operation's work",
                "the rest of the operation's work",
            ),
        ),
    ],
)
def test_a_status_value_is_read_without_regard_to_case_or_separators(
    body: dict[str, Any], expected: OperationStatus
) -> None:
    assert StatusUrl().read(OPERATION, reply(200, body)).status == expected


def test_a_status_that_is_not_a_string_is_a_protocol_failure() -> None:
    read = StatusUrl().read(OPERATION, reply(200, {"status": 3}))
    assert isinstance(read.status, Failure)
    assert read.status.message == "the status field /status is not a string: 3"


def test_where_a_status_body_says_what_is_declared() -> None:
    reader = StatusUrl(
        status_at="/state/name",
        percent_at="/state/progress",
        covered_at="/summary",
        resource_at="/output/url",
    )
    running = reader.read(OPERATION, reply(200, {"state": {"name": "busy", "progress": 3}}))
    assert isinstance(running.status, Failure), "busy is no status the reader knows"
    running = reader.read(OPERATION, reply(200, {"state": {"name": "running", "progress": 3}}))
    assert running.status == OperationStatus.running(3)
    body: JsonValue = {"state": {"name": "partial"}, "summary": "2 of 3", "output": {"url": "/e/1"}}
    partial = reader.read(OPERATION, reply(200, body))
    assert partial.status == OperationStatus.partial(
        body, "2 of 3", "the rest of the operation's work", Resource("/e/1")
    )


# Resuming, and an author's status read ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_acceptance_returned_at_once_can_be_resumed_later(
    telemetry: Telemetry, mode: Mode
) -> None:
    clock = FakeClock(START)
    adapter = make(telemetry, clock)
    source = Source([accepted(retry_after=7)], [status("Succeeded")])
    acceptance = adapter.call(source.start)
    assert lifecycle_of(acceptance).state is LifecycleState.ACCEPTED
    assert source.reads == []

    operation = lifecycle_of(acceptance).operation
    clock.advance(timedelta(minutes=5))
    if mode == "sync":
        envelope = adapter.resume(operation, source.read)
    else:
        envelope = asyncio.run(adapter.aresume(operation, source.aread))
    checked(envelope)
    assert lifecycle_of(envelope).state is LifecycleState.COMPLETED
    [attempt] = envelope.attempts
    assert (attempt.number, attempt.started_at) == (1, START + timedelta(minutes=5))
    assert clock.slept == [], "the first read of a resume waits for nothing"
    # A resumed following saw the state of its first read, not the acceptance.
    assert [attributes["tool.lifecycle.state"] for _, attributes in events(telemetry)] == [
        "completed"
    ]
    # The acceptance and the resume are two calls, each counted by its own ending.
    points = {
        dict(key).get("tool.outcome.class", dict(key).get("tool.lifecycle.state")): value
        for key, value in telemetry.metric_points(OUTCOMES_COUNTER).items()
    }
    assert points == {"success": 1, "empty": 0, "partial": 0, "access_failure": 0, "accepted": 1}


def test_a_resume_whose_status_cannot_be_read_reports_the_operation_as_accepted(
    telemetry: Telemetry,
) -> None:
    envelope = make(telemetry, FakeClock(START)).resume(OPERATION, Source([], [reply(410)]).read)
    assert failure_of(envelope).kind is AccessFailureKind.CLIENT_ERROR
    assert envelope.lifecycle == Lifecycle.accepted(OPERATION)
    assert envelope.evidence == Evidence(EvidenceKind.JOB_ID, STATUS_URL)
    assert [name for name, _ in events(telemetry)] == ["tool.outcome"]


def test_an_author_status_read_can_verify_completion_by_reading_the_resource_back(
    telemetry: Telemetry,
) -> None:
    # What one status request of this job API returns: its state, and the export's version
    # read back once it says done.
    reads = deque([("running", None), ("done", 41), ("done", 42)])
    expected_version = 42

    def job(operation: Operation, read: tuple[str, int | None]) -> OperationStatus:
        state, version = read
        if state == "done" and version == expected_version:
            return OperationStatus.completed(
                {"version": version},
                Evidence(EvidenceKind.QUERY, f"GET /exports/{operation.id}?version={version}"),
                Resource(f"/exports/{operation.id}", str(version)),
            )
        # Done, but the resource read back is not the version expected yet: not completed.
        return OperationStatus.running()

    adapter = make(telemetry, FakeClock(START), FnStatus(job))
    envelope = checked(adapter.resume(Operation("e-9"), lambda operation, context: reads.popleft()))
    assert envelope.lifecycle == Lifecycle.completed(
        Operation("e-9"),
        Evidence(EvidenceKind.QUERY, "GET /exports/e-9?version=42"),
        Resource("/exports/e-9", "42"),
    )
    assert envelope.outcome == Success({"version": 42})
    assert not reads


def test_an_author_status_read_may_report_a_failed_read_and_a_wait() -> None:
    unreachable = Failure(AccessFailureKind.CONNECT, retryable=True, message="queue down")
    reader: FnStatus[str] = FnStatus(
        lambda operation, raw: (
            unreachable
            if raw == "down"
            else StatusRead(OperationStatus.queued(), retry_after_ms=1500)
        )
    )
    assert reader.read(OPERATION, "down") == StatusRead(unreachable)
    assert reader.read(OPERATION, "up") == StatusRead(OperationStatus.queued(), 1500)
    assert reader.refuse(Operation("j-1")) is None


# Telemetry --------------------------------------------------------------------------------------


def test_a_followed_operation_records_each_state_it_went_through(telemetry: Telemetry) -> None:
    operation_url = "https://exports.example/v1/operations/7"
    source = Source(
        [reply(202, headers={"Operation-Location": operation_url})],
        [
            status("NotStarted"),
            status("Running", percentComplete=10),
            status("Running", percentComplete=90),
            status("Succeeded", resourceLocation="https://exports.example/v1/exports/7"),
        ],
    )
    adapter = make(telemetry, FakeClock(START), actor="billing-agent")
    envelope = follow(adapter, source)
    assert envelope.outcome_class is OutcomeClass.SUCCESS

    [span] = telemetry.spans()
    assert (span.attributes or {})["tool.lifecycle.state"] == "completed"
    assert span.end_time == START_NS + 4 * S
    assert [event.name for event in span.events] == ["tool.lifecycle"] * 4
    # Waits of 0.5, 0.5, 1 and 2 s: a repeated state (the second running) is no new event.
    assert [event.timestamp for event in span.events] == [
        START_NS,
        START_NS + S // 2,
        START_NS + S,
        START_NS + 4 * S,
    ]
    accepted_event, queued, running, completed = (dict(e.attributes or {}) for e in span.events)
    common = {
        "tool.name": "export",
        "tool.target": TARGET,
        "tool.operation.id": operation_url,
        "tool.provenance.source_system": "exports.example",
        "tool.provenance.actor": "billing-agent",
        "tool.provenance.adapter": ADAPTER_VERSION,
    }
    assert accepted_event == {
        **common,
        "tool.lifecycle.state": "accepted",
        "tool.evidence.kind": "job_id",
        "tool.evidence.value": operation_url,
    }
    assert queued == {**common, "tool.lifecycle.state": "queued"}
    assert running == {**common, "tool.lifecycle.state": "running"}
    assert completed == {
        **common,
        "tool.lifecycle.state": "completed",
        "tool.evidence.kind": "query",
        "tool.evidence.value": operation_url,
        "tool.resource.id": "https://exports.example/v1/exports/7",
    }


@pytest.mark.parametrize("mode", MODES)
def test_a_followed_operation_logs_its_acceptance_and_each_state_when_seen(
    telemetry: Telemetry, mode: Mode
) -> None:
    # What the pipeline could see as each status read started: log records and ended spans.
    watched: list[tuple[int, int]] = []

    class Watched(Source):
        def read(self, operation: Operation, context: AttemptContext) -> HttpExchange:
            watched.append((len(telemetry.log_records()), len(telemetry.spans())))
            return super().read(operation, context)

    source = Watched(
        [accepted()],
        [status("NotStarted"), status("Running"), status("Running"), status("Succeeded")],
    )
    envelope = follow(make(telemetry, FakeClock(START)), source, mode)
    assert envelope.outcome_class is OutcomeClass.SUCCESS
    # Accepted before the first read, then queued and running as they are read; the second
    # running is no new state.
    assert watched == [(1, 0), (2, 0), (3, 0), (3, 0)]
    [span] = telemetry.spans()
    records = [emitted.log_record for emitted in telemetry.log_records()]
    assert [(record.attributes or {})["tool.lifecycle.state"] for record in records] == [
        "accepted",
        "queued",
        "running",
        "completed",
    ]
    context = span.get_span_context()
    assert context is not None
    assert len(records) == len(span.events)
    for record, event in zip(records, span.events, strict=True):
        assert record.event_name == event.name == "tool.lifecycle"
        assert (record.trace_id, record.span_id) == (context.trace_id, context.span_id)
        assert record.timestamp == event.timestamp
        assert list((record.attributes or {}).items()) == list((event.attributes or {}).items())


def test_a_resumed_following_logs_the_state_of_its_first_read_first(
    telemetry: Telemetry,
) -> None:
    source = Source([], [status("Running"), status("Failed", error={"message": "disk full"})])
    envelope = make(telemetry, FakeClock(START)).resume(OPERATION, source.read)
    assert envelope.outcome_class is OutcomeClass.ACCESS_FAILURE
    [span] = telemetry.spans()
    records = [emitted.log_record for emitted in telemetry.log_records()]
    assert [(record.attributes or {})["tool.lifecycle.state"] for record in records] == [
        "running",
        "failed",
    ]
    assert [event.name for event in span.events] == [
        "tool.lifecycle",
        "tool.lifecycle",
        "tool.outcome",
    ], "the terminal event is the span's only"
    assert (span.attributes or {})["tool.lifecycle.state"] == "failed"


def test_a_followed_operation_is_counted_by_how_it_ended_never_as_accepted(
    telemetry: Telemetry,
) -> None:
    adapter = make(telemetry, FakeClock(START), operation_deadline=timedelta(seconds=60))
    for end in (status("Succeeded"), status("Running")):
        follow(adapter, Source([accepted()], [end]))

    points = telemetry.metric_points(OUTCOMES_COUNTER)
    assert not any("tool.lifecycle.state" in dict(key) for key in points), points
    assert telemetry.outcomes() == {"success": 1, "empty": 0, "partial": 0, "access_failure": 1}
    # The terminal event stays the last of its span, after the operation's states.
    deadline = events(telemetry)
    assert [name for name, _ in deadline] == ["tool.lifecycle", "tool.lifecycle", "tool.outcome"]
    terminal = deadline[-1][1]
    assert terminal["tool.failure.kind"] == "deadline"
    assert terminal["tool.retry.action"] == "exhausted"
    assert terminal["tool.retry.attempt"] == 2
    assert terminal["tool.evidence.kind"] == "job_id"


def test_the_terminal_event_stays_last_when_reads_take_fractions_of_a_millisecond(
    telemetry: Telemetry,
) -> None:
    clock = FakeClock(START)
    answers = deque([status("Running"), status("PartiallySucceeded", covered="half")])

    def read(operation: Operation, context: AttemptContext) -> HttpExchange:
        clock.advance(1_700_000)
        return answers.popleft()

    envelope = make(telemetry, clock).call_and_follow(Source([accepted()], []).start, read)
    assert envelope.outcome_class is OutcomeClass.PARTIAL
    span = telemetry.spans()[-1]
    names = [event.name for event in span.events]
    assert names == ["tool.lifecycle", "tool.lifecycle", "tool.lifecycle", "tool.outcome"]
    times = [event.timestamp for event in span.events]
    assert times == sorted(times)
    assert times[-2] == times[-1], "the partial state and the terminal event share a moment"


# Settings ---------------------------------------------------------------------------------------


def test_following_needs_a_status_reader(telemetry: Telemetry) -> None:
    adapter = Adapter("export", TARGET, HttpClassifier(NotFound.UNREACHABLE))
    with pytest.raises(TypeError, match="needs a status reader"):
        adapter.call_and_follow(Source([accepted()], []).start, Source([], []).read)
    with pytest.raises(TypeError, match="needs a status reader"):
        adapter.resume(OPERATION, Source([], []).read)


def test_the_operation_deadline_is_ten_minutes_unless_set() -> None:
    adapter = Adapter("export", TARGET, HttpClassifier(NotFound.UNREACHABLE))
    assert adapter.operation_deadline_ns == 600 * S
    with pytest.raises(ValueError, match="operation_deadline must be positive"):
        Adapter(
            "export",
            TARGET,
            HttpClassifier(NotFound.UNREACHABLE),
            operation_deadline=timedelta(0),
        )


def test_the_sync_path_refuses_an_async_status_read(telemetry: Telemetry) -> None:
    adapter = make(telemetry, FakeClock(START))
    with pytest.raises(TypeError, match="use acall_and_follow or aresume"):
        adapter.resume(OPERATION, Source([], [status("Running")]).aread)


@pytest.mark.parametrize(
    ("make_status", "message"),
    [
        (lambda: OperationStatus(LifecycleState.ACCEPTED), "never says accepted"),
        (lambda: OperationStatus(LifecycleState.COMPLETED, {"rows": 1}), "needs verified_by"),
        (lambda: OperationStatus(LifecycleState.RUNNING, {"rows": 1}), "carries no result"),
        (lambda: OperationStatus(LifecycleState.QUEUED, percent_complete=3), "no percent"),
        (lambda: OperationStatus(LifecycleState.FAILED), "needs reason"),
        (
            lambda: OperationStatus(LifecycleState.PARTIAL, covered="half"),
            "needs dropped",
        ),
    ],
)
def test_a_status_that_breaks_its_states_rules_is_refused(make_status: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_status()
