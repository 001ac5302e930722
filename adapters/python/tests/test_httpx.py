"""The httpx integration against a real HTTP server on the loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

import candor.integrations.httpx as candor_httpx
from candor import (
    AccessFailure,
    AccessFailureKind,
    Adapter,
    AttemptContext,
    Empty,
    Envelope,
    HttpClassifier,
    HttpExchange,
    HttpResponse,
    NextAction,
    NotFound,
    OutcomeClass,
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
    max_attempts=3, initial_backoff=timedelta(milliseconds=1), max_backoff=timedelta(milliseconds=2)
)


def adapter(base: str, telemetry: Telemetry, **settings: object) -> Adapter[HttpExchange]:
    return Adapter(
        "search",
        base + "?token=s3cret",
        HttpClassifier(NotFound.UNREACHABLE, items_at="/items"),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        **{"retry": FAST, **settings},  # type: ignore[arg-type]
    )


def get(server: Server, telemetry: Telemetry, path: str, **settings: object) -> Envelope:
    with httpx.Client() as client:
        return candor_httpx.call(
            adapter(server.url, telemetry, **settings), client, "GET", server.url + path
        )


def test_a_complete_answer_is_a_success_with_the_request_id(
    server: Server, telemetry: Telemetry
) -> None:
    envelope = get(server, telemetry, "/items")
    assert isinstance(envelope.outcome, Success)
    assert envelope.outcome.payload == {"items": [1, 2]}
    assert envelope.outcome.extent.items == 2
    assert envelope.evidence is not None
    assert envelope.evidence.value == "req-42"
    assert envelope.target == server.url + "?token=REDACTED"
    assert envelope.provenance.source_system == server.url.removeprefix("http://")
    assert telemetry.spans() == []
    assert telemetry.outcomes() == {"success": 1, "empty": 0, "partial": 0, "access_failure": 0}


def test_no_items_is_empty(server: Server, telemetry: Telemetry) -> None:
    assert isinstance(get(server, telemetry, "/none").outcome, Empty)


def test_401_is_a_permanent_auth_failure_with_the_credential_redacted(
    server: Server, telemetry: Telemetry
) -> None:
    envelope = get(server, telemetry, "/auth")
    assert isinstance(envelope.outcome, AccessFailure)
    failure = envelope.outcome.failure
    assert failure.kind is AccessFailureKind.AUTH
    assert not failure.retryable
    assert failure.message == 'HTTP 401 Unauthorized: {"error":"bad token=REDACTED"}'
    assert len(envelope.attempts) == 1
    assert envelope.next_actions == (NextAction.ESCALATE,)
    assert server.hits["/auth"] == 1


def test_500_is_retried_until_the_budget_runs_out(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/error")
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.SERVER_ERROR
    assert [a.retry_action for a in envelope.attempts] == [
        RetryAction.RETRY,
        RetryAction.RETRY,
        RetryAction.EXHAUSTED,
    ]
    assert server.hits["/error"] == 3
    [span] = telemetry.spans()
    assert len(span.events) == 3
    assert telemetry.outcomes()["access_failure"] == 1


def test_a_transient_failure_then_an_answer_is_a_success(
    server: Server, telemetry: Telemetry
) -> None:
    envelope = get(server, telemetry, "/flaky")
    assert isinstance(envelope.outcome, Success)
    assert [a.outcome_class for a in envelope.attempts] == [
        OutcomeClass.ACCESS_FAILURE,
        OutcomeClass.SUCCESS,
    ]
    assert envelope.attempts[0].status == 503


def test_a_closed_port_is_a_connect_failure(closed_port: int, telemetry: Telemetry) -> None:
    with httpx.Client() as client:
        exchange = candor_httpx.send(
            client, client.build_request("GET", f"http://127.0.0.1:{closed_port}/")
        )
    assert isinstance(exchange, TransportError)
    assert exchange.kind is TransportErrorKind.CONNECT
    base = f"http://127.0.0.1:{closed_port}"
    with httpx.Client() as client:
        envelope = candor_httpx.call(adapter(base, telemetry), client, "GET", base + "/items")
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.CONNECT
    assert envelope.outcome.failure.error_type == "connect_error"
    assert len(envelope.attempts) == 3


def test_a_body_cut_short_is_a_partial_mid_stream(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/truncated")
    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.truncation.kind is PartialKind.MID_STREAM
    assert envelope.outcome.payload == '{"items":[1,2,'
    assert envelope.outcome.truncation.dropped.startswith("the rest of the body (the stream broke")
    [span] = telemetry.spans()
    [event] = span.events
    assert event.attributes is not None
    assert event.attributes["tool.retry.action"] == "accept_partial"


def test_a_body_past_the_size_cap_is_a_partial_size_cap(
    server: Server, telemetry: Telemetry
) -> None:
    with httpx.Client() as client:
        envelope = candor_httpx.call(
            adapter(server.url, telemetry), client, "GET", server.url + "/big", max_body_bytes=1000
        )
    assert isinstance(envelope.outcome, Partial)
    assert envelope.outcome.truncation.kind is PartialKind.SIZE_CAP
    assert envelope.outcome.truncation.covered == "the first 1000 bytes of the body"
    assert isinstance(envelope.outcome.payload, str)
    assert len(envelope.outcome.payload) == 1000


def test_a_gzip_body_is_read_whole(server: Server, telemetry: Telemetry) -> None:
    envelope = get(server, telemetry, "/gzip")
    assert isinstance(envelope.outcome, Success)
    assert envelope.outcome.extent.items == 3


def test_a_connection_closed_before_an_answer_is_a_reset(server: Server) -> None:
    with httpx.Client() as client:
        exchange = candor_httpx.send(
            client, client.build_request("GET", server.url + "/disconnect")
        )
    assert isinstance(exchange, TransportError)
    assert exchange.kind is TransportErrorKind.RESET


def test_an_answer_that_is_not_http_is_a_protocol_failure(server: Server) -> None:
    with httpx.Client() as client:
        exchange = candor_httpx.send(client, client.build_request("GET", server.url + "/garbage"))
    assert isinstance(exchange, TransportError)
    assert exchange.kind is TransportErrorKind.PROTOCOL


def test_a_response_already_read_feeds_the_classifier(server: Server) -> None:
    with httpx.Client() as client:
        response = client.get(server.url + "/items")
    classification = HttpClassifier(NotFound.UNREACHABLE).classify(
        candor_httpx.from_response(response)
    )
    assert isinstance(classification.outcome, Success)


def test_the_async_client_and_the_attempt_timeout(server: Server, telemetry: Telemetry) -> None:
    search = adapter(
        server.url,
        telemetry,
        attempt_timeout=timedelta(milliseconds=200),
        retry=RetryPolicy.no_retry(),
    )

    async def run() -> tuple[Envelope, Envelope]:
        async with httpx.AsyncClient() as client:
            ok = await candor_httpx.acall(search, client, "GET", server.url + "/items")
            hung = await candor_httpx.acall(search, client, "GET", server.url + "/hang")
        return ok, hung

    ok, hung = asyncio.run(run())
    assert isinstance(ok.outcome, Success)
    assert isinstance(hung.outcome, AccessFailure)
    assert hung.outcome.failure.kind is AccessFailureKind.TIMEOUT
    assert hung.outcome.failure.retryable
    assert hung.next_actions == (NextAction.RETRY, NextAction.ESCALATE)
    assert hung.attempts[0].duration_ms >= 150


def test_the_sync_client_passes_the_attempt_timeout(server: Server, telemetry: Telemetry) -> None:
    envelope = get(
        server,
        telemetry,
        "/hang",
        attempt_timeout=timedelta(milliseconds=200),
        retry=RetryPolicy.no_retry(),
    )
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.TIMEOUT


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (httpx.ConnectError("refused"), TransportErrorKind.CONNECT),
        (httpx.ConnectTimeout("slow"), TransportErrorKind.TIMEOUT),
        (httpx.ReadTimeout("slow"), TransportErrorKind.TIMEOUT),
        (httpx.ReadError("reset by peer"), TransportErrorKind.RESET),
        (httpx.RemoteProtocolError("illegal status line"), TransportErrorKind.PROTOCOL),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            TransportErrorKind.RESET,
        ),
    ],
)
def test_httpx_errors_map_onto_transport_errors(
    error: httpx.RequestError, kind: TransportErrorKind
) -> None:
    assert candor_httpx.transport_error(error).kind is kind


def test_a_post_answered_500_after_it_was_taken_is_sent_once(
    server: Server, telemetry: Telemetry
) -> None:
    with httpx.Client() as client:
        post = adapter(server.url, telemetry, method="POST")
        envelope = candor_httpx.call(post, client, "POST", server.url + "/orders", json={})
    assert isinstance(envelope.outcome, AccessFailure)
    assert not envelope.outcome.failure.retryable
    assert envelope.outcome.failure.message.startswith("the request may have been applied")
    assert envelope.next_actions == (NextAction.ESCALATE,)
    assert server.idempotency_keys == [None]


def test_a_post_with_an_idempotency_key_is_sent_again_with_the_same_key(
    server: Server, telemetry: Telemetry
) -> None:
    with httpx.Client() as client:
        keyed = adapter(server.url, telemetry, method="POST", idempotency_key=True)
        envelope = candor_httpx.call(keyed, client, "POST", server.url + "/orders", json={})
    assert isinstance(envelope.outcome, Success)
    first, second = server.idempotency_keys
    assert first is not None
    assert first == second
    assert first.startswith("candor-")


def test_a_request_whose_method_is_not_the_adapters_is_refused(
    server: Server, telemetry: Telemetry
) -> None:
    with httpx.Client() as client, pytest.raises(ValueError, match="method='POST'"):
        candor_httpx.call(adapter(server.url, telemetry), client, "POST", server.url + "/orders")
    assert server.idempotency_keys == []


def get_async(server: Server, telemetry: Telemetry, path: str, **settings: object) -> Envelope:
    async def run() -> Envelope:
        async with httpx.AsyncClient() as client:
            return await candor_httpx.acall(
                adapter(server.url, telemetry, **settings), client, "GET", server.url + path
            )

    return asyncio.run(run())


SHORT = {"attempt_timeout": timedelta(milliseconds=300), "retry": RetryPolicy.no_retry()}
"""An attempt timeout of 300 ms, and no retry."""


@pytest.mark.parametrize("call", [get, get_async], ids=["sync", "async"])
def test_a_body_that_stalls_past_the_attempts_time_is_what_arrived(
    server: Server, telemetry: Telemetry, call: Callable[..., Envelope]
) -> None:
    envelope = call(server, telemetry, "/stall", **SHORT)
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
    assert envelope.next_actions == (NextAction.FINISH, NextAction.ESCALATE)
    # No status within the attempt's time: nothing arrived, an AccessFailure.
    hung = call(server, telemetry, "/hang", **SHORT)
    assert isinstance(hung.outcome, AccessFailure)
    assert hung.outcome.failure.kind is AccessFailureKind.TIMEOUT
    assert hung.outcome.failure.status is None


def test_a_stalled_body_is_what_arrived_when_the_adapters_timer_fires_first(
    server: Server, telemetry: Telemetry
) -> None:
    search = adapter(server.url, telemetry, **SHORT)

    async def late_start(attempt: AttemptContext) -> HttpExchange:
        # The request starts 100 ms into the attempt: its own reading, timed from its start,
        # would stop 100 ms after the adapter's timer fires.
        await asyncio.sleep(0.1)
        async with httpx.AsyncClient() as client:
            return await candor_httpx.arequest(client, "GET", server.url + "/stall", attempt)

    envelope = asyncio.run(search.acall(late_start))
    assert isinstance(envelope.outcome, Partial), envelope.outcome
    assert envelope.outcome.payload == STALLED_BODY.decode()
    assert "the attempt's 0.3s ran out" in envelope.outcome.truncation.dropped
    assert 300 <= envelope.attempts[0].duration_ms < 1000


@pytest.mark.parametrize("call", [get, get_async], ids=["sync", "async"])
def test_a_body_that_trickles_past_the_attempts_time_is_cut_there(
    server: Server, telemetry: Telemetry, call: Callable[..., Envelope]
) -> None:
    started = time.monotonic()
    envelope = call(server, telemetry, "/trickle", **SHORT)
    assert time.monotonic() - started < 1.5, "each byte came in time for httpx's own timeout"
    assert isinstance(envelope.outcome, Partial), envelope.outcome
    payload = envelope.outcome.payload
    assert isinstance(payload, str)
    assert payload.startswith("[1")
    assert envelope.outcome.truncation.covered == f"the first {len(payload)} bytes of the body"


def test_a_client_whose_connection_was_cut_answers_the_next_call(
    server: Server, telemetry: Telemetry
) -> None:
    search = adapter(server.url, telemetry, **SHORT)
    with httpx.Client() as client:
        cut = candor_httpx.call(search, client, "GET", server.url + "/trickle")
        after = candor_httpx.call(search, client, "GET", server.url + "/items")
    assert isinstance(cut.outcome, Partial)
    assert isinstance(after.outcome, Success)


def test_a_status_that_arrives_after_the_attempts_time_is_a_timeout() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        time.sleep(0.1)
        return httpx.Response(200, json={"items": [1]})

    attempt = AttemptContext(number=1, timeout_ns=50_000_000)
    with httpx.Client(transport=httpx.MockTransport(slow)) as client:
        exchange = candor_httpx.request(client, "GET", "http://search.example/", attempt)
    assert isinstance(exchange, TransportError)
    assert exchange.kind is TransportErrorKind.TIMEOUT
    assert exchange.message == "no status within the attempt's 0.05s"
    assert attempt.arrival is None


def test_a_body_read_without_an_attempt_is_bounded_by_the_client_alone(server: Server) -> None:
    with httpx.Client() as client:
        exchange = candor_httpx.send(client, client.build_request("GET", server.url + "/items"))
    assert isinstance(exchange, HttpResponse)
    assert exchange.body == b'{"items":[1,2]}'
