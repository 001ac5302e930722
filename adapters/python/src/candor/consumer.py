"""The consumer's side: spending the outcome a call was given, all four classes of it.

:func:`match_outcome` branches on an envelope's class with one arm per class, every arm a
required keyword argument, so that a type checker refuses a call that leaves a class out::

    from candor import Envelope, match_outcome

    def describe(envelope: Envelope) -> str:
        return match_outcome(
            envelope,
            success=lambda outcome, _: f"{outcome.extent.items} item(s)",
            empty=lambda _, envelope: f"nothing in {envelope.target}",
            partial=lambda outcome, _: f"only {outcome.truncation.covered}",
            access_failure=lambda outcome, _: f"unknown: {outcome.failure.message}",
        )

:func:`model_view` and :func:`model_text` are what a model is handed for a call, by the
framework integrations in :mod:`candor.integrations`: the summary first (its words follow the
class), then the outcome with its class and the legal next actions. An AccessFailure is never
handed over as an empty result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, assert_never

from candor.envelope import AccessFailure, Empty, Envelope, Partial, Success
from candor.jsonvalue import JsonValue, dumps

__all__ = ["match_outcome", "model_text", "model_view"]

SuccessT = TypeVar("SuccessT")
EmptyT = TypeVar("EmptyT")
PartialT = TypeVar("PartialT")
FailureT = TypeVar("FailureT")


def match_outcome(
    envelope: Envelope,
    /,
    *,
    success: Callable[[Success, Envelope], SuccessT],
    empty: Callable[[Empty, Envelope], EmptyT],
    partial: Callable[[Partial, Envelope], PartialT],
    access_failure: Callable[[AccessFailure, Envelope], FailureT],
) -> SuccessT | EmptyT | PartialT | FailureT:
    """Calls the arm of the envelope's class with its typed outcome and the envelope.

    Every arm is required, so that no class is left to a default: a call without one is a type
    error (``Missing named argument``) and, unchecked, a :class:`TypeError`. The result is the
    union of the arms' result types, one type when they agree.
    """
    outcome = envelope.outcome
    match outcome:
        case Success():
            return success(outcome, envelope)
        case Empty():
            return empty(outcome, envelope)
        case Partial():
            return partial(outcome, envelope)
        case AccessFailure():
            return access_failure(outcome, envelope)
        case _:
            assert_never(outcome)


def model_view(envelope: Envelope) -> dict[str, JsonValue]:
    """What a model is given for a call, as JSON values.

    ``summary`` (the one-line summary whose words follow the class), ``outcome`` (the
    envelope's outcome: its ``class`` and the payload, extent, truncation or failure that class
    carries) and ``next_actions`` (what may legally be done next).
    """
    return {
        "summary": envelope.summary(),
        "outcome": envelope.outcome.to_dict(),
        "next_actions": [action.value for action in envelope.next_actions],
    }


def model_text(envelope: Envelope) -> str:
    """What a model is given for a call, as text.

    The summary on the first line, then the outcome and the next actions of :func:`model_view`
    as one line of JSON.
    """
    view = model_view(envelope)
    rest = {key: value for key, value in view.items() if key != "summary"}
    return f"{envelope.summary()}\n{dumps(rest)}"
