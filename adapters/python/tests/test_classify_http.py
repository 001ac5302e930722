"""The HTTP classifier's rules that the vectors leave to each implementation's own wording."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from candor import (
    AccessFailure,
    AccessFailureKind,
    ArrivalClassifier,
    BodyBroken,
    BodySizeCap,
    BodyTimedOut,
    Empty,
    EvidenceKind,
    HttpArrival,
    HttpClassifier,
    HttpResponse,
    LifecycleState,
    NotFound,
    Partial,
    PartialKind,
    Success,
    TransportError,
    TransportErrorKind,
    redact_text,
)
from candor.classify.http._exchange import _VISIBLE, _visible
from candor.classify.http._parse import (
    _CONTROLS_AS_SPACES,
    _WHITE_SPACE,
    BODY_SNIPPET_CHARS,
    _body_snippet,
)
from candor.jsonscan import OUT_OF_RANGE, first_error
from candor.jsonvalue import (
    BodyParseError,
    JsonValue,
    _check,
    _OutOfRangeError,
    _parse_float,
    _parse_int,
    _refuse_constant,
    loads_body,
)

ARRIVED = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
CLASSIFIER = HttpClassifier(NotFound.UNREACHABLE, items_at="/items")


def nested(arrays: int, *, objects: int = 0) -> bytes:
    """A document ``objects`` objects deep (``{"a":…}``) around ``arrays`` nested arrays."""
    return b'{"a":' * objects + b"[" * arrays + b"]" * arrays + b"}" * objects


def failure(response: HttpResponse) -> AccessFailure:
    outcome = CLASSIFIER.classify(response).outcome
    assert isinstance(outcome, AccessFailure)
    return outcome


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("2", 2000),
        (" +3 ", 3000),
        ("Fri, 15 Jan 2027 08:00:05 GMT", 5000),
        ("Fri, 15 Jan 2027 07:59:00 GMT", 0),
        ("Friday, 15-Jan-27 08:00:01 GMT", 1000),
        ("Fri Jan 15 08:00:02 2027", 2000),
        ("Thu, 15 Jan 2027 08:00:05 GMT", None),
        ("Fri, 15 Jan 2027 08:00:05 +0000", None),
        ("Fri, 15 Jan 2027 08:00:60 GMT", None),
        ("soon", None),
        ("1_0", None),
    ],
)
def test_retry_after_is_seconds_or_a_date(header: str, wait: int | None) -> None:
    response = HttpResponse(503, {"Retry-After": header}, received_at=ARRIVED)
    assert failure(response).failure.retry_after_ms == wait


def test_retry_after_is_read_only_for_a_retryable_status() -> None:
    assert failure(HttpResponse(400, {"Retry-After": "2"})).failure.retry_after_ms is None


def test_a_status_message_names_the_status_and_the_redacted_snippet() -> None:
    message = failure(HttpResponse(502, body=b"upstream\nsaid\ttoken=abc")).failure.message
    assert message == "HTTP 502 Bad Gateway: upstream said token=REDACTED"
    assert failure(HttpResponse(599)).failure.message == "HTTP 599"
    long = failure(HttpResponse(500, body=b"x" * 500)).failure.message
    assert long == "HTTP 500 Internal Server Error: " + "x" * 200


def test_other_statuses_are_protocol_failures() -> None:
    for status in (101, 302, 600):
        outcome = failure(HttpResponse(status))
        assert outcome.failure.kind is AccessFailureKind.PROTOCOL
        assert not outcome.failure.retryable


def test_a_body_shorter_than_its_content_length_is_partial() -> None:
    outcome = CLASSIFIER.classify(HttpResponse(200, {"Content-Length": "99"}, b"[]")).outcome
    assert isinstance(outcome, Partial)
    assert outcome.truncation.dropped == "99 bytes declared by Content-Length"


def test_json_that_ends_early_is_partial_and_other_bad_json_is_not_json() -> None:
    cut = CLASSIFIER.classify(HttpResponse(200, body=b'{"items":[1,2')).outcome
    assert isinstance(cut, Partial)
    assert cut.truncation.dropped == (
        "the rest of the JSON document (Expecting ',' delimiter: line 1 column 14 (char 13))"
    )
    bad = failure(HttpResponse(200, body=b'{"items":[1,2]}x'))
    assert bad.failure.message == "2xx body is not JSON: Extra data: line 1 column 16 (char 15)"
    assert bad.failure.retryable


@pytest.mark.parametrize(
    ("body", "eof", "message"),
    [
        (b"[1,2", True, "Expecting ',' delimiter: line 1 column 5 (char 4)"),
        (b'{"a":', True, "Expecting value: line 1 column 6 (char 5)"),
        (b'{"a"', True, "Expecting ':' delimiter: line 1 column 5 (char 4)"),
        (b"{", True, "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (b'"abc', True, "Unterminated string starting at: line 1 column 1 (char 0)"),
        (b'["\\u12', True, "Unterminated string starting at: line 1 column 2 (char 1)"),
        (b"[1.", True, "Unterminated number starting at: line 1 column 2 (char 1)"),
        (b"[1e+", True, "Unterminated number starting at: line 1 column 2 (char 1)"),
        (b"[tr", True, "Expecting value: line 1 column 2 (char 1)"),
        (b"[-", False, "Expecting value: line 1 column 2 (char 1)"),
        (b"[01]", False, "Invalid number: line 1 column 2 (char 1)"),
        (b"[1.x]", False, "Invalid number: line 1 column 2 (char 1)"),
        (b"abc", False, "Expecting value: line 1 column 1 (char 0)"),
        (b"[1,]", False, "Illegal trailing comma before end of array: line 1 column 3 (char 2)"),
        (
            b'{"a":1,}',
            False,
            "Illegal trailing comma before end of object: line 1 column 7 (char 6)",
        ),
        (
            b"{1:2}",
            False,
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (b"[1 2]", False, "Expecting ',' delimiter: line 1 column 4 (char 3)"),
        (b"\n[nul]", False, "Expecting value: line 2 column 2 (char 2)"),
        (b"[NaN]", False, "Expecting value: line 1 column 2 (char 1)"),
        (b"[1e999]", False, "Number too large for a float"),
        (nested(200), False, "Nesting deeper than 127 levels: line 1 column 128 (char 127)"),
        (b'"\\ud800"', False, "Unpaired surrogate in \\uXXXX escape: line 1 column 2 (char 1)"),
        (b'"\\udc00"', False, "Unpaired surrogate in \\uXXXX escape: line 1 column 2 (char 1)"),
        (b'"\\x"', False, "Invalid \\escape: line 1 column 2 (char 1)"),
        (b'"\\u12x4"', False, "Invalid \\uXXXX escape: line 1 column 3 (char 2)"),
        (b'["a\x01"]', False, "Invalid control character at: line 1 column 4 (char 3)"),
        (b'["\xc3\xa9\xff"]', False, "Invalid UTF-8 in string: line 1 column 4 (char 3)"),
        (b'["\xc3\xa9", x]', False, "Expecting value: line 1 column 7 (char 6)"),
        (b"[1] x", False, "Extra data: line 1 column 5 (char 4)"),
    ],
)
def test_body_parse_errors_say_whether_the_document_ended_early(
    body: bytes, eof: bool, message: str
) -> None:
    with pytest.raises(BodyParseError) as caught:
        loads_body(body)
    assert (caught.value.eof, caught.value.message) == (eof, message)


@pytest.mark.parametrize(
    "body",
    [b"[1,2", b'{"a":', b'{"a" 1}', b'"abc', b"abc", b"[1 2]", b'"\\x"', b'["a\x01"]', b"[1] x"],
)
def test_a_parse_error_reads_as_the_one_json_gives(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(body)
    with pytest.raises(BodyParseError) as caught:
        loads_body(body)
    assert caught.value.message == str(expected.value)


def test_numbers_are_read_as_the_rust_reader_reads_them() -> None:
    assert loads_body(b"[18446744073709551615, 18446744073709551616, -0]") == [
        18446744073709551615,
        1.8446744073709552e19,
        -0.0,
    ]


def _texts() -> list[str]:
    """Short texts over ASCII, controls (C0, DEL, C1), tabs and other unprintable characters."""
    alphabet = ["a", "Z", " ", "~", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", "\x85", "\x9f"]
    alphabet += ["\xa0", "\u2028", "\u200b", "\ufffd", "\U0001f600", "é", "=", ":"]
    rng = random.Random(7)  # noqa: S311 - test data, not a secret
    return ["", *alphabet] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(3_000)
    ]


def test_a_header_value_is_visible_exactly_when_the_pattern_says_so() -> None:
    for text in _texts():
        assert _visible(text) is (_VISIBLE.fullmatch(text) is not None), repr(text)


def test_a_snippet_reads_every_control_character_as_a_space() -> None:
    for text in _texts():
        body = text.encode("utf-8")
        want = redact_text(text.translate(_CONTROLS_AS_SPACES).strip(_WHITE_SPACE))
        assert _body_snippet(body) == want, repr(text)


def test_a_snippet_is_the_start_of_the_whole_body_decoded() -> None:
    """Decoding only the bytes a snippet can hold gives what decoding the whole body gives."""
    pieces = [b"a", b" ", "\u00e9".encode(), "\u20ac".encode(), "\U0001f600".encode()]
    # Invalid UTF-8: a lone continuation byte, cut sequences, a surrogate, past U+10FFFF.
    pieces += [b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f", b"\xed\xa0\x80"]
    pieces += [b"\xf4\x90\x80\x80"]
    rng = random.Random(11)  # noqa: S311 - test data, not a secret
    for _ in range(2_000):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randint(150, 900)))
        whole = body.decode("utf-8", errors="replace")[:BODY_SNIPPET_CHARS]
        want = redact_text(whole.translate(_CONTROLS_AS_SPACES).strip(_WHITE_SPACE))
        assert _body_snippet(body) == want, body


def _reference_loads_body(data: bytes) -> JsonValue:
    """:func:`loads_body` with a decoder made per call and every value walked by ``_check``."""
    try:
        text = data.decode("utf-8")
        value: JsonValue = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
        )
        _check(value)
    except _OutOfRangeError:
        raise BodyParseError(OUT_OF_RANGE, eof=False) from None
    except (ValueError, RecursionError):
        message, eof = first_error(data)
        raise BodyParseError(message, eof=eof) from None
    return value


def _read(read: Callable[[bytes], JsonValue], body: bytes) -> tuple[str, object]:
    try:
        return "value", repr(read(body))
    except BodyParseError as error:
        return "error", (error.message, error.eof)


@pytest.mark.parametrize(
    "body",
    [
        b'{"items":[1,2],"next":null}',
        b"\xef\xbb\xbf[1]",
        b"\xef\xbb\xbf",
        b" \xef\xbb\xbf{}",
        nested(127),
        nested(128),
        nested(64, objects=63),
        nested(64, objects=64),
        b'["' + b"[" * 200 + b'"]',
        b'"\\udc00"',
        b'"\\ud800x"',
        b'{"\\ud800":1}',
        b'["\\ud83d\\ude00"]',
        b'"\\\\u"',
        b'{"a":1,"a":2}',
        b"[-0, 1.5e3, 18446744073709551616, 1e999]",
        b"[NaN, Infinity]",
        b"\xff",
        b"",
    ],
)
def test_bodies_are_read_as_by_a_decoder_made_per_call(body: bytes) -> None:
    assert _read(loads_body, body) == _read(_reference_loads_body, body)


def test_a_202_is_an_acceptance_named_by_the_body_location_or_request_id() -> None:
    by_body = HttpClassifier(NotFound.UNREACHABLE, operation_id_at="/job/id")
    classification = by_body.classify(
        HttpResponse(202, {"Location": "/jobs/7"}, b'{"job":{"id":7}}')
    )
    assert classification.lifecycle is not None
    assert classification.lifecycle.state is LifecycleState.ACCEPTED
    assert classification.lifecycle.operation.id == "7"
    assert classification.lifecycle.operation.status_url == "/jobs/7"
    assert classification.evidence is not None
    assert classification.evidence.kind is EvidenceKind.JOB_ID
    by_request_id = CLASSIFIER.classify(HttpResponse(202, {"X-Request-Id": "r-1"}, b"not json"))
    assert isinstance(by_request_id.outcome, Success)
    assert by_request_id.outcome.payload is None
    assert by_request_id.lifecycle is not None
    assert by_request_id.lifecycle.operation.id == "r-1"
    nameless = [CLASSIFIER.classify(HttpResponse(202)) for _ in range(1000)]
    ids = {c.lifecycle.operation.id for c in nameless if c.lifecycle is not None}
    assert len(ids) == 1000, "acceptances whose source named nothing never share an id"
    assert all(re.fullmatch(r"candor-[0-9a-f]{32}", id) for id in ids)
    assert all(c.lifecycle is not None and c.lifecycle.operation.generated for c in nameless)
    assert all(c.evidence is None for c in nameless), "a made-up id is no evidence"
    assert not by_request_id.lifecycle.operation.generated
    cut = CLASSIFIER.classify(HttpResponse(202, body=b"{}", body_end=BodySizeCap(2)))
    assert isinstance(cut.outcome, Partial)


def test_truncation_markers_and_has_more() -> None:
    marked = HttpClassifier(
        NotFound.UNREACHABLE, items_at="/items", truncated_when=[("/truncated", True)]
    )
    outcome = marked.classify(HttpResponse(200, body=b'{"items":[],"truncated":true}')).outcome
    assert isinstance(outcome, Partial)
    assert outcome.truncation.kind is PartialKind.TRUNCATION_MARKER
    assert outcome.truncation.dropped == "an unknown remainder (/truncated is true)"
    not_one = marked.classify(HttpResponse(200, body=b'{"items":[1],"truncated":1}')).outcome
    assert isinstance(not_one, Success)
    paged = HttpClassifier(NotFound.UNREACHABLE, has_more_at=("/more", "/next"))
    for body, cls in [
        (b'{"more":true}', Partial),
        (b'{"more":true,"next":""}', Partial),
        (b'{"more":true,"next":0}', Success),
        (b'{"more":1}', Success),
    ]:
        assert isinstance(paged.classify(HttpResponse(200, body=body)).outcome, cls), body


def test_the_total_header_and_headers_that_are_not_text() -> None:
    response = HttpResponse(200, [("X-Total-Count", "5"), ("X-Request-Id", "r\u00e9")], b"[1]")
    classification = HttpClassifier(NotFound.UNREACHABLE).classify(response)
    assert isinstance(classification.outcome, Partial)
    assert classification.evidence is None
    no_header = HttpClassifier(NotFound.UNREACHABLE, total_header=None)
    assert isinstance(no_header.classify(response).outcome, Success)


def test_blank_bodies_and_404s() -> None:
    assert isinstance(CLASSIFIER.classify(HttpResponse(200, body=b" \r\n")).outcome, Empty)
    assert isinstance(failure(HttpResponse(200, body=b"\x0b")).failure, object)
    absent = HttpClassifier(NotFound.CONFIRMED_ABSENT, scope="orders")
    outcome = absent.classify(HttpResponse(404)).outcome
    assert isinstance(outcome, Empty)
    assert outcome.extent.scope == "orders"
    assert failure(HttpResponse(404)).failure.kind is AccessFailureKind.CLIENT_ERROR


def test_transport_errors() -> None:
    for kind, error_type in [
        (TransportErrorKind.CONNECT, "connect_error"),
        (TransportErrorKind.RESET, "connection_reset"),
        (TransportErrorKind.TIMEOUT, "timeout"),
        (TransportErrorKind.PROTOCOL, "http_protocol_error"),
    ]:
        outcome = CLASSIFIER.classify(TransportError(kind, "x")).outcome
        assert isinstance(outcome, AccessFailure)
        assert outcome.failure.error_type == error_type
        assert outcome.failure.retryable
    with pytest.raises(ValueError, match="100 to 999"):
        HttpResponse(42)


def test_a_body_cut_by_the_attempts_time_is_partial_with_the_bytes_that_arrived() -> None:
    cut = HttpResponse(200, body=b'{"items":[1,2,', body_end=BodyTimedOut(1_500_000_000))
    outcome = CLASSIFIER.classify(cut).outcome
    assert isinstance(outcome, Partial)
    assert outcome.payload == '{"items":[1,2,'
    assert outcome.truncation.kind is PartialKind.MID_STREAM
    assert outcome.truncation.covered == "the first 14 bytes of the body"
    assert outcome.truncation.dropped == (
        "the rest of the body (the attempt's 1.5s ran out while it was arriving)"
    )
    assert outcome.truncation.returned is None
    assert outcome.truncation.expected is None


def test_a_202_cut_by_the_attempts_time_is_no_acceptance() -> None:
    cut = CLASSIFIER.classify(HttpResponse(202, body=b"{}", body_end=BodyTimedOut(300_000_000)))
    assert isinstance(cut.outcome, Partial)
    assert cut.lifecycle is None
    assert cut.outcome.truncation.dropped == (
        "the rest of the body (the attempt's 0.3s ran out while it was arriving)"
    )


def test_a_failing_status_cut_by_the_attempts_time_is_classified_by_its_status() -> None:
    cut = HttpResponse(500, body=b"upstream overlo", body_end=BodyTimedOut(2_000_000_000))
    outcome = CLASSIFIER.classify(cut).outcome
    assert isinstance(outcome, AccessFailure)
    assert outcome.failure.kind is AccessFailureKind.SERVER_ERROR
    assert outcome.failure.message == "HTTP 500 Internal Server Error: upstream overlo"
    assert outcome.failure.retryable


def test_an_arrival_is_cut_where_its_body_was_unless_the_body_had_ended() -> None:
    arrival = HttpArrival(200, {"Content-Type": "application/json"}, received_at=7)
    assert arrival.body_end is None
    arrival.add(b'{"items":')
    arrival.add(b"[1,")
    assert arrival.size == 12
    assert arrival.body == b'{"items":[1,'
    cut = arrival.cut(2_000_000_000)
    assert cut.body == b'{"items":[1,'
    assert cut.body_end == BodyTimedOut(2_000_000_000)
    assert cut.headers == (("content-type", "application/json"),)
    assert cut.received_at_ns == 7
    arrival.add(b"2]}")
    whole = arrival.finish()
    assert whole.body == b'{"items":[1,2]}'
    assert isinstance(CLASSIFIER.classify(whole).outcome, Success)
    assert arrival.cut(2_000_000_000).body_end == whole.body_end, "a body that ended stays so"
    broken = HttpArrival(200)
    broken.finish(BodyBroken("reset"))
    assert broken.cut(1).body_end == BodyBroken("reset")
    with pytest.raises(ValueError, match="100 to 999"):
        HttpArrival(42)


def test_the_http_classifier_classifies_arrivals() -> None:
    assert isinstance(CLASSIFIER, ArrivalClassifier)
    arrival = HttpArrival(200)
    arrival.add(b"[1,")
    outcome = CLASSIFIER.classify_arrival(arrival, 10_000_000_000).outcome
    assert isinstance(outcome, Partial)
    assert outcome.truncation.dropped == (
        "the rest of the body (the attempt's 10s ran out while it was arriving)"
    )
