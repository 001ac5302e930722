"""Time as the adapter sees it, injected so that retry and timeout logic is testable."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """A source of time: a monotonic clock, a wall clock, and sleeping.

    The monotonic clock measures durations, the wall clock stamps times; all values are
    integer nanoseconds.
    """

    def monotonic_ns(self) -> int:
        """Monotonic now, for deadlines and durations."""
        ...

    def wall_ns(self) -> int:
        """Wall-clock now, nanoseconds since the Unix epoch, for timestamps."""
        ...

    def sleep(self, ns: int) -> None:
        """Blocks the thread for ``ns`` nanoseconds (the synchronous path's backoff)."""
        ...

    async def asleep(self, ns: int) -> None:
        """Completes after ``ns`` nanoseconds (the asynchronous path's backoff and timer)."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic_ns`, :func:`time.time_ns` and real sleeps."""

    # The time functions themselves, not methods that call them: a call reads the clock
    # without a Python frame in between (the adapter reads it a few times per call).
    monotonic_ns = staticmethod(time.monotonic_ns)
    """:func:`time.monotonic_ns`."""
    wall_ns = staticmethod(time.time_ns)
    """:func:`time.time_ns`."""

    def sleep(self, ns: int) -> None:
        """:func:`time.sleep`."""
        time.sleep(ns / 1e9)

    async def asleep(self, ns: int) -> None:
        """:func:`asyncio.sleep`."""
        await asyncio.sleep(ns / 1e9)
