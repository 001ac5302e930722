"""The closed vocabularies, the retry policy and the jitter sources."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from candor import (
    AccessFailure,
    AccessFailureKind,
    Done,
    Empty,
    EvidenceKind,
    Failure,
    FailureKind,
    FixedJitter,
    GiveUp,
    LifecycleState,
    NextAction,
    OutcomeClass,
    Partial,
    PartialKind,
    Retry,
    RetryAction,
    RetryPolicy,
    SeededJitter,
    Success,
    Truncation,
    UnknownValueError,
)
from candor.retry import format_seconds
from candor.vocab import Vocabulary

VOCABULARIES: list[type[Vocabulary]] = [
    OutcomeClass,
    FailureKind,
    AccessFailureKind,
    PartialKind,
    RetryAction,
    LifecycleState,
    NextAction,
    EvidenceKind,
]


@pytest.mark.parametrize("vocabulary", VOCABULARIES)
def test_every_member_round_trips_its_wire_spelling(vocabulary: type[Vocabulary]) -> None:
    for member in vocabulary:
        assert vocabulary.parse(str(member)) is member
        assert member.value == member.value.lower()


def test_outcome_class_spellings_are_the_contract() -> None:
    assert [c.value for c in OutcomeClass] == ["success", "empty", "partial", "access_failure"]


@pytest.mark.parametrize("bad", ["Success", "SUCCESS", "unknown", "", " success", "access-failure"])
def test_unknown_and_differently_cased_values_name_the_vocabulary_and_value(bad: str) -> None:
    with pytest.raises(UnknownValueError) as caught:
        OutcomeClass.parse(bad)
    assert caught.value.value == bad
    assert "outcome class" in str(caught.value)
    assert f'"{bad}"' in str(caught.value)


def test_a_huge_unknown_value_is_echoed_only_in_part() -> None:
    with pytest.raises(UnknownValueError) as caught:
        FailureKind.parse("x" * 10_000)
    assert len(str(caught.value)) < 400
    with pytest.raises(UnknownValueError, match="retry action"):
        RetryAction.parse(3)


def test_access_and_partial_kinds_are_failure_kinds() -> None:
    for kind in AccessFailureKind:
        assert kind.failure_kind.value == kind.value
    for partial in PartialKind:
        assert partial.failure_kind.value == partial.value


def failure(retryable: bool, retry_after_ms: int | None = None) -> AccessFailure:
    return AccessFailure(
        Failure(AccessFailureKind.SERVER_ERROR, retryable, "", 503, retry_after_ms=retry_after_ms)
    )


def test_success_empty_and_partial_end_the_call() -> None:
    policy = RetryPolicy()
    partial = Partial(None, Truncation(PartialKind.SIZE_CAP, "", ""))
    for outcome in (Success(None), Empty(), partial):
        assert policy.decide(1, timedelta(0), outcome, 0.5) == Done()
    assert Done().action(partial) is RetryAction.ACCEPT_PARTIAL


def test_permanent_failures_are_never_retried() -> None:
    assert RetryPolicy().decide(1, timedelta(0), failure(False), 0.5) == GiveUp(
        RetryAction.PERMANENT
    )


def test_backoff_ceilings_double_up_to_the_maximum() -> None:
    policy = RetryPolicy(max_backoff=timedelta(milliseconds=700))
    ceilings = [policy.backoff_ceiling(n) // timedelta(milliseconds=1) for n in range(1, 6)]
    assert ceilings == [100, 200, 400, 700, 700]


def test_full_jitter_scales_the_ceiling() -> None:
    policy = RetryPolicy(max_attempts=5)

    def decide(attempt: int, jitter: float) -> object:
        return policy.decide(attempt, timedelta(0), failure(True), jitter)

    assert decide(1, 0.0) == Retry(0)
    assert decide(2, 0.5) == Retry(100_000_000)
    assert decide(3, 0.25) == Retry(100_000_000)
    assert decide(1, 0.3333) == Retry(33_330_000)


def test_the_last_attempt_is_exhausted() -> None:
    exhausted = GiveUp(RetryAction.EXHAUSTED)
    assert RetryPolicy().decide(3, timedelta(0), failure(True), 0.5) == exhausted


def test_retry_after_is_a_floor_and_beyond_the_cap_ends_the_call() -> None:
    policy = RetryPolicy(retry_after_cap=timedelta(seconds=10))
    assert policy.decide(1, timedelta(0), failure(True, 2_000), 0.5) == Retry(2_000_000_000)
    assert policy.decide(1, timedelta(0), failure(True, 10_000), 0.5) == Retry(10_000_000_000)
    assert policy.decide(1, timedelta(0), failure(True, 11_000), 0.5) == GiveUp(
        RetryAction.EXHAUSTED
    )


def test_no_retry_starts_past_max_elapsed() -> None:
    policy = RetryPolicy(max_elapsed=timedelta(seconds=1))
    decision = policy.decide(1, timedelta(milliseconds=990), failure(True, 20), 0.0)
    assert decision == GiveUp(RetryAction.EXHAUSTED)


def test_invalid_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="max_attempts must be at least 1, got 0"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="initial_backoff 0:00:02"):
        RetryPolicy(initial_backoff=timedelta(seconds=2), max_backoff=timedelta(seconds=1))
    with pytest.raises(ValueError, match="must be positive"):
        RetryPolicy(initial_backoff=timedelta(0))
    assert RetryPolicy(max_elapsed=timedelta(0), retry_after_cap=timedelta(0)).max_attempts == 3


def test_fixed_jitter_draws_its_fraction_held_below_one() -> None:
    assert FixedJitter(0.25).next_fraction() == 0.25
    assert FixedJitter(1.0).next_fraction() < 1.0
    assert FixedJitter(-3.0).next_fraction() == 0.0
    assert FixedJitter(math.nan).next_fraction() == 0.0


def test_seeded_jitter_is_replayable_and_in_range() -> None:
    a, b = SeededJitter(7), SeededJitter(7)
    for _ in range(1000):
        x = a.next_fraction()
        assert x == b.next_fraction()
        assert 0.0 <= x < 1.0
    assert SeededJitter(7).next_fraction() != SeededJitter(8).next_fraction()


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "0.000000001s"),
        (50_000_000, "0.05s"),
        (250_000_000, "0.25s"),
        (1_500_000_000, "1.5s"),
        (10_000_000_000, "10s"),
        (300_000_000_000, "300s"),
    ],
)
def test_a_duration_in_a_message_is_written_in_seconds(ns: int, text: str) -> None:
    assert format_seconds(ns) == text
