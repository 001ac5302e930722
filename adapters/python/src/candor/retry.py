"""The retry policy: a pure decision from (attempt, elapsed time, outcome) to what happens next.

Success, Empty and Partial end the call; a permanent AccessFailure is never retried; a transient
one is retried with exponential backoff and full jitter while the budget lasts; ``Retry-After``
is honoured up to a cap; and a budget that runs out ends the call as an AccessFailure marked
``exhausted``, never as anything else.
"""

from __future__ import annotations

import math
import random
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from typing import Final, Protocol, TypeAlias

from candor.envelope import AccessFailure, Outcome, Partial
from candor.vocab import RetryAction

__all__ = [
    "Decision",
    "Done",
    "FixedJitter",
    "GiveUp",
    "Jitter",
    "RandomJitter",
    "Retry",
    "RetryPolicy",
    "SeededJitter",
    "format_seconds",
    "ns_of",
    "timedelta_of",
]

_NS_PER_SECOND: Final = 1_000_000_000
_MICROSECOND: Final = timedelta(microseconds=1)


def ns_of(duration: timedelta) -> int:
    """Nanoseconds in a :class:`~datetime.timedelta`."""
    return duration // _MICROSECOND * 1000


def timedelta_of(ns: int) -> timedelta:
    """A :class:`~datetime.timedelta` of ``ns`` nanoseconds, cut to microseconds."""
    return timedelta(microseconds=ns // 1000)


def format_seconds(ns: int) -> str:
    """``ns`` nanoseconds in seconds, exact, without trailing zeros: ``10s``, ``0.25s``."""
    seconds, nanos = divmod(ns, _NS_PER_SECOND)
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{seconds}.{fraction}s" if fraction else f"{seconds}s"


def _mul_f64(ns: int, factor: float) -> int:
    """``ns`` scaled by ``factor``, rounded to the nanosecond as Rust's ``Duration::mul_f64``."""
    secs, nanos = divmod(ns, _NS_PER_SECOND)
    product = factor * (float(secs) + float(nanos) / 1e9)
    return round(Fraction(product) * _NS_PER_SECOND)


@dataclass(frozen=True, slots=True)
class Done:
    """The call is over with this attempt's outcome (Success, Empty, or an accepted Partial)."""

    def action(self, outcome: Outcome) -> RetryAction | None:
        """``accept_partial`` for a Partial, else no action."""
        return RetryAction.ACCEPT_PARTIAL if isinstance(outcome, Partial) else None


@dataclass(frozen=True, slots=True)
class Retry:
    """Try again after the wait."""

    after_ns: int
    """How long to wait before the next attempt, in nanoseconds."""

    @property
    def after(self) -> timedelta:
        """How long to wait before the next attempt."""
        return timedelta_of(self.after_ns)

    def action(self, outcome: Outcome) -> RetryAction | None:  # noqa: ARG002 - one signature
        """``retry``."""
        return RetryAction.RETRY


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The call is over with this attempt's AccessFailure."""

    retry_action: RetryAction
    """``exhausted`` (transient, budget spent) or ``permanent`` (asking again cannot help)."""

    def action(self, outcome: Outcome) -> RetryAction | None:  # noqa: ARG002 - one signature
        """``exhausted`` or ``permanent``."""
        return self.retry_action


Decision: TypeAlias = Done | Retry | GiveUp
"""What the policy decided after an attempt."""

_DONE: Final = Done()
_EXHAUSTED: Final = GiveUp(RetryAction.EXHAUSTED)
_PERMANENT: Final = GiveUp(RetryAction.PERMANENT)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a call retries transient AccessFailures.

    ===================  ========  ==============================================================
    setting              default   meaning
    ===================  ========  ==============================================================
    ``max_attempts``     3         attempts in all, the first included
    ``initial_backoff``  100 ms    the ceiling of the first wait; doubles each retry
    ``max_backoff``      5 s       the largest ceiling
    ``max_elapsed``      30 s      no retry is started once this much time has passed
    ``retry_after_cap``  30 s      the longest ``Retry-After`` honoured; a longer one ends the
                                   call
    ===================  ========  ==============================================================

    Waits use full jitter: a uniform draw between zero and the ceiling. A ``Retry-After`` is a
    floor under that draw, never shortened: when it is longer than the cap or than the time
    left, the call ends as ``exhausted`` rather than asking the source again early.
    """

    max_attempts: int = 3
    initial_backoff: timedelta = timedelta(milliseconds=100)
    max_backoff: timedelta = timedelta(seconds=5)
    max_elapsed: timedelta = timedelta(seconds=30)
    retry_after_cap: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise ValueError(f"retry max_attempts must be at least 1, got {self.max_attempts}")
        if self.initial_backoff <= timedelta(0) or self.initial_backoff > self.max_backoff:
            raise ValueError(
                f"retry initial_backoff {self.initial_backoff} must be positive and at most "
                f"max_backoff {self.max_backoff}"
            )

    @classmethod
    def no_retry(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(max_attempts=1)

    def backoff_ceiling(self, attempt: int) -> timedelta:
        """The ceiling of the wait after attempt ``attempt`` (1-based), before jitter."""
        return timedelta_of(self._ceiling_ns(attempt))

    def _ceiling_ns(self, attempt: int) -> int:
        doublings = min(max(attempt - 1, 0), 31)
        return min(ns_of(self.initial_backoff) * (1 << doublings), ns_of(self.max_backoff))

    def backoff_ns(self, attempt: int, jitter: float) -> int:
        """The wait after attempt ``attempt`` (1-based), in nanoseconds, before any Retry-After.

        That is the ceiling times ``jitter``, the draw held within ``[0, 1]`` (a NaN draws 0),
        rounded to the nanosecond.
        """
        fraction = 0.0 if math.isnan(jitter) else min(max(jitter, 0.0), 1.0)
        return _mul_f64(self._ceiling_ns(attempt), fraction)

    def decide(self, attempt: int, elapsed: timedelta, outcome: Outcome, jitter: float) -> Decision:
        """Decides what follows attempt ``attempt`` (1-based), ``elapsed`` after the call started.

        ``jitter`` is a draw from ``[0, 1)`` (see :class:`Jitter`).
        """
        return self.decide_ns(attempt, ns_of(elapsed), outcome, jitter)

    def decide_ns(self, attempt: int, elapsed_ns: int, outcome: Outcome, jitter: float) -> Decision:
        """:meth:`decide` with the elapsed time in nanoseconds."""
        if not isinstance(outcome, AccessFailure):
            return _DONE
        failure = outcome.failure
        if not failure.retryable:
            return _PERMANENT
        if attempt >= self.max_attempts:
            return _EXHAUSTED
        wait = self.backoff_ns(attempt, jitter)
        if failure.retry_after_ms is not None:
            retry_after = failure.retry_after_ms * 1_000_000
            if retry_after > ns_of(self.retry_after_cap):
                return _EXHAUSTED
            wait = max(wait, retry_after)
        if elapsed_ns + wait >= ns_of(self.max_elapsed):
            return _EXHAUSTED
        return Retry(wait)


class Jitter(Protocol):
    """A source of jitter draws in ``[0, 1)``, shared by concurrent calls."""

    def next_fraction(self) -> float:
        """The next draw."""
        ...


class RandomJitter:
    """Draws from a random generator of its own (the default)."""

    def __init__(self) -> None:
        self._random = random.Random()  # noqa: S311 - jitter, not a secret

    def next_fraction(self) -> float:
        """A uniform draw in ``[0, 1)``."""
        # No lock: Random.random is one call into C, which no other thread interrupts (it
        # holds the GIL, or in a free-threaded build the generator's own critical section).
        return self._random.random()


_LARGEST_BELOW_ONE: Final = 1.0 - sys.float_info.epsilon / 2.0
_U64: Final = (1 << 64) - 1
_GAMMA: Final = 0x9E37_79B9_7F4A_7C15


class FixedJitter:
    """Every draw is the same fraction, held within ``[0, 1)`` (a NaN draws 0).

    The conformance vectors use it to pin a schedule in any language.
    """

    def __init__(self, fraction: float) -> None:
        self.fraction = 0.0 if math.isnan(fraction) else min(max(fraction, 0.0), _LARGEST_BELOW_ONE)

    def next_fraction(self) -> float:
        """The fixed fraction."""
        return self.fraction


class SeededJitter:
    """Draws fixed by a seed: SplitMix64, the same sequence as the Rust adapter's seeded jitter."""

    def __init__(self, seed: int) -> None:
        self._state = seed & _U64
        self._lock = threading.Lock()

    def next_fraction(self) -> float:
        """The next draw, uniform in ``[0, 1)``."""
        with self._lock:
            self._state = (self._state + _GAMMA) & _U64
            z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9) & _U64
        z = ((z ^ (z >> 27)) * 0x94D0_49BB_1331_11EB) & _U64
        z ^= z >> 31
        return (z >> 11) / float(1 << 53)
