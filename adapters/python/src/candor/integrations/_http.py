"""What the HTTP client integrations share.

The request's method is checked against the adapter's, and the call's idempotency key is sent
with every attempt (rule ``RETRY-UNSAFE``). A body is read against the attempt's time (rule
``RETRY-ATTEMPT-TIMEOUT``): what arrives is recorded on the attempt's context as it arrives, and
a synchronous read is cut when the time runs out by a shared timer thread, which shuts the
connection's socket down.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from candor.adapter import Adapter, AttemptContext
from candor.classify.http import (
    BodyBroken,
    BodyComplete,
    BodyEnd,
    BodySizeCap,
    BodyTimedOut,
    HttpArrival,
    HttpResponse,
    TransportError,
    TransportErrorKind,
)
from candor.retry import format_seconds

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
"""The header that carries a call's idempotency key (the IETF HTTPAPI draft)."""


def check_method(adapter: Adapter[Any], method: str) -> None:
    """Refuses a request whose method is not the adapter's.

    Whether a failed call may be sent again follows from the adapter's method; a POST through
    an adapter built for GET would be retried as a GET.
    """
    if method.upper() != adapter.method:
        raise ValueError(
            f"the request is a {method.upper()} but the adapter is for {adapter.method}: "
            f"build it with method={method.upper()!r}, so that a request that may have been "
            "applied is not sent again"
        )


def with_idempotency_key(attempt: AttemptContext, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the call's idempotency key in ``headers``.

    Only when the call has one and the caller set none.
    """
    if attempt.idempotency_key is None:
        return kwargs
    headers = dict(kwargs.get("headers") or {})
    if not any(name.lower() == IDEMPOTENCY_KEY_HEADER.lower() for name in headers):
        headers[IDEMPOTENCY_KEY_HEADER] = attempt.idempotency_key
    return {**kwargs, "headers": headers}


def without_encoded_length(
    headers: Iterable[tuple[str, str]], *, decoded: bool
) -> list[tuple[str, str]]:
    """The headers as received, less ``Content-Length`` when the client ``decoded`` the body.

    The length then counts the encoded bytes, and the HTTP clients themselves refuse a body
    shorter than declared.
    """
    return [
        (name, value)
        for name, value in headers
        if not (decoded and name.lower() == "content-length")
    ]


def read_until(attempt: AttemptContext | None) -> float:
    """When the attempt's time runs out, on :func:`time.monotonic`; never without an attempt."""
    if attempt is None:
        return float("inf")
    return time.monotonic() + attempt.timeout_seconds


def arriving(
    attempt: AttemptContext | None,
    status: int,
    headers: list[tuple[str, str]],
    received_at: int,
) -> HttpArrival:
    """The response whose status and headers arrived, recorded on the attempt when there is one."""
    arrival = HttpArrival(status, headers, received_at)
    return arrival if attempt is None else attempt.receiving(arrival)


def no_status(timeout_ns: int) -> TransportError:
    """What an attempt whose status arrived only after its time ran out returns: a timeout."""
    return TransportError(
        TransportErrorKind.TIMEOUT, f"no status within the attempt's {format_seconds(timeout_ns)}"
    )


def take(arrival: HttpArrival, chunk: bytes, max_body_bytes: int) -> BodyEnd | None:
    """Adds ``chunk`` to the body, up to the size cap; the cap's end once it is passed."""
    room = max_body_bytes - arrival.size
    if len(chunk) > room:
        arrival.add(chunk[:room])
        return BodySizeCap(max_body_bytes)
    arrival.add(chunk)
    return None


class Cut:
    """One socket to shut down when an attempt's time runs out, unless disarmed first."""

    __slots__ = ("at", "fired", "sock")

    def __init__(self, at: float, sock: socket.socket) -> None:
        self.at = at
        """When, on :func:`time.monotonic`."""
        self.sock: socket.socket | None = sock
        """The socket; ``None`` once disarmed or fired."""
        self.fired = False
        """Whether the socket was shut down."""


class _Watchdog:
    """One daemon thread that shuts sockets down when their attempt's time runs out.

    A synchronous read cannot be interrupted otherwise: an HTTP client's timeout bounds each
    read, not the whole body. Shutting the socket down wakes a read blocked on it, which then
    ends or fails at once. Arming costs a heap push under a lock, not a thread per read.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._due: list[tuple[float, int, Cut]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Forgets every cut and the thread: a forked child has neither."""
        self._condition = threading.Condition()
        self._due = []
        self._thread = None

    def arm(self, at: float, sock: socket.socket) -> Cut:
        """Shuts ``sock`` down at ``at`` (on :func:`time.monotonic`) unless disarmed first."""
        cut = Cut(at, sock)
        with self._condition:
            heapq.heappush(self._due, (at, next(self._order), cut))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="candor-attempt-cut", daemon=True
                )
                self._thread.start()
            elif self._due[0][2] is cut:
                self._condition.notify()
        return cut

    def disarm(self, cut: Cut) -> None:
        """Keeps ``cut`` from firing; once this returns, its socket is never shut down."""
        with self._condition:
            cut.sock = None

    def _run(self) -> None:
        with self._condition:
            while True:
                while self._due and self._due[0][2].sock is None:
                    heapq.heappop(self._due)
                if not self._due:
                    self._condition.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._condition.wait(wait)
                    continue
                cut = heapq.heappop(self._due)[2]
                self._fire(cut)

    @staticmethod
    def _fire(cut: Cut) -> None:
        sock, cut.sock = cut.sock, None
        if sock is None:
            return
        cut.fired = True
        # The plain socket's shutdown, also for a TLS socket: the reader holds the TLS state,
        # and the connection is abandoned either way.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


_WATCHDOG: Final = _Watchdog()
if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_WATCHDOG.reset)


@contextlib.contextmanager
def cut_at(at: float, sock: socket.socket | None) -> Iterator[Cut | None]:
    """Shuts ``sock`` down at ``at`` (on :func:`time.monotonic`) if the block is still running.

    Yields the cut (``None`` when there is no socket or no time limit); on leaving the block
    the cut is disarmed, before the connection can go back to its pool.
    """
    if sock is None or at == float("inf"):
        yield None
        return
    cut = _WATCHDOG.arm(at, sock)
    try:
        yield cut
    finally:
        _WATCHDOG.disarm(cut)


def read_body(
    chunks: Iterable[bytes],
    arrival: HttpArrival,
    *,
    until: float,
    timeout_ns: int,
    max_body_bytes: int,
    sock: socket.socket | None,
    errors: tuple[type[Exception], ...],
    describe: Callable[[Exception], str],
) -> HttpResponse:
    """Reads a body synchronously into ``arrival``, and returns the response.

    The body ends whole, at ``max_body_bytes``, broken (an exception of ``errors``, described
    by ``describe``) or when the attempt's time runs out at ``until`` (on
    :func:`time.monotonic`): ``sock`` is then shut down, a read still blocked on it ends, and
    the bytes that arrived before are the body, cut by :class:`~candor.BodyTimedOut` with
    ``timeout_ns``. A chunk read after ``until`` arrived too late and is left out.
    """
    end: BodyEnd = BodyComplete()
    ran_out = False
    with cut_at(until, sock) as cut:
        try:
            for chunk in chunks:
                if time.monotonic() >= until:
                    ran_out = True
                    break
                capped = take(arrival, chunk, max_body_bytes)
                if capped is not None:
                    end = capped
                    break
        except errors as error:
            ran_out = time.monotonic() >= until
            end = BodyBroken(describe(error))
    # A socket shut down under a body that runs to the connection's close ends it as if whole.
    if ran_out or (cut is not None and cut.fired and isinstance(end, BodyComplete)):
        end = BodyTimedOut(timeout_ns)
    return arrival.finish(end)
