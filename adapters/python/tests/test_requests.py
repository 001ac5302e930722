"""The requests integration against a real HTTP server on the loopback."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import requests

import candor.integrations.requests as candor_requests
from candor import (
    AccessFailure,
    AccessFailureKind,
    Adapter,
    AttemptContext,
    Envelope,
    HttpClassifier,
    HttpExchange,
    NotFound,
    Partial,
    PartialKind,
    RetryAction,
    RetryPolicy,
    Success,
    TransportError,
    TransportErrorKind,
)

from .conftest import STALLED_BODY, Server, Telemetry

FAST = RetryPolicy(
    max_attempts=2, initial_backoff=timedelta(milliseconds=1), max_backoff=timedelta(milliseconds=2)
)


def adapter(base: str, telemetry: Telemetry, **settings: object) -> Adapter[HttpExchange]:
    return Adapter(
        "search",
        base,
        HttpClassifier(NotFound.UNREACHABLE, items_at="/items"),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        **{"retry": FAST, **settings},  # type: ignore[arg-type]
    )


def get(server: Server, telemetry: Telemetry, path: str, **settings: object) -> Envelope:
    with requests.Session() as session:
        return candor_requests.call(
            adapter(server.url, telemetry, **settings), session, "GET", server.url + path
        )


def test_a_complete_answer_is_a_success(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/items")
    assert isinstance(envelope.outcome, Success)
    assert envelope.outcome.extent.items == 2
    assert envelope.evidence is not None
    assert envelope.evidence.value == "req-42"


def test_401_is_a_permanent_auth_failure(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/auth")
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.AUTH
    assert "s3cret" not in envelope.outcome.failure.message
    assert server.hits["/auth"] == 1


def test_500_is_retried(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/error")
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.status == 500
    assert server.hits["/error"] == 2


def test_a_closed_port_is_a_connect_failure(closed_port: int) -> None:
    with requests.Session() as session:
        exchange = candor_requests.request(
            session, "GET", f"http://127.0.0.1:{closed_port}/", _attempt()
        )
    assert isinstance(exchange, TransportError)
    assert exchange.kind is TransportErrorKind.CONNECT


def test_a_body_cut_short_is_a_partial_mid_stream(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/truncated")
    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.truncation.kind is PartialKind.MID_STREAM
    assert envelope.outcome.payload == '{"items":[1,2,'


def test_a_body_past_the_size_cap_is_a_partial_size_cap(server: Server) -> None:
    with requests.Session() as session:
        exchange = candor_requests.request(
            session, "GET", server.url + "/big", _attempt(), max_body_bytes=100
        )
    classification = HttpClassifier(NotFound.UNREACHABLE).classify(exchange)
    assert isinstance(classification.outcome, Partial)
    assert classification.outcome.truncation.kind is PartialKind.SIZE_CAP


def test_a_gzip_body_is_read_whole(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/gzip")
    assert isinstance(envelope.outcome, Success)
    assert envelope.outcome.extent.items == 3


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/disconnect", TransportErrorKind.RESET), ("/garbage", TransportErrorKind.PROTOCOL)],
)
def test_a_connection_that_gives_no_http_answer(
    server: Server, path: str, kind: TransportErrorKind
) -> None:
    with requests.Session() as session:
        exchange = candor_requests.request(session, "GET", server.url + path, _attempt())
    assert isinstance(exchange, TransportError)
    assert exchange.kind is kind


def test_the_attempt_timeout_reaches_the_client(server: Server, telemetry: Telemetry) -> None:
    envelope = get(
        server,
        telemetry,
        "/hang",
        attempt_timeout=timedelta(milliseconds=200),
        retry=RetryPolicy.no_retry(),
    )
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.TIMEOUT


def test_a_body_that_stalls_past_the_attempts_time_is_what_arrived(
    server: Server, telemetry: Telemetry
) -> None:
    short = {"attempt_timeout": timedelta(milliseconds=300), "retry": RetryPolicy.no_retry()}
    envelope = get(server, telemetry, "/stall", **short)
    assert isinstance(envelope.outcome, Partial), envelope.outcome
    assert envelope.outcome.payload == STALLED_BODY.decode()
    truncation = envelope.outcome.truncation
    assert truncation.kind is PartialKind.MID_STREAM
    assert truncation.covered == f"the first {len(STALLED_BODY)} bytes of the body"
    assert truncation.dropped == (
        "the rest of the body (the attempt's 0.3s ran out while it was arriving)"
    )
    assert envelope.attempts[0].retry_action is RetryAction.ACCEPT_PARTIAL
    assert envelope.attempts[0].duration_ms >= 300
    # No status within the attempt's time: nothing arrived, an AccessFailure.
    hung = get(server, telemetry, "/hang", **short)
    assert isinstance(hung.outcome, AccessFailure)
    assert hung.outcome.failure.kind is AccessFailureKind.TIMEOUT
    assert hung.outcome.failure.status is None


def test_a_body_that_trickles_past_the_attempts_time_is_cut_there(
    server: Server, telemetry: Telemetry
) -> None:
    started = time.monotonic()
    envelope = get(
        server,
        telemetry,
        "/trickle",
        attempt_timeout=timedelta(milliseconds=300),
        retry=RetryPolicy.no_retry(),
    )
    assert time.monotonic() - started < 1.5, "each byte came in time for requests' own timeout"
    assert isinstance(envelope.outcome, Partial), envelope.outcome
    payload = envelope.outcome.payload
    assert isinstance(payload, str)
    assert payload.startswith("[1")
    assert envelope.outcome.truncation.covered == f"the first {len(payload)} bytes of the body"
    assert "ran out" in envelope.outcome.truncation.dropped


def test_a_session_whose_connection_was_cut_answers_the_next_call(
    server: Server, telemetry: Telemetry
) -> None:
    search = adapter(
        server.url,
        telemetry,
        attempt_timeout=timedelta(milliseconds=300),
        retry=RetryPolicy.no_retry(),
    )
    with requests.Session() as session:
        cut = candor_requests.call(search, session, "GET", server.url + "/trickle")
        after = candor_requests.call(search, session, "GET", server.url + "/items")
    assert isinstance(cut.outcome, Partial)
    assert isinstance(after.outcome, Success)


def test_a_response_already_read_feeds_the_classifier(server: Server) -> None:
    response = requests.get(server.url + "/none", timeout=5)
    classification = HttpClassifier(NotFound.UNREACHABLE, items_at="/items").classify(
        candor_requests.from_response(response)
    )
    assert classification.outcome.CLASS.value == "empty"


def _attempt() -> AttemptContext:
    return AttemptContext(number=1, timeout_ns=5_000_000_000)
