"""Fakes for tests of code that uses the adapter: a clock that never waits."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from candor.retry import ns_of
from candor.timestamps import datetime_to_ns

__all__ = ["FakeClock"]


class FakeClock:
    """A clock whose sleeps complete at once, moving its time forward by the amount slept.

    Time moves only when :meth:`advance` is called or something sleeps; every sleep is
    recorded in :attr:`slept`.
    """

    def __init__(self, wall: datetime | int = 1_800_000_000 * 10**9) -> None:
        """``wall`` is the wall-clock start: a datetime, or nanoseconds since the epoch."""
        self._wall_origin = datetime_to_ns(wall) if isinstance(wall, datetime) else wall
        self._offset = 0
        self._lock = threading.Lock()
        self.slept: list[int] = []
        """Every sleep, in nanoseconds, in order."""

    def advance(self, by: timedelta | int) -> None:
        """Moves time forward without a sleep (``by`` a timedelta or nanoseconds)."""
        with self._lock:
            self._offset += ns_of(by) if isinstance(by, timedelta) else by

    @property
    def elapsed_ns(self) -> int:
        """How far time has moved, in nanoseconds."""
        return self._offset

    def monotonic_ns(self) -> int:
        """Nanoseconds since the clock was made."""
        return self._offset

    def wall_ns(self) -> int:
        """The wall-clock start plus how far time has moved."""
        return self._wall_origin + self._offset

    def sleep(self, ns: int) -> None:
        """Moves time forward by ``ns`` at once."""
        with self._lock:
            self._offset += ns
            self.slept.append(ns)

    async def asleep(self, ns: int) -> None:
        """Moves time forward by ``ns`` at once."""
        self.sleep(ns)
