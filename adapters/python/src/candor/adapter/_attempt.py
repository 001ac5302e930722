"""One attempt: what it is told about itself, and what it records as its response arrives.

:class:`AttemptContext` is what every attempt and status read is given. Beside it are the pieces
that the call (:mod:`candor.adapter._call`) and the following (:mod:`candor.adapter._follow`)
both use to run one attempt: the failure of an attempt whose time ran out with no answer, the
race of an asynchronous attempt against its timeout, the refusal of an awaitable from a
synchronous attempt, and the conversions of its times to what an envelope records.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, NoReturn, TypeVar

from candor.classify.http import HttpArrival
from candor.clock import Clock
from candor.envelope import Failure
from candor.retry import format_seconds, timedelta_of
from candor.timestamps import datetime_from_ns
from candor.vocab import AccessFailureKind

T = TypeVar("T")

_NS_PER_MS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class AttemptContext:
    """What an attempt is told about itself."""

    number: int
    """1-based."""
    timeout_ns: int
    """How long this attempt may take, in nanoseconds: the attempt timeout, or less when the
    call's deadline is nearer."""
    idempotency_key: str | None = None
    """The call's idempotency key (``candor-`` and 32 lowercase hexadecimal digits), the same
    for every attempt of the call, when the adapter makes one (``idempotency_key=True``); the
    attempt sends it unchanged in the ``Idempotency-Key`` header. ``None`` otherwise, and for
    the status reads of a following."""
    _arrival: HttpArrival | None = field(default=None, init=False, repr=False, compare=False)

    def receiving(self, arrival: HttpArrival) -> HttpArrival:
        """Records that this attempt's response has begun to arrive, and returns ``arrival``.

        A client integration calls it once the status and headers have arrived, then adds the
        body to ``arrival`` as it arrives, never past the attempt's time. When that time runs
        out before the attempt returns (the adapter's timer fires, or a synchronous attempt
        returns late), the attempt's outcome is the response as it stood then
        (:meth:`HttpArrival.cut`, classified by the adapter's classifier when it is an
        :class:`~candor.ArrivalClassifier`), not an attempt with no answer. A second call
        replaces the first's arrival.
        """
        object.__setattr__(self, "_arrival", arrival)
        return arrival

    @property
    def arrival(self) -> HttpArrival | None:
        """The response recorded by :meth:`receiving`, if the attempt recorded one."""
        return self._arrival

    @property
    def timeout(self) -> timedelta:
        """How long this attempt may take."""
        return timedelta_of(self.timeout_ns)

    @property
    def timeout_seconds(self) -> float:
        """How long this attempt may take, in seconds: what HTTP clients take as ``timeout``."""
        return self.timeout_ns / 1e9


def _millis(ns: int) -> int:
    return max(ns, 0) // _NS_PER_MS


def _stamp(wall_ns: int) -> tuple[datetime, int]:
    """A wall-clock time as the envelope holds it (cut to microseconds), and in nanoseconds.

    Telemetry takes the nanoseconds, which are exactly what the datetime converts back to.
    """
    at = datetime_from_ns(wall_ns)
    return at, wall_ns // 1000 * 1000


def _no_answer(context: AttemptContext, attempt_timeout_ns: int) -> Failure:
    """The failure of an attempt that produced no answer within its time.

    It is labelled from the adapter's own knowledge that a request went out and nothing came
    back: a ``deadline`` when the attempt was given less than the adapter's
    ``attempt_timeout_ns`` (the call's or the operation's deadline was nearer), else a
    ``timeout``.
    """
    after_ns = context.timeout_ns
    if after_ns < attempt_timeout_ns:
        kind = AccessFailureKind.DEADLINE
        message = (
            f"the call's deadline ran out {format_seconds(after_ns)} into the attempt, "
            "with no answer"
        )
        error_type = "deadline"
    else:
        kind = AccessFailureKind.TIMEOUT
        message = f"no answer within the attempt timeout of {format_seconds(after_ns)}"
        error_type = "timeout"
    return Failure(kind, retryable=True, message=message, error_type=error_type)


def _refuse_awaitable(awaitable: object, message: str) -> NoReturn:
    """Refuses the awaitable a synchronous attempt returned: it is closed, never awaited.

    Closing a coroutine that will never be awaited keeps it from raising a warning; the
    :class:`TypeError` carries ``message``.
    """
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
    raise TypeError(message)


async def _settled(
    operation: Awaitable[T], timeout_ns: int, clock: Clock
) -> asyncio.Future[T] | None:
    """The operation once it is done, or ``None`` when the clock's timer ran out first.

    The operation takes its first step before the timer is made, so an answer that is
    ready at once costs no timer.
    """
    task: asyncio.Future[T] = asyncio.ensure_future(operation)
    timer: asyncio.Task[None] | None = None
    try:
        if not task.done():
            await asyncio.sleep(0)
        if not task.done():
            timer = asyncio.ensure_future(clock.asleep(timeout_ns))
            racing: set[asyncio.Future[Any]] = {task, timer}
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        return task if task.done() else None
    finally:
        for pending in (task, timer):
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending
