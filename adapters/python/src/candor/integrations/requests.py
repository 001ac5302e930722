"""requests: requests whose results feed :class:`~candor.HttpClassifier` directly.

:func:`request` sends a request with the attempt's timeout, streams the body up to a size cap,
and returns an :data:`~candor.HttpExchange` instead of raising; :func:`call` makes a whole call
through an adapter::

    search = Adapter("search", "https://search.example/v1/items", HttpClassifier(...))
    with requests.Session() as session:
        envelope = candor.integrations.requests.call(search, session, "GET", search_url)

requests' timeout bounds the connection and each read, not the whole attempt: a body that
trickles in can outlast it, and the adapter then classifies the attempt as the timeout it was.
:func:`from_response` turns a response that was already read into the classifier's input, and
:func:`transport_error` a requests exception into a transport error.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from typing import Any, Final

import requests
import urllib3.exceptions

from candor.adapter import Adapter, AttemptContext
from candor.classify.http import (
    BodyBroken,
    BodyEnd,
    BodySizeCap,
    HttpExchange,
    HttpResponse,
    TransportError,
    TransportErrorKind,
)
from candor.envelope import Envelope
from candor.integrations._http import check_method, with_idempotency_key

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
    """The headers as received, less ``Content-Length`` when the body was decoded.

    The length then counts the encoded bytes, and urllib3 itself refuses a body shorter than
    declared.
    """
    encoded = "content-encoding" in response.headers
    return [
        (name, value)
        for name, value in response.headers.items()
        if not (encoded and name.lower() == "content-length")
    ]


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
    """
    kwargs = with_idempotency_key(attempt, kwargs)
    try:
        response = session.request(
            method, url, stream=True, timeout=attempt.timeout_seconds, **kwargs
        )
    except requests.RequestException as error:
        return transport_error(error)
    received_at = time.time_ns()
    chunks: list[bytes] = []
    size = 0
    end: BodyEnd | None = None
    try:
        for chunk in _chunks(response):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_body_bytes:
                break
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
        end = BodyBroken(str(error) or type(error).__name__)
    finally:
        response.close()
    body = b"".join(chunks)
    if len(body) > max_body_bytes:
        body, end = body[:max_body_bytes], BodySizeCap(max_body_bytes)
    return HttpResponse(response.status_code, _headers(response), body, end, received_at)


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
