"""Calls that end in each of the four classes, made through a real adapter."""

from __future__ import annotations

from candor import (
    AccessFailure,
    AccessFailureKind,
    Adapter,
    AttemptContext,
    Empty,
    Envelope,
    Extent,
    Failure,
    FixedJitter,
    FnClassifier,
    Outcome,
    Partial,
    PartialKind,
    Success,
    Truncation,
)
from candor.testing import FakeClock

TOOL = "catalogue.search"
TARGET = "https://catalogue.example/v1/items?api_key=s3cret"

SUCCESS = Success({"items": ["cats-1", "cats-2"]}, Extent(items=2))
EMPTY = Empty(Extent(items=0, scope="the catalogue"))
PARTIAL = Partial(
    {"items": ["cats-1"]},
    Truncation(PartialKind.DECLARED_TOTAL, "items 1-1 of 3", "2 item(s)", returned=1, expected=3),
)
FAILURE = AccessFailure(
    Failure(AccessFailureKind.SERVER_ERROR, True, "HTTP 503: the catalogue is busy", status=503)
)

OUTCOMES: dict[str, Outcome] = {
    "success": SUCCESS,
    "empty": EMPTY,
    "partial": PARTIAL,
    "access_failure": FAILURE,
}
"""One outcome of each class, by the class's name."""


def _as_is(outcome: Outcome) -> Outcome:
    return outcome


def adapter() -> Adapter[Outcome]:
    """An adapter whose attempts end as they say, on a clock that never waits."""
    return Adapter(TOOL, TARGET, FnClassifier(_as_is), clock=FakeClock(), jitter=FixedJitter(0.0))


def answered(outcome: Outcome) -> Envelope:
    """The envelope of a call whose every attempt ends as ``outcome``: an AccessFailure is
    retried until the retry budget runs out."""
    return adapter().call(lambda attempt: outcome)


async def answered_async(outcome: Outcome) -> Envelope:
    """:func:`answered`, through the adapter's asynchronous path."""

    async def attempt(context: AttemptContext) -> Outcome:
        return outcome

    return await adapter().acall(attempt)
