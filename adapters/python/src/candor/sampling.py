"""A sampler that keeps the adapter's failure spans whatever the host's sampler says.

This module needs the OpenTelemetry SDK (``opentelemetry-sdk``), which the application
installs; ``import candor`` does not import it.

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

    provider = TracerProvider(sampler=KeepToolFailures(TraceIdRatioBased(0.01)))
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from candor.names import TOOL_CALL_SPAN, attr
from candor.vocab import OutcomeClass

__all__ = ["KeepToolFailures", "is_tool_failure"]

_FAILURES = frozenset({OutcomeClass.ACCESS_FAILURE.value, OutcomeClass.PARTIAL.value})


def is_tool_failure(name: str, attributes: Attributes) -> bool:
    """Whether a span about to start is an adapter span to keep.

    It records a failure, or the states of an asynchronous operation (kept like failures: a lost
    acceptance hides an operation that never finished).
    """
    if name != TOOL_CALL_SPAN or not attributes:
        return False
    return (
        attr.FAILURE_KIND in attributes
        or attr.LIFECYCLE_STATE in attributes
        or attributes.get(attr.OUTCOME_CLASS) in _FAILURES
    )


class KeepToolFailures(Sampler):
    """Wraps the host's sampler so that no failure span is dropped.

    A ``tool.call`` span that records an AccessFailure or a Partial, or an operation's states,
    is always recorded and sampled; every other span is left to the wrapped sampler.
    """

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner
        """The host's sampler."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        """Records and samples a failure span, keeping the parent's trace state."""
        if is_tool_failure(name, attributes):
            parent = get_current_span(parent_context).get_span_context()
            return SamplingResult(
                Decision.RECORD_AND_SAMPLE,
                attributes,
                parent.trace_state if parent.is_valid else trace_state,
            )
        return self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        """``KeepToolFailures{inner}``."""
        return f"KeepToolFailures{{{self.inner.get_description()}}}"
