"""The HTTP classifier: the rules of the contract for tools reached over HTTP.

What came back, and the outcome it is:

- no response (connect error, reset, malformed framing): AccessFailure, transient;
- 5xx, 429, 408: AccessFailure, transient (``Retry-After`` read);
- 401, 403: AccessFailure ``auth``, permanent;
- 404: the tool's declaration: ``confirmed_absent`` → Empty, ``unreachable`` → AccessFailure;
- other 4xx: AccessFailure ``client_error``, permanent;
- 1xx, 3xx: AccessFailure ``protocol``, permanent;
- 2xx whose body was cut (size cap, broken stream, the attempt's time running out while it
  arrived, ``Content-Length`` mismatch, JSON ending early): Partial;
- 2xx whose body is not JSON: AccessFailure ``protocol``, transient;
- 2xx whose declared collection is missing or not a list: AccessFailure ``protocol``,
  permanent;
- 2xx with a declared total (body field or ``X-Total-Count``) above the items returned:
  Partial ``declared_total``;
- 2xx with a truncation marker set, or ``has_more`` without a cursor: Partial
  ``truncation_marker``;
- 202 whose body arrived whole: Success with the lifecycle ``accepted``: accepted, never
  completed;
- 204, an empty body, ``null``, or an empty collection: Empty;
- any other 2xx: Success.

Where the collection sits in the body is the tool author's declaration (``items_at``); without
one, a top-level JSON array is the collection and any other JSON value is a single answer.

A response whose attempt's time ran out while it was arriving is classified as what had arrived
by then: a client integration records it as an :class:`HttpArrival` on the attempt's context
(:meth:`candor.AttemptContext.receiving`), and the adapter hands it to
:meth:`HttpClassifier.classify_arrival` (rule ``RETRY-ATTEMPT-TIMEOUT``).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final, Protocol, TypeAlias, runtime_checkable

from candor.classify import Classification
from candor.classify.httpdate import parse_http_date_ns
from candor.classify.reasons import REASONS
from candor.envelope import (
    AccessFailure,
    Empty,
    Evidence,
    Extent,
    Failure,
    Lifecycle,
    Operation,
    Outcome,
    Partial,
    Success,
    Truncation,
)
from candor.jsonvalue import (
    MISSING,
    BodyParseError,
    JsonValue,
    dumps,
    json_equal,
    json_type,
    loads_body,
    pointer,
)
from candor.redact import redact_text
from candor.retry import format_seconds
from candor.timestamps import datetime_from_ns, datetime_to_ns
from candor.vocab import AccessFailureKind, EvidenceKind, PartialKind

__all__ = [
    "ArrivalClassifier",
    "BodyBroken",
    "BodyComplete",
    "BodyEnd",
    "BodySizeCap",
    "BodyTimedOut",
    "HttpArrival",
    "HttpClassifier",
    "HttpExchange",
    "HttpResponse",
    "NotFound",
    "TransportError",
    "TransportErrorKind",
]

BODY_SNIPPET_CHARS: Final = 200
"""The most characters of a failing response's body repeated in a failure message."""


@dataclass(frozen=True, slots=True)
class BodyComplete:
    """The whole body arrived."""


@dataclass(frozen=True, slots=True)
class BodySizeCap:
    """Reading stopped at the client's size cap; the rest was not read."""

    limit: int
    """The cap, in bytes."""


@dataclass(frozen=True, slots=True)
class BodyBroken:
    """The connection broke while the body was arriving."""

    error: str
    """What the client reported."""


@dataclass(frozen=True, slots=True)
class BodyTimedOut:
    """The attempt's time ran out while the body was arriving.

    The time is the attempt's timeout, or what was left of the call's deadline: a timeout that
    landed mid-response cut the answer off.
    """

    after_ns: int
    """The attempt's time, in nanoseconds."""


BodyEnd: TypeAlias = BodyComplete | BodySizeCap | BodyBroken | BodyTimedOut
"""How the reading of a response body ended."""

Headers: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]]
"""Response headers: a mapping, or name-value pairs in order (a name may repeat)."""


_VISIBLE: Final = re.compile(r"[\t -~]*")


def _visible(value: str) -> bool:
    """Whether a header value is text a header may hold (visible ASCII, spaces, tabs)."""
    # Printable ASCII is visible ASCII and spaces; only a value with a tab or something
    # unprintable needs the pattern. (The string tests cost less than the match.)
    return (value.isascii() and value.isprintable()) or _VISIBLE.fullmatch(value) is not None


def _status(status: int) -> int:
    """``status``, or :class:`ValueError` when it is not an HTTP status code."""
    if isinstance(status, bool) or not 100 <= status <= 999:
        raise ValueError(f"an HTTP status is 100 to 999, got {status!r}")
    return status


def _received_at_ns(received_at: datetime | int | None) -> int:
    """``received_at`` in nanoseconds since the epoch; now when it is ``None``."""
    if received_at is None:
        return time.time_ns()
    if isinstance(received_at, datetime):
        return datetime_to_ns(received_at)
    return received_at


class HttpResponse:
    """A response as received, with how its body ended."""

    __slots__ = ("body", "body_end", "headers", "received_at_ns", "status")

    status: int
    """The status line's code, 100 to 999."""
    headers: tuple[tuple[str, str], ...]
    """The headers in order, names in lower case."""
    body: bytes
    """The body bytes received."""
    body_end: BodyEnd
    """Whether the body arrived whole."""
    received_at_ns: int
    """When the response arrived, in nanoseconds since the epoch (resolves an HTTP-date
    ``Retry-After``)."""

    def __init__(
        self,
        status: int,
        headers: Headers = (),
        body: bytes = b"",
        body_end: BodyEnd | None = None,
        received_at: datetime | int | None = None,
    ) -> None:
        """``received_at`` is a datetime or nanoseconds since the epoch; default now."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        self.status = _status(status)
        self.headers = tuple((name.lower(), value) for name, value in pairs)
        self.body = bytes(body)
        self.body_end = BodyComplete() if body_end is None else body_end
        self.received_at_ns = _received_at_ns(received_at)

    @property
    def received_at(self) -> datetime:
        """When the response arrived (UTC)."""
        return datetime_from_ns(self.received_at_ns)

    def header(self, name: str) -> str | None:
        """The first value of the header ``name`` (any case), if it is readable text."""
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value if _visible(value) else None
        return None

    def __repr__(self) -> str:
        return (
            f"HttpResponse(status={self.status}, headers={list(self.headers)!r}, "
            f"body={self.body[:64]!r}{'…' if len(self.body) > 64 else ''}, "
            f"body_end={self.body_end!r})"
        )


class HttpArrival:
    """A response as it arrives: its status and headers, then its body as the bytes come in.

    A client integration makes one when the status and headers have arrived and records it on
    the attempt's context (:meth:`candor.AttemptContext.receiving`), adds the body bytes with
    :meth:`add` as they arrive, and ends the body with :meth:`finish`, which gives the response.
    When the attempt's time runs out before the attempt returns, the adapter classifies
    :meth:`cut`, what had arrived by then, instead of an attempt with no answer (rule
    ``RETRY-ATTEMPT-TIMEOUT``). Only bytes that arrived within the attempt's time are added.
    """

    __slots__ = ("_body", "body_end", "headers", "received_at_ns", "status")

    status: int
    """The status line's code, 100 to 999."""
    headers: tuple[tuple[str, str], ...]
    """The headers in order, names in lower case."""
    received_at_ns: int
    """When the status and headers arrived, in nanoseconds since the epoch."""
    body_end: BodyEnd | None
    """How the body ended; ``None`` while it is still arriving."""

    def __init__(
        self, status: int, headers: Headers = (), received_at: datetime | int | None = None
    ) -> None:
        """``received_at`` is a datetime or nanoseconds since the epoch; default now."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        self.status = _status(status)
        self.headers = tuple((name.lower(), value) for name, value in pairs)
        self.received_at_ns = _received_at_ns(received_at)
        self.body_end = None
        self._body = bytearray()

    @property
    def body(self) -> bytes:
        """The body bytes received so far."""
        return bytes(self._body)

    @property
    def size(self) -> int:
        """How many body bytes have been received."""
        return len(self._body)

    def add(self, chunk: bytes) -> None:
        """Adds body bytes that arrived."""
        self._body += chunk

    def finish(self, end: BodyEnd | None = None) -> HttpResponse:
        """Ends the body (whole by default) and returns the response."""
        self.body_end = BodyComplete() if end is None else end
        return self._response(self.body_end)

    def cut(self, after_ns: int) -> HttpResponse:
        """The response as it stood when the attempt's time ran out, ``after_ns`` into it.

        A body that had ended keeps its end; one still arriving is cut there
        (:class:`BodyTimedOut`), with the bytes received so far.
        """
        end = self.body_end
        return self._response(BodyTimedOut(after_ns) if end is None else end)

    def _response(self, end: BodyEnd) -> HttpResponse:
        return HttpResponse(self.status, self.headers, bytes(self._body), end, self.received_at_ns)

    def __repr__(self) -> str:
        return (
            f"HttpArrival(status={self.status}, headers={list(self.headers)!r}, "
            f"size={self.size}, body_end={self.body_end!r})"
        )


@runtime_checkable
class ArrivalClassifier(Protocol):
    """A classifier that also classifies a response cut by its attempt's time.

    When an attempt's time runs out after it recorded an :class:`HttpArrival`, the adapter asks
    the classifier's ``classify_arrival``, if it has one, for the attempt's outcome; a
    classifier without it makes the attempt one with no answer.
    """

    def classify_arrival(self, arrival: HttpArrival, after_ns: int, /) -> Classification:
        """Classifies the response that had arrived when the attempt's time ran out."""
        ...


class TransportErrorKind(StrEnum):
    """The kinds of transport failure: why no response arrived."""

    CONNECT = "connect"
    """The connection could not be made."""
    RESET = "reset"
    """The connection was reset or closed before a response."""
    TIMEOUT = "timeout"
    """The client's own timeout fired before a status arrived."""
    PROTOCOL = "protocol"
    """The response could not be parsed as HTTP."""

    @property
    def error_type(self) -> str:
        """The ``error.type`` recorded for this kind."""
        return _ERROR_TYPES[self]

    @property
    def failure_kind(self) -> AccessFailureKind:
        """The AccessFailure kind recorded for this kind."""
        return _FAILURE_KINDS[self]


_ERROR_TYPES: Final = {
    TransportErrorKind.CONNECT: "connect_error",
    TransportErrorKind.RESET: "connection_reset",
    TransportErrorKind.TIMEOUT: "timeout",
    TransportErrorKind.PROTOCOL: "http_protocol_error",
}
_FAILURE_KINDS: Final = {
    TransportErrorKind.CONNECT: AccessFailureKind.CONNECT,
    TransportErrorKind.RESET: AccessFailureKind.CONNECT,
    TransportErrorKind.TIMEOUT: AccessFailureKind.TIMEOUT,
    TransportErrorKind.PROTOCOL: AccessFailureKind.PROTOCOL,
}


class TransportError(Exception):
    """Why no response arrived.

    An attempt may return it or raise it: the adapter classifies both the same way.
    """

    kind: TransportErrorKind
    """What kind of transport failure."""
    message: str
    """What the client reported."""

    def __init__(self, kind: TransportErrorKind | str, message: str) -> None:
        self.kind = TransportErrorKind(kind)
        self.message = message
        super().__init__(f"{self.kind}: {message}")


HttpExchange: TypeAlias = HttpResponse | TransportError
"""One HTTP attempt's raw result: a response, or no response at all."""


class NotFound(StrEnum):
    """What a 404 means for this tool: the author's declaration, never a default."""

    CONFIRMED_ABSENT = "confirmed_absent"
    """A lookup by id: 404 is a verified absence (Empty)."""
    UNREACHABLE = "unreachable"
    """404 means the tool could not be reached where it was looked for (AccessFailure)."""


_UINT: Final = re.compile(r"\+?[0-9]+")
_U64_END: Final = 2**64


def _parse_uint(text: str) -> int | None:
    """An unsigned 64-bit integer, read as Rust reads one (an optional ``+``, digits only)."""
    if not _UINT.fullmatch(text):
        return None
    value = int(text)
    return value if value < _U64_END else None


def _trim(text: str) -> str:
    return text.strip(_WHITE_SPACE)


# Unicode White_Space, what Rust's `trim` removes.
_WHITE_SPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


@dataclass(frozen=True, slots=True)
class HttpClassifier:
    """Classifies HTTP exchanges by the rules in the module documentation.

    Every declaration but ``not_found`` is optional:

    - ``items_at``: the JSON pointer of the collection (``/items``, ``/data/results``);
    - ``total_at``: the JSON pointer of the total the source declares;
    - ``total_header``: the header that declares the total (``None`` to read none);
    - ``truncated_when``: ``(pointer, value)`` pairs whose value marks a truncation;
    - ``has_more_at``: ``(flag_pointer, cursor_pointer)``: truncated when the flag is true and
      the cursor missing, null or empty;
    - ``operation_id_at``: the JSON pointer of a 202's operation id (default: ``Location``);
    - ``request_id_header``: the header of the source's request id;
    - ``scope``: the scope recorded in every Success and Empty extent.
    """

    not_found: NotFound
    items_at: str | None = field(default=None, kw_only=True)
    total_at: str | None = field(default=None, kw_only=True)
    total_header: str | None = field(default="x-total-count", kw_only=True)
    truncated_when: Sequence[tuple[str, JsonValue]] = field(default=(), kw_only=True)
    has_more_at: tuple[str, str] | None = field(default=None, kw_only=True)
    operation_id_at: str | None = field(default=None, kw_only=True)
    request_id_header: str = field(default="x-request-id", kw_only=True)
    scope: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "not_found", NotFound(self.not_found))
        object.__setattr__(self, "truncated_when", tuple(self.truncated_when))

    def classify(self, raw: HttpExchange, /) -> Classification:
        """Classifies one attempt's response or transport error."""
        if isinstance(raw, TransportError):
            return Classification(
                AccessFailure(
                    Failure(
                        kind=raw.kind.failure_kind,
                        retryable=True,
                        message=redact_text(raw.message),
                        error_type=raw.kind.error_type,
                    )
                )
            )
        request_id = raw.header(self.request_id_header)
        evidence = None if request_id is None else Evidence(EvidenceKind.REQUEST_ID, request_id)
        if raw.status == 202 and isinstance(raw.body_end, BodyComplete):
            # Accepted for processing is not done: the body names the operation at best, and
            # what it says is not the operation's result.
            try:
                body = loads_body(raw.body)
            except BodyParseError:
                body = None
            return self._accepted(raw, body)
        return Classification(self._classify_response(raw), evidence)

    def classify_exception(self, error: Exception, /) -> Classification | None:
        """Classifies a raised :class:`TransportError` as a returned one; nothing else."""
        return self.classify(error) if isinstance(error, TransportError) else None

    def classify_arrival(self, arrival: HttpArrival, after_ns: int, /) -> Classification:
        """Classifies the response that had arrived when the attempt's time ran out.

        That is :meth:`HttpArrival.cut`: a 2xx whose body was still arriving is a Partial
        ``mid_stream`` with the bytes received (rule ``HTTP-BODY-CUT``, case 5); any other
        status is classified by its status.
        """
        return self.classify(arrival.cut(after_ns))

    def _classify_response(self, response: HttpResponse) -> Outcome:
        code = response.status
        if 200 <= code <= 299:
            return self._classify_success(response)
        if code == 404 and self.not_found is NotFound.CONFIRMED_ABSENT:
            return Empty(self._extent(0, None))
        kind, retryable = _status_failure(code)
        retry_after_ms = _retry_after_ms(response) if retryable else None
        reason = REASONS.get(code, "")
        snippet = _body_snippet(response.body)
        message = f"HTTP {code} {reason}: {snippet}" if snippet else f"HTTP {code} {reason}"
        # Positional arguments, in the order of the fields, cost less than keywords.
        return AccessFailure(
            Failure(
                kind,  # kind
                retryable,  # retryable
                message.rstrip(_WHITE_SPACE),  # message
                code,  # status
                str(code),  # error_type
                retry_after_ms,  # retry_after_ms
            )
        )

    def _classify_success(self, response: HttpResponse) -> Outcome:
        body = response.body
        cut: tuple[PartialKind, str] | None = None
        match response.body_end:
            case BodyComplete():
                declared = _content_length(response)
                if declared is not None and declared != len(body):
                    cut = (PartialKind.MID_STREAM, f"{declared} bytes declared by Content-Length")
            case BodySizeCap(limit=limit):
                cut = (PartialKind.SIZE_CAP, f"everything past the {limit}-byte size cap")
            case BodyBroken(error=error):
                cut = (
                    PartialKind.MID_STREAM,
                    f"the rest of the body (the stream broke: {redact_text(error)})",
                )
            case BodyTimedOut(after_ns=after_ns):
                cut = (
                    PartialKind.MID_STREAM,
                    f"the rest of the body (the attempt's {format_seconds(after_ns)} ran out "
                    "while it was arriving)",
                )
        if cut is not None:
            return _body_partial(body, *cut)
        if response.status == 204 or not body.strip(b" \t\n\r\x0c"):
            return Empty(self._extent(0, None))
        try:
            value = loads_body(body)
        except BodyParseError as err:
            if err.eof:
                return _body_partial(
                    body, PartialKind.MID_STREAM, f"the rest of the JSON document ({err})"
                )
            return _protocol_failure(f"2xx body is not JSON: {err}", retryable=True)
        return self._classify_body(response, value)

    def _classify_body(self, response: HttpResponse, body: JsonValue) -> Outcome:
        returned: int | None
        if self.items_at is not None:
            found = pointer(body, self.items_at)
            if isinstance(found, list):
                returned = len(found)
            elif found is None:
                returned = 0
            elif found is MISSING:
                return _protocol_failure(
                    f"declared collection {self.items_at} is missing from the body",
                    retryable=False,
                )
            else:
                return _protocol_failure(
                    f"declared collection {self.items_at} is a {json_type(found)}, not a list",
                    retryable=False,
                )
        elif isinstance(body, list):
            returned = len(body)
        elif body is None:
            returned = 0
        else:
            returned = None
        total = self._declared_total(response, body)
        if returned is not None and total is not None and total > returned:
            return Partial(
                body,
                Truncation(
                    kind=PartialKind.DECLARED_TOTAL,
                    covered=_covered_items(returned, total),
                    dropped=f"{total - returned} item(s)",
                    returned=returned,
                    expected=total,
                ),
            )
        marker = self._truncation_marker(body)
        if marker is not None:
            return Partial(
                body,
                Truncation(
                    kind=PartialKind.TRUNCATION_MARKER,
                    covered=(
                        "the answer up to the truncation"
                        if returned is None
                        else _covered_items(returned, total)
                    ),
                    dropped=f"an unknown remainder ({marker})",
                    returned=returned,
                    expected=total,
                ),
            )
        if returned == 0:
            return Empty(self._extent(0, total))
        return Success(body, self._extent(returned, total))

    def _declared_total(self, response: HttpResponse, body: JsonValue) -> int | None:
        if self.total_at is not None:
            found = pointer(body, self.total_at)
            if isinstance(found, int) and not isinstance(found, bool) and 0 <= found < _U64_END:
                return found
        if self.total_header is not None:
            value = response.header(self.total_header)
            if value is not None:
                return _parse_uint(_trim(value))
        return None

    def _truncation_marker(self, body: JsonValue) -> str | None:
        for at, value in self.truncated_when:
            found = pointer(body, at)
            if found is not MISSING and json_equal(found, value):
                return f"{at} is {dumps(value, sort=True)}"
        if self.has_more_at is None:
            return None
        flag, cursor = self.has_more_at
        more = pointer(body, flag) is True
        found = pointer(body, cursor)
        has_cursor = found is not MISSING and found is not None and found != ""
        if more and not has_cursor:
            return f"{flag} is true with no {cursor}"
        return None

    def _accepted(self, response: HttpResponse, body: JsonValue) -> Classification:
        from_body: str | None = None
        if self.operation_id_at is not None:
            found = pointer(body, self.operation_id_at)
            if found is not MISSING:
                from_body = found if isinstance(found, str) else dumps(found, sort=True)
        location = response.header("operation-location")
        if location is None:
            location = response.header("location")
        named = (
            from_body
            if from_body is not None
            else location
            if location is not None
            else response.header(self.request_id_header)
        )
        # The source named no id: one made up here keeps this operation apart from every
        # other, and is no evidence of anything the source holds.
        if named is None:
            operation = Operation(generated_operation_id(), status_url=location, generated=True)
            evidence = None
        else:
            operation = Operation(named, status_url=location)
            evidence = Evidence(EvidenceKind.JOB_ID, named)
        return Classification(
            Success(body, self._extent(None, None)),
            evidence,
            Lifecycle.accepted(operation),
            _retry_after_ms(response),
        )

    def _extent(self, items: int | None, declared_total: int | None) -> Extent:
        return Extent(items=items, declared_total=declared_total, scope=self.scope)


GENERATED_ID_PREFIX: Final = "candor-"
"""What every operation id the adapter makes begins with."""


def generated_operation_id() -> str:
    """An operation id for an acceptance whose source named none (rule ``HTTP-202``).

    ``candor-`` and 32 lowercase hexadecimal digits, 128 random bits, so no two calls share one.
    """
    return GENERATED_ID_PREFIX + secrets.token_hex(16)


def _status_failure(code: int) -> tuple[AccessFailureKind, bool]:
    if code == 408:
        return AccessFailureKind.TIMEOUT, True
    if code == 429:
        return AccessFailureKind.RATE_LIMITED, True
    if code in (401, 403):
        return AccessFailureKind.AUTH, False
    if 400 <= code <= 499:
        return AccessFailureKind.CLIENT_ERROR, False
    if 500 <= code <= 599:
        return AccessFailureKind.SERVER_ERROR, True
    return AccessFailureKind.PROTOCOL, False


def _protocol_failure(message: str, *, retryable: bool) -> AccessFailure:
    return AccessFailure(
        Failure(
            kind=AccessFailureKind.PROTOCOL,
            retryable=retryable,
            message=message,
            error_type="malformed_response",
        )
    )


def _body_partial(body: bytes, kind: PartialKind, dropped: str) -> Partial:
    return Partial(
        body.decode("utf-8", errors="replace"),
        Truncation(
            kind=kind,
            covered=f"the first {len(body)} bytes of the body",
            dropped=dropped,
        ),
    )


def _covered_items(returned: int, total: int | None) -> str:
    if total is None:
        return f"{returned} item(s)"
    if returned == 0:
        return f"no items of {total}"
    return f"items 1-{returned} of {total}"


def _content_length(response: HttpResponse) -> int | None:
    value = response.header("content-length")
    return None if value is None else _parse_uint(_trim(value))


def _retry_after_ms(response: HttpResponse) -> int | None:
    value = response.header("retry-after")
    if value is None:
        return None
    value = _trim(value)
    seconds = _parse_uint(value)
    if seconds is not None:
        return min(seconds * 1000, _U64_END - 1)
    at = parse_http_date_ns(value)
    if at is None:
        return None
    wait_ns = at - response.received_at_ns
    return max(wait_ns, 0) // 1_000_000


# C0 controls, DEL and C1 controls, each read as a space in a snippet.
_CONTROLS_AS_SPACES: Final = dict.fromkeys((*range(0x20), *range(0x7F, 0xA0)), " ")


def _body_snippet(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")[:BODY_SNIPPET_CHARS]
    # Printable text holds no control character (they are all unprintable), and testing
    # for that costs a fraction of what translating does.
    one_line = text if text.isprintable() else text.translate(_CONTROLS_AS_SPACES)
    return redact_text(_trim(one_line))
