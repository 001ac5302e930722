"""The consumer's side: one arm per class, none left to a default, checked by mypy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from candor import (
    AccessFailure,
    Empty,
    Envelope,
    Outcome,
    OutcomeClass,
    Partial,
    Success,
    match_outcome,
)
from candor.consumer import model_text, model_view

from .outcomes import FAILURE, OUTCOMES, answered

SRC = Path(__file__).parent.parent / "src"

Arm = Callable[[Outcome, Envelope], str]


def recorder(seen: list[tuple[str, Outcome, Envelope]]) -> Callable[[str], Arm]:
    """Makes arms that record which was called, with what, and answer with their name."""

    def arm(name: str) -> Arm:
        def called(outcome: Outcome, envelope: Envelope) -> str:
            seen.append((name, outcome, envelope))
            return name

        return called

    return arm


@pytest.mark.parametrize("name", OUTCOMES)
def test_the_arm_of_the_class_is_called_with_the_outcome_and_the_envelope(name: str) -> None:
    envelope = answered(OUTCOMES[name])
    seen: list[tuple[str, Outcome, Envelope]] = []
    arm = recorder(seen)
    result = match_outcome(
        envelope,
        success=arm("success"),
        empty=arm("empty"),
        partial=arm("partial"),
        access_failure=arm("access_failure"),
    )
    assert result == name
    assert seen == [(name, envelope.outcome, envelope)]
    assert envelope.outcome_class is OutcomeClass(name)


def test_the_result_is_the_arms() -> None:
    envelope = answered(FAILURE)
    kind = match_outcome(
        envelope,
        success=lambda outcome, _: outcome.extent,
        empty=lambda outcome, _: outcome.extent,
        partial=lambda outcome, _: outcome.truncation,
        access_failure=lambda outcome, _: outcome.failure.kind,
    )
    assert kind == FAILURE.failure.kind


def test_an_arm_left_out_is_refused_at_run_time_too() -> None:
    envelope = answered(OUTCOMES["success"])
    with pytest.raises(TypeError, match="partial"):
        match_outcome(  # type: ignore[call-arg]
            envelope,
            success=lambda outcome, _: outcome.payload,
            empty=lambda outcome, _: None,
            access_failure=lambda outcome, _: None,
        )


SNIPPET = """\
from candor import Envelope, match_outcome


def complete(envelope: Envelope) -> None:
    result = match_outcome(
        envelope,
        success=lambda outcome, _: outcome.extent.items,
        empty=lambda outcome, envelope: envelope.target,
        partial=lambda outcome, _: outcome.truncation,
        access_failure=lambda outcome, _: outcome.failure,
    )
    reveal_type(result)


def typed_arms(envelope: Envelope) -> None:
    match_outcome(
        envelope,
        success=lambda outcome, _: outcome.truncation,
        empty=lambda outcome, _: None,
        partial=lambda outcome, _: None,
        access_failure=lambda outcome, _: None,
    )


def missing_arm(envelope: Envelope) -> str:
    return match_outcome(
        envelope,
        success=lambda outcome, _: "use it",
        empty=lambda outcome, _: "nothing matches",
        access_failure=lambda outcome, _: "unknown",
    )
"""


def test_mypy_refuses_a_match_without_an_arm(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--hide-error-context",
            "--cache-dir",
            str(tmp_path / "cache"),
            snippet.name,
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(SRC)},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("snippet.py:")]
    reports = [line.split(":", 2)[1:] for line in lines]
    assert reports == [
        [
            "12",
            ' note: Revealed type is "int | None | str | candor.envelope.Truncation | '
            'candor.envelope.Failure"',
        ],
        ["18", ' error: "Success" has no attribute "truncation"  [attr-defined]'],
        ["26", ' error: Missing named argument "partial" for "match_outcome"  [call-arg]'],
        ["26", ' note: "match_outcome" defined in "candor.consumer"'],
    ], done.stdout + done.stderr
    assert done.returncode == 1


@pytest.mark.parametrize("name", OUTCOMES)
def test_the_model_view_is_the_summary_the_outcome_and_the_next_actions(name: str) -> None:
    envelope = answered(OUTCOMES[name])
    view = model_view(envelope)
    assert view == {
        "summary": envelope.summary(),
        "outcome": envelope.to_dict()["outcome"],
        "next_actions": [action.value for action in envelope.next_actions],
    }
    assert list(view) == ["summary", "outcome", "next_actions"]
    summary, rest = model_text(envelope).split("\n")
    assert summary == envelope.summary()
    assert json.loads(rest) == {"outcome": view["outcome"], "next_actions": view["next_actions"]}


def test_an_access_failure_is_handed_over_as_a_failure() -> None:
    envelope = answered(FAILURE)
    view = model_view(envelope)
    assert view["outcome"] == {
        "class": "access_failure",
        "failure": {
            "kind": "server_error",
            "retryable": True,
            "message": "HTTP 503: the catalogue is busy",
            "status": 503,
        },
    }
    assert view["next_actions"] == ["retry", "escalate"]
    summary = str(view["summary"])
    assert "FAILED" in summary
    assert "exhausted after 3 attempt(s)" in summary
    assert "The source's contents are unknown" in summary
    assert "s3cret" not in model_text(envelope)


def test_the_arms_are_typed_by_class() -> None:
    envelope = answered(OUTCOMES["partial"])
    outcome = match_outcome(
        envelope,
        success=lambda outcome, _: outcome,
        empty=lambda outcome, _: outcome,
        partial=lambda outcome, _: outcome,
        access_failure=lambda outcome, _: outcome,
    )
    assert isinstance(outcome, Partial)
    assert not isinstance(outcome, Success | Empty | AccessFailure)
