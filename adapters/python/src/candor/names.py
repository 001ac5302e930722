"""Wire names shared with every other Candor component.

These constants are the only place in this package where the names are spelled; everything
that emits a span, an event, a counter or an attribute reads them from here.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ADAPTER_NAME",
    "EXPORT_INTERVAL_GAUGE",
    "EXPORT_INTERVAL_GAUGE_UNIT",
    "LIFECYCLE_EVENT",
    "OUTCOMES_COUNTER",
    "OUTCOMES_COUNTER_UNIT",
    "OUTCOME_EVENT",
    "TOOL_CALL_SPAN",
    "UNRECORDED_SPANS_COUNTER",
    "attr",
]

TOOL_CALL_SPAN: Final = "tool.call"
"""The span that wraps one adapter call, with its attempts as events."""

OUTCOME_EVENT: Final = "tool.outcome"
"""The span event emitted once per AccessFailure attempt and once per Partial."""

LIFECYCLE_EVENT: Final = "tool.lifecycle"
"""The span event emitted once per state of an asynchronous operation that a call saw (the
contract's rule ``TELEMETRY-LIFECYCLE``)."""

OUTCOMES_COUNTER: Final = "tool.outcomes"
"""The monotonic counter that counts every call by final class."""

OUTCOMES_COUNTER_UNIT: Final = "{call}"
"""The unit of :data:`OUTCOMES_COUNTER`."""

EXPORT_INTERVAL_GAUGE: Final = "candor.adapter.export_interval"
"""The gauge an adapter instance sends beside :data:`OUTCOMES_COUNTER` in every metric export,
without attributes: the seconds until its next export, and 0 in its final export at shutdown
(the contract's section 10.6). Readers tell an instance that shut down from one that went silent
by it."""

EXPORT_INTERVAL_GAUGE_UNIT: Final = "s"
"""The unit of :data:`EXPORT_INTERVAL_GAUGE`."""

UNRECORDED_SPANS_COUNTER: Final = "candor.adapter.unrecorded_spans"
"""Counts failure spans that the host's sampler dropped (the span was not recording)."""

ADAPTER_NAME: Final = "candor-adapter-python"
"""This implementation's name: the instrumentation scope it reports under, and the first half of
``provenance.adapter`` (``candor-adapter-python/0.1.0``)."""


class attr:  # noqa: N801 - a namespace of constants, spelled like the Rust module
    """Attribute keys of the spans, span events and counter.

    The ``tool.outcome`` and ``tool.lifecycle`` events, the ``tool.call`` span and the
    ``tool.outcomes`` counter.
    """

    OUTCOME_CLASS: Final = "tool.outcome.class"
    """``access_failure`` or ``partial`` on events; any class on the counter."""
    TOOL_NAME: Final = "tool.name"
    """The logical tool name."""
    TOOL_TARGET: Final = "tool.target"
    """The endpoint or resource reached for, with credentials redacted."""
    FAILURE_KIND: Final = "tool.failure.kind"
    """A member of :class:`candor.FailureKind`."""
    RETRY_ACTION: Final = "tool.retry.action"
    """A member of :class:`candor.RetryAction`."""
    RETRY_ATTEMPT: Final = "tool.retry.attempt"
    """The 1-based attempt number."""
    RETRY_MAX_ATTEMPTS: Final = "tool.retry.max_attempts"
    """The most attempts the policy allows."""
    RETRY_BACKOFF_MS: Final = "tool.retry.backoff_ms"
    """The wait before the next attempt, when the action is ``retry``."""
    HTTP_STATUS_CODE: Final = "http.response.status_code"
    """The HTTP status, when there was one."""
    ERROR_TYPE: Final = "error.type"
    """A short, stable error identifier, when there was an error."""
    PARTIAL_RETURNED: Final = "tool.partial.returned"
    """How many items a Partial returned, when known."""
    PARTIAL_EXPECTED: Final = "tool.partial.expected"
    """How many items a Partial should have returned, when known."""
    COVERAGE: Final = "tool.coverage"
    """What the answer covered, when known."""
    DROPPED: Final = "tool.dropped"
    """What the answer dropped, when known."""
    AUTHORITY: Final = "tool.authority"
    """The principal or scope the call ran under (never a secret), when known."""
    LIFECYCLE_STATE: Final = "tool.lifecycle.state"
    """On ``tool.outcomes``, for a call whose answer accepted an operation that has not ended:
    ``accepted``, counted without a class (the contract's rule ``TELEMETRY-COUNTER``). On a
    ``tool.lifecycle`` event, the operation's state; on the ``tool.call`` span, its last state."""
    OPERATION_ID: Final = "tool.operation.id"
    """On a ``tool.lifecycle`` event, the asynchronous operation's id."""
    LIFECYCLE_REASON: Final = "tool.lifecycle.reason"
    """On a ``tool.lifecycle`` event of a failed operation, why it failed."""
    RESOURCE_ID: Final = "tool.resource.id"
    """On a ``tool.lifecycle`` event of a completed or partial operation, the id of the resource
    its end named (the lifecycle's ``resource.id``)."""
    RESOURCE_VERSION: Final = "tool.resource.version"
    """With :attr:`RESOURCE_ID`, the resource's version when the source said
    (``resource.version``)."""
    PROVENANCE_SOURCE_SYSTEM: Final = "tool.provenance.source_system"
    """On a ``tool.lifecycle`` event, the envelope's ``provenance.source_system``."""
    PROVENANCE_ACTOR: Final = "tool.provenance.actor"
    """On a ``tool.lifecycle`` event, the envelope's ``provenance.actor``, when it has one."""
    PROVENANCE_ADAPTER: Final = "tool.provenance.adapter"
    """On a ``tool.lifecycle`` event, the envelope's ``provenance.adapter``."""
    EVIDENCE_KIND: Final = "tool.evidence.kind"
    """On the event that ends a call, the kind of its envelope's evidence: a member of
    :class:`candor.EvidenceKind`."""
    EVIDENCE_VALUE: Final = "tool.evidence.value"
    """On the event that ends a call, its envelope's evidence itself (a request id, a receipt,
    ...)."""
