"""requests: requests whose results feed :class:`~candor.HttpClassifier` directly.

:func:`request` sends a request with the attempt's timeout, streams the body up to a size cap
and the attempt's time, and returns an :data:`~candor.HttpExchange` instead of raising;
:func:`call` makes a whole call through an adapter::

    search = Adapter("search", "https://search.example/v1/items", HttpClassifier(...))
    with requests.Session() as session:
        envelope = candor.integrations.requests.call(search, session, "GET", search_url)

requests' timeout bounds the connection and each read, not the whole attempt, so the body is
read against the attempt's time here: the response is recorded on the attempt's context as it
arrives (:meth:`candor.AttemptContext.receiving`), and when the time runs out mid-body the
connection is cut and the body is what arrived by then, ended by :class:`~candor.BodyTimedOut`.
:func:`from_response` turns a response that was already read into the classifier's input, and
:func:`transport_error` a requests exception into a transport error.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from typing import Any, Final

import requests
import urllib3.exceptions

from candor.adapter import Adapter, AttemptContext
from candor.classify.http import (
    HttpExchange,
    HttpResponse,
    TransportError,
    TransportErrorKind,
)
from candor.envelope import Envelope
from candor.integrations._http import (
    arriving,
    check_method,
    no_status,
    read_body,
    read_until,
    with_idempotency_key,
    without_encoded_length,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "call",
    "from_response",
    "request",
    "transport_error",
]

DEFAULT_MAX_BODY_BYTES: Final = 8 << 20
"""The default cap on a response body: 8 MiB."""

_CHUNK: Final = 64 << 10

_CONNECT_CAUSES: Final[tuple[type[BaseException], ...]] = tuple(
    getattr(urllib3.exceptions, name)
    for name in ("NewConnectionError", "NameResolutionError", "SSLError", "ProxyError")
    if hasattr(urllib3.exceptions, name)  # NameResolutionError is urllib3 2's
)


def _causes(error: BaseException) -> list[BaseException]:
    """The error, what it wraps (in ``args`` or as ``reason``) and its causes."""
    found: list[BaseException] = []
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        pending.extend(arg for arg in current.args if isinstance(arg, BaseException))
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            pending.append(reason)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)
    return found


def transport_error(error: requests.RequestException) -> TransportError:
    """The transport error a requests exception raised before a response arrived stands for.

    Timeouts are ``timeout``; a refused or failed connection (or an invalid URL) is
    ``connect``; a connection that closed before a response is ``reset``; a status line that is
    not HTTP is ``protocol``.
    """
    message = str(error) or type(error).__name__
    causes = _causes(error)
    kind: TransportErrorKind
    if isinstance(error, requests.Timeout):
        kind = TransportErrorKind.TIMEOUT
    elif any(isinstance(cause, http.client.BadStatusLine) for cause in causes) and not any(
        isinstance(cause, http.client.RemoteDisconnected) for cause in causes
    ):
        kind = TransportErrorKind.PROTOCOL
    elif any(isinstance(cause, _CONNECT_CAUSES) for cause in causes):
        kind = TransportErrorKind.CONNECT
    elif any(
        isinstance(cause, urllib3.exceptions.ProtocolError | ConnectionResetError)
        for cause in causes
    ):
        kind = TransportErrorKind.RESET
    else:
        kind = TransportErrorKind.CONNECT
    return TransportError(kind, message)


def _headers(response: requests.Response) -> list[tuple[str, str]]:
    """The headers as received, less ``Content-Length`` when urllib3 decoded the body."""
    decoded = "content-encoding" in response.headers
    return without_encoded_length(response.headers.items(), decoded=decoded)


def from_response(response: requests.Response, *, received_at: int | None = None) -> HttpResponse:
    """The classifier's input for a response whose body requests has already read whole."""
    return HttpResponse(
        response.status_code, _headers(response), response.content, received_at=received_at
    )


def _chunks(response: requests.Response) -> Iterator[bytes]:
    """The body as it arrives, decoded; what arrived before a break is yielded first."""
    raw = response.raw
    if not hasattr(raw, "read1"):
        yield from response.iter_content(chunk_size=_CHUNK)
        return
    while chunk := raw.read1(_CHUNK, decode_content=True):
        yield chunk


def _socket(response: requests.Response) -> socket.socket | None:
    """The socket of the response's connection, while the response holds it."""
    found = getattr(getattr(response.raw, "connection", None), "sock", None)
    return found if isinstance(found, socket.socket) else None


def _error_text(error: Exception) -> str:
    return str(error) or type(error).__name__


def request(
    session: requests.Session,
    method: str,
    url: str,
    attempt: AttemptContext,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **kwargs: Any,
) -> HttpExchange:
    """Sends a request with the attempt's timeout and reads the body, up to ``max_body_bytes``.

    ``kwargs`` are those of :meth:`requests.Session.request` (``params``, ``json``,
    ``headers``, …). Never raises for what the network did: a failure before the response is a
    :class:`~candor.TransportError`, one while the body arrives ends the body as broken.

    The body is read against the attempt's time, counted from this call, and recorded on the
    attempt as it arrives (:meth:`candor.AttemptContext.receiving`): when the time runs out
    mid-body, the connection is cut and the body is what arrived, ended by
    :class:`~candor.BodyTimedOut`; a status that arrives only after it is a ``timeout``
    transport error.
    """
    kwargs = with_idempotency_key(attempt, kwargs)
    until = read_until(attempt)
    try:
        response = session.request(
            method, url, stream=True, timeout=attempt.timeout_seconds, **kwargs
        )
    except requests.RequestException as error:
        return transport_error(error)
    try:
        received_at = time.time_ns()
        if time.monotonic() >= until:
            return no_status(attempt.timeout_ns)
        arrival = arriving(attempt, response.status_code, _headers(response), received_at)
        return read_body(
            _chunks(response),
            arrival,
            until=until,
            timeout_ns=attempt.timeout_ns,
            max_body_bytes=max_body_bytes,
            sock=_socket(response),
            errors=(requests.RequestException, urllib3.exceptions.HTTPError, OSError),
            describe=_error_text,
        )
    finally:
        response.close()


def call(
    adapter: Adapter[HttpExchange],
    session: requests.Session,
    method: str,
    url: str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **kwargs: Any,
) -> Envelope:
    """Makes one call through ``adapter``: each attempt is :func:`request`.

    Raises :class:`ValueError` when ``method`` is not the adapter's.
    """
    check_method(adapter, method)
    return adapter.call(
        lambda attempt: request(
            session, method, url, attempt, max_body_bytes=max_body_bytes, **kwargs
        )
    )
