"""The :class:`HttpClassifier`: the rules of :mod:`candor.classify.http` for one exchange.

Beside it are the declaration of what a 404 means (:class:`NotFound`), the protocol of a
classifier that also classifies a response cut by its attempt's time
(:class:`ArrivalClassifier`), and the operation id made for an acceptance whose source named
none (:func:`generated_operation_id`).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol, runtime_checkable

from candor.classify import Classification
from candor.classify.http._exchange import (
    BodyBroken,
    BodyComplete,
    BodySizeCap,
    BodyTimedOut,
    HttpArrival,
    HttpExchange,
    HttpResponse,
    TransportError,
)
from candor.classify.http._parse import (
    _U64_END,
    _WHITE_SPACE,
    _body_snippet,
    _content_length,
    _parse_uint,
    _retry_after_ms,
    _trim,
)
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
from candor.vocab import AccessFailureKind, EvidenceKind, PartialKind


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


class NotFound(StrEnum):
    """What a 404 means for this tool: the author's declaration, never a default."""

    CONFIRMED_ABSENT = "confirmed_absent"
    """A lookup by id: 404 is a verified absence (Empty)."""
    UNREACHABLE = "unreachable"
    """404 means the tool could not be reached where it was looked for (AccessFailure)."""


@dataclass(frozen=True, slots=True)
class HttpClassifier:
    """Classifies HTTP exchanges by the rules documented in :mod:`candor.classify.http`.

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
