"""httpx: requests whose results feed :class:`~candor.HttpClassifier` directly.

:func:`request` and :func:`arequest` send a request with the attempt's timeout, read the body
up to a size cap and the attempt's time, and return an :data:`~candor.HttpExchange` instead of
raising: a response whose body ended whole, at the cap, broken mid-stream, or cut when the
attempt's time ran out, or a :class:`~candor.TransportError` when no response arrived. The
response is recorded on the attempt's context as it arrives
(:meth:`candor.AttemptContext.receiving`), so that the adapter's own timer, should it fire
first, takes the same bytes. :func:`call` and :func:`acall` make a whole call through an
adapter::

    search = Adapter("search", "https://search.example/v1/items", HttpClassifier(...))
    with httpx.Client() as client:
        envelope = candor.integrations.httpx.call(search, client, "GET", search_url)

:func:`from_response` turns a response that was already read into the classifier's input, and
:func:`transport_error` an httpx exception into a transport error.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any, Final

import httpx

from candor.adapter import Adapter, AttemptContext
from candor.classify.http import (
    BodyBroken,
    BodyComplete,
    BodyEnd,
    BodyTimedOut,
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
    take,
    with_idempotency_key,
    without_encoded_length,
)

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
    """The headers as received, less ``Content-Length`` when httpx decoded the body."""
    decoded = "content-encoding" in response.headers
    return without_encoded_length(response.headers.multi_items(), decoded=decoded)


def from_response(response: httpx.Response, *, received_at: int | None = None) -> HttpResponse:
    """The classifier's input for a response whose body httpx has already read whole."""
    return HttpResponse(
        response.status_code,
        _headers(response),
        response.content,
        received_at=received_at,
    )


def _socket(response: httpx.Response) -> socket.socket | None:
    """The socket of an HTTP/1 response's connection, if it has one.

    An HTTP/2 connection carries other requests' streams, and is never cut for one of them.
    """
    if response.http_version not in ("HTTP/1.1", "HTTP/1.0"):
        return None
    stream = response.extensions.get("network_stream")
    found = None if stream is None else stream.get_extra_info("socket")
    return found if isinstance(found, socket.socket) else None


def send(
    client: httpx.Client,
    request: httpx.Request,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    attempt: AttemptContext | None = None,
) -> HttpExchange:
    """Sends ``request`` and reads the response body, up to ``max_body_bytes``.

    Never raises for what the network did: a failure before the response is a
    :class:`~candor.TransportError`, one while the body arrives ends the body as broken.

    With ``attempt``, the body is read against the attempt's time, counted from this call, and
    recorded on it as it arrives (:meth:`candor.AttemptContext.receiving`): when the time runs
    out mid-body, the connection is cut and the body is what arrived, ended by
    :class:`~candor.BodyTimedOut`; a status that arrives only after it is a ``timeout``
    transport error. Without one, only the client's own timeouts bound the read.
    """
    until = read_until(attempt)
    try:
        response = client.send(request, stream=True)
    except httpx.RequestError as error:
        return transport_error(error)
    try:
        received_at = time.time_ns()
        if attempt is not None and time.monotonic() >= until:
            return no_status(attempt.timeout_ns)
        arrival = arriving(attempt, response.status_code, _headers(response), received_at)
        return read_body(
            response.iter_bytes(),
            arrival,
            until=until,
            timeout_ns=0 if attempt is None else attempt.timeout_ns,
            max_body_bytes=max_body_bytes,
            sock=_socket(response),
            errors=(httpx.RequestError, httpx.StreamError),
            describe=_describe,
        )
    finally:
        response.close()


async def asend(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    attempt: AttemptContext | None = None,
) -> HttpExchange:
    """:func:`send` for an :class:`httpx.AsyncClient`.

    With ``attempt``, the request and its body are read against the attempt's time as
    :func:`send` reads them: no status by then is a ``timeout`` transport error, and a body
    still arriving is what arrived, ended by :class:`~candor.BodyTimedOut`.
    """
    loop = asyncio.get_running_loop()
    until = None if attempt is None else loop.time() + attempt.timeout_seconds
    try:
        async with asyncio.timeout_at(until):
            response = await client.send(request, stream=True)
    except TimeoutError:
        if attempt is None:
            raise
        return no_status(attempt.timeout_ns)
    except httpx.RequestError as error:
        return transport_error(error)
    received_at = time.time_ns()
    arrival = arriving(attempt, response.status_code, _headers(response), received_at)
    end: BodyEnd = BodyComplete()
    try:
        async with asyncio.timeout_at(until):
            async for chunk in response.aiter_bytes():
                capped = take(arrival, chunk, max_body_bytes)
                if capped is not None:
                    end = capped
                    break
    except TimeoutError:
        if attempt is None:
            raise
        end = BodyTimedOut(attempt.timeout_ns)
    except (httpx.RequestError, httpx.StreamError) as error:
        if attempt is not None and until is not None and loop.time() >= until:
            end = BodyTimedOut(attempt.timeout_ns)
        else:
            end = BodyBroken(_describe(error))
    finally:
        await response.aclose()
    return arrival.finish(end)


def request(
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
    attempt: AttemptContext,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **kwargs: Any,
) -> HttpExchange:
    """Builds a request with the attempt's timeout and sends it as the attempt; see :func:`send`.

    ``kwargs`` are those of :meth:`httpx.Client.build_request` (``params``, ``json``,
    ``headers``, …).
    """
    kwargs = with_idempotency_key(attempt, kwargs)
    built = client.build_request(method, url, timeout=attempt.timeout_seconds, **kwargs)
    return send(client, built, max_body_bytes=max_body_bytes, attempt=attempt)


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
    return await asend(client, built, max_body_bytes=max_body_bytes, attempt=attempt)


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
