"""httpx: requests whose results feed :class:`~candor.HttpClassifier` directly.

:func:`request` and :func:`arequest` send a request with the attempt's timeout, read the body
up to a size cap, and return an :data:`~candor.HttpExchange` instead of raising: a response
whose body ended whole, at the cap, or broken mid-stream, or a :class:`~candor.TransportError`
when no response arrived. :func:`call` and :func:`acall` make a whole call through an adapter::

    search = Adapter("search", "https://search.example/v1/items", HttpClassifier(...))
    with httpx.Client() as client:
        envelope = candor.integrations.httpx.call(search, client, "GET", search_url)

:func:`from_response` turns a response that was already read into the classifier's input, and
:func:`transport_error` an httpx exception into a transport error.
"""

from __future__ import annotations

import time
from typing import Any, Final

import httpx

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
    "acall",
    "arequest",
    "asend",
    "call",
    "from_response",
    "request",
    "send",
    "transport_error",
]

DEFAULT_MAX_BODY_BYTES: Final = 8 << 20
"""The default cap on a response body: 8 MiB."""


def transport_error(error: httpx.RequestError) -> TransportError:
    """The transport error an httpx exception raised before a response arrived stands for.

    Timeouts (connect, read, write, pool) are ``timeout``; a refused or failed connection is
    ``connect``; a connection that closed before a response is ``reset``; a response that is not
    HTTP is ``protocol``.
    """
    message = _describe(error)
    kind: TransportErrorKind
    if isinstance(error, httpx.TimeoutException):
        kind = TransportErrorKind.TIMEOUT
    elif isinstance(error, httpx.ConnectError | httpx.ProxyError | httpx.UnsupportedProtocol):
        kind = TransportErrorKind.CONNECT
    elif isinstance(error, httpx.RemoteProtocolError):
        closed = "without sending" in message or "disconnected" in message
        kind = TransportErrorKind.RESET if closed else TransportErrorKind.PROTOCOL
    elif isinstance(error, httpx.LocalProtocolError | httpx.TooManyRedirects):
        kind = TransportErrorKind.PROTOCOL
    elif isinstance(error, httpx.ReadError | httpx.WriteError | httpx.CloseError):
        kind = TransportErrorKind.RESET
    else:
        kind = TransportErrorKind.CONNECT
    return TransportError(kind, message)


def _describe(error: BaseException) -> str:
    """The error and its causes, one after another, as a transport error's message."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current) or type(current).__name__
        if text not in parts:
            parts.append(text)
        current = current.__cause__ or current.__context__
    return ": ".join(parts)


def _headers(response: httpx.Response) -> list[tuple[str, str]]:
    """The headers as received, less ``Content-Length`` when the body was decoded.

    The length then counts the encoded bytes, and httpx itself refuses a body shorter than
    declared.
    """
    encoded = "content-encoding" in response.headers
    return [
        (name, value)
        for name, value in response.headers.multi_items()
        if not (encoded and name.lower() == "content-length")
    ]


def from_response(response: httpx.Response, *, received_at: int | None = None) -> HttpResponse:
    """The classifier's input for a response whose body httpx has already read whole."""
    return HttpResponse(
        response.status_code,
        _headers(response),
        response.content,
        received_at=received_at,
    )


def _capped(chunks: list[bytes], max_body_bytes: int) -> tuple[bytes, BodyEnd | None]:
    body = b"".join(chunks)
    if len(body) > max_body_bytes:
        return body[:max_body_bytes], BodySizeCap(max_body_bytes)
    return body, None


def send(
    client: httpx.Client,
    request: httpx.Request,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> HttpExchange:
    """Sends ``request`` and reads the response body, up to ``max_body_bytes``.

    Never raises for what the network did: a failure before the response is a
    :class:`~candor.TransportError`, one while the body arrives ends the body as broken.
    """
    try:
        response = client.send(request, stream=True)
    except httpx.RequestError as error:
        return transport_error(error)
    received_at = time.time_ns()
    chunks: list[bytes] = []
    size = 0
    end: BodyEnd | None = None
    try:
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > max_body_bytes:
                break
    except (httpx.RequestError, httpx.StreamError) as error:
        end = BodyBroken(_describe(error))
    finally:
        response.close()
    body, capped = _capped(chunks, max_body_bytes)
    return HttpResponse(
        response.status_code, _headers(response), body, capped or end, received_at=received_at
    )


async def asend(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> HttpExchange:
    """:func:`send` for an :class:`httpx.AsyncClient`."""
    try:
        response = await client.send(request, stream=True)
    except httpx.RequestError as error:
        return transport_error(error)
    received_at = time.time_ns()
    chunks: list[bytes] = []
    size = 0
    end: BodyEnd | None = None
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > max_body_bytes:
                break
    except (httpx.RequestError, httpx.StreamError) as error:
        end = BodyBroken(_describe(error))
    finally:
        await response.aclose()
    body, capped = _capped(chunks, max_body_bytes)
    return HttpResponse(
        response.status_code, _headers(response), body, capped or end, received_at=received_at
    )


def request(
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
    attempt: AttemptContext,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **kwargs: Any,
) -> HttpExchange:
    """Builds a request with the attempt's timeout and sends it; see :func:`send`.

    ``kwargs`` are those of :meth:`httpx.Client.build_request` (``params``, ``json``,
    ``headers``, …).
    """
    kwargs = with_idempotency_key(attempt, kwargs)
    built = client.build_request(method, url, timeout=attempt.timeout_seconds, **kwargs)
    return send(client, built, max_body_bytes=max_body_bytes)


async def arequest(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    attempt: AttemptContext,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **kwargs: Any,
) -> HttpExchange:
    """:func:`request` for an :class:`httpx.AsyncClient`."""
    kwargs = with_idempotency_key(attempt, kwargs)
    built = client.build_request(method, url, timeout=attempt.timeout_seconds, **kwargs)
    return await asend(client, built, max_body_bytes=max_body_bytes)


def call(
    adapter: Adapter[HttpExchange],
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
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
            client, method, url, attempt, max_body_bytes=max_body_bytes, **kwargs
        )
    )


async def acall(
    adapter: Adapter[HttpExchange],
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **kwargs: Any,
) -> Envelope:
    """Makes one call through ``adapter``: each attempt is :func:`arequest`.

    Raises :class:`ValueError` when ``method`` is not the adapter's.
    """
    check_method(adapter, method)
    return await adapter.acall(
        lambda attempt: arequest(
            client, method, url, attempt, max_body_bytes=max_body_bytes, **kwargs
        )
    )
