"""This package's names and vocabularies against ``spec/v1/registry.md``, so neither drifts.

The registry is generated from the Rust declarations; this test reads the Markdown a person
reads and checks every name, unit and vocabulary member this package spells.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from candor import names
from candor.names import attr
from candor.vocab import Vocabulary

REGISTRY = Path(__file__).parent / ".." / ".." / ".." / "spec" / "v1" / "registry.md"

SIGNAL_HEADINGS = {
    "Span event": (names.OUTCOME_EVENT, names.LIFECYCLE_EVENT),
    "Span": (names.TOOL_CALL_SPAN,),
    "Counter": (names.OUTCOMES_COUNTER,),
    "Gauge": (names.EXPORT_INTERVAL_GAUGE,),
}

UNITS = {
    names.OUTCOMES_COUNTER: names.OUTCOMES_COUNTER_UNIT,
    names.EXPORT_INTERVAL_GAUGE: names.EXPORT_INTERVAL_GAUGE_UNIT,
}


def sections(level: str) -> dict[str, str]:
    """The registry's sections at one heading level (``##`` or ``###``): heading to body."""
    text = REGISTRY.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{level} (.+)$", re.MULTILINE)
    found: dict[str, str] = {}
    matches = list(pattern.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        found[match.group(1)] = text[match.end() : end]
    return found


def first_column(body: str) -> list[str]:
    """The backticked first cells of a Markdown table's rows, in order (none without a table)."""
    return re.findall(r"^\| `([^`]+)` \|", body, re.MULTILINE)


def test_every_signal_is_spelled_as_the_registry_spells_it() -> None:
    headings = sections("##")
    for kind, spelled in SIGNAL_HEADINGS.items():
        for name in spelled:
            assert any(heading.startswith(f"{kind} `{name}`") for heading in headings), (kind, name)
    for name, unit in UNITS.items():
        heading = next(h for h in headings if f" `{name}` " in h)
        assert f"unit `{unit}`" in heading, (name, unit)


def test_the_attributes_spelled_here_are_the_registered_ones() -> None:
    registered: set[str] = set()
    for heading, body in sections("##").items():
        if heading.split(" `")[0] in SIGNAL_HEADINGS:
            registered.update(first_column(body))
    spelled = {value for key, value in vars(attr).items() if key.isupper()}
    assert spelled == registered


def vocabularies() -> list[type[Vocabulary]]:
    """Every closed vocabulary this package declares."""
    return list(Vocabulary.__subclasses__())


@pytest.mark.parametrize("vocabulary", vocabularies(), ids=lambda v: v.__name__)
def test_every_vocabulary_has_the_registrys_members_in_its_order(
    vocabulary: type[Vocabulary],
) -> None:
    by_name = {heading.split(" (")[0]: body for heading, body in sections("###").items()}
    body = by_name.get(vocabulary.vocabulary_name())
    assert body is not None, f"{vocabulary.vocabulary_name()} is not in the registry"
    assert [member.value for member in vocabulary] == first_column(body)


def test_every_registered_vocabulary_is_declared_here() -> None:
    declared = {vocabulary.vocabulary_name() for vocabulary in vocabularies()}
    registered = {heading.split(" (")[0] for heading in sections("###")}
    assert registered == declared
