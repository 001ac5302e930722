"""Classification: a total function from what a tool returned to one of four outcomes.

:class:`candor.classify.http.HttpClassifier` implements the rules for HTTP APIs;
:class:`FnClassifier` takes a tool author's own mapping for anything else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from candor.envelope import AccessFailure, Empty, Evidence, Lifecycle, Outcome, Partial, Success

__all__ = ["Classification", "Classifier", "ExceptionClassifier", "FnClassifier"]

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class Classification:
    """What one attempt's raw result was classified as."""

    outcome: Outcome
    """The outcome of the attempt."""
    evidence: Evidence | None = None
    """A handle that verifies the outcome, when the response carried one."""
    lifecycle: Lifecycle | None = None
    """The state of an asynchronous operation the response reported on."""
    poll_after_ms: int | None = None
    """How long the source asked to wait before the status of the operation it accepted is
    read (the acceptance's ``Retry-After``), in milliseconds."""


class Classifier(Protocol[R_contra]):
    """Classifies the raw result of one attempt.

    Implementations must be total (every raw result gets exactly one outcome) and
    deterministic, and must not raise for any raw result of their type.
    """

    def classify(self, raw: R_contra, /) -> Classification:
        """Classifies one attempt's raw result."""
        ...


@runtime_checkable
class ExceptionClassifier(Protocol):
    """A classifier that also classifies what an attempt raised.

    When an attempt raises, the adapter asks the classifier's ``classify_exception``: a
    :class:`Classification` is the attempt's outcome, ``None`` means the exception is not an
    outcome of the tool (a bug in the calling code) and it propagates unchanged.
    """

    def classify_exception(self, error: Exception, /) -> Classification | None:
        """Classifies an exception an attempt raised, or ``None`` to let it propagate."""
        ...


class FnClassifier(Generic[R]):
    """A classifier made of the tool author's own mapping, for tools that are not HTTP.

    The mapping returns an outcome (:class:`candor.Success`, :class:`candor.Empty`,
    :class:`candor.Partial`, :class:`candor.AccessFailure`) or a whole
    :class:`Classification`.
    """

    def __init__(self, mapping: Callable[[R], Outcome | Classification]) -> None:
        self._mapping = mapping

    def classify(self, raw: R, /) -> Classification:
        """Applies the mapping."""
        result = self._mapping(raw)
        if isinstance(result, Success | Empty | Partial | AccessFailure):
            return Classification(result)
        return result
