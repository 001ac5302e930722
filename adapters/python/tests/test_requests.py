"""The requests integration against a real HTTP server on the loopback."""

from __future__ import annotations

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
    RetryPolicy,
    Success,
    TransportError,
    TransportErrorKind,
)

from .conftest import Server, Telemetry

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


def test_a_response_already_read_feeds_the_classifier(server: Server) -> None:
    response = requests.get(server.url + "/none", timeout=5)
    classification = HttpClassifier(NotFound.UNREACHABLE, items_at="/items").classify(
        candor_requests.from_response(response)
    )
    assert classification.outcome.CLASS.value == "empty"


def _attempt() -> AttemptContext:
    return AttemptContext(number=1, timeout_ns=5_000_000_000)
