"""What came back from one HTTP attempt: a response, a response still arriving, or no response.

:class:`HttpResponse` is a response as received, with how its body ended (:data:`BodyEnd`);
:class:`HttpArrival` is one as it arrives, which the adapter cuts when the attempt's time runs
out; :class:`TransportError` says why no response arrived. :data:`HttpExchange` is either, the
raw result that :class:`~candor.classify.http.HttpClassifier` classifies.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, TypeAlias

from candor.timestamps import datetime_from_ns, datetime_to_ns
from candor.vocab import AccessFailureKind


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
