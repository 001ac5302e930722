"""The result envelope: what a tool call returns once the adapter has classified it.

The types make the rules of the contract hard to break:

- an outcome is exactly one of :class:`Success`, :class:`Empty`, :class:`Partial` and
  :class:`AccessFailure`; an AccessFailure carries no payload, a Partial says what it covered
  and what it dropped;
- a ``completed`` :class:`Lifecycle` cannot be built without evidence of completion;
- the legal next actions are derived from the outcome and the lifecycle, never set by hand,
  and an envelope read from JSON whose next actions disagree is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Final, TypeAlias

from candor.jsonvalue import JsonLike, JsonValue, dumps, sorted_keys
from candor.timestamps import format_rfc3339
from candor.vocab import (
    AccessFailureKind,
    EvidenceKind,
    FailureKind,
    LifecycleState,
    NextAction,
    OutcomeClass,
    PartialKind,
    RetryAction,
)

__all__ = [
    "ENVELOPE_SCHEMA_VERSION",
    "AccessFailure",
    "Attempt",
    "Authority",
    "Empty",
    "Envelope",
    "Evidence",
    "Extent",
    "Failure",
    "Lifecycle",
    "Operation",
    "Outcome",
    "Partial",
    "Provenance",
    "Resource",
    "Success",
    "Truncation",
    "legal_next_actions",
]

ENVELOPE_SCHEMA_VERSION: Final = 1
"""The version of the envelope's JSON shape (``spec/v1/envelope.v1.schema.json``)."""

JsonObject: TypeAlias = dict[str, JsonValue]


def _put(out: JsonObject, key: str, value: JsonValue) -> None:
    """Adds an optional field: an absent one is left out, never written as ``null``."""
    if value is not None:
        out[key] = value


@dataclass(frozen=True, slots=True)
class Extent:
    """What a Success or an Empty examined."""

    items: int | None = None
    """How many items the answer holds, when the answer is a collection."""
    declared_total: int | None = None
    """The total the source declared, when it declared one."""
    scope: str | None = None
    """The scope examined, in the tool author's words (an index, a date range, a shard set)."""

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {}
        _put(out, "items", self.items)
        _put(out, "declared_total", self.declared_total)
        _put(out, "scope", self.scope)
        return out


@dataclass(frozen=True, slots=True)
class Truncation:
    """What a Partial covered and what it dropped."""

    kind: PartialKind
    """How the answer was cut off."""
    covered: str
    """What the answer covered, e.g. ``items 1-3 of 10``."""
    dropped: str
    """What was dropped, e.g. ``7 item(s)``."""
    returned: int | None = None
    """How many items arrived, when known."""
    expected: int | None = None
    """How many items the source had, when known."""

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {
            "kind": self.kind.value,
            "covered": self.covered,
            "dropped": self.dropped,
        }
        _put(out, "returned", self.returned)
        _put(out, "expected", self.expected)
        return out


@dataclass(frozen=True, slots=True)
class Failure:
    """Why an AccessFailure made no usable contact."""

    kind: AccessFailureKind
    """The kind of failure."""
    retryable: bool
    """Whether asking again could help; a final AccessFailure that is retryable means the
    retry budget ran out."""
    message: str
    """What happened, credentials redacted."""
    status: int | None = None
    """The HTTP status, when there was one."""
    error_type: str | None = None
    """A short, stable error identifier, when there was an error."""
    retry_after_ms: int | None = None
    """How long the source asked callers to wait (``Retry-After``), in milliseconds."""

    @property
    def final_action(self) -> RetryAction:
        """The retry action that ends a call with this failure: ``exhausted`` or ``permanent``."""
        return RetryAction.EXHAUSTED if self.retryable else RetryAction.PERMANENT

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {
            "kind": self.kind.value,
            "retryable": self.retryable,
            "message": self.message,
        }
        _put(out, "status", self.status)
        _put(out, "error_type", self.error_type)
        _put(out, "retry_after_ms", self.retry_after_ms)
        return out


@dataclass(frozen=True, slots=True)
class Success:
    """Contact made, complete answer."""

    CLASS: ClassVar[OutcomeClass] = OutcomeClass.SUCCESS
    payload: JsonLike
    """The answer: any JSON value."""
    extent: Extent = field(default_factory=Extent)
    """What was examined."""

    @property
    def failure_kind(self) -> FailureKind | None:
        """None: a Success did not fail."""
        return None

    def to_dict(self) -> JsonObject:
        """The JSON object: the class, then the payload (keys in order) and the extent."""
        return {
            "class": self.CLASS.value,
            "payload": sorted_keys(self.payload),
            "extent": self.extent.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Empty:
    """Contact made, and the source verified that nothing matches."""

    CLASS: ClassVar[OutcomeClass] = OutcomeClass.EMPTY
    extent: Extent = field(default_factory=Extent)
    """What was examined and found empty."""

    @property
    def failure_kind(self) -> FailureKind | None:
        """None: an Empty did not fail."""
        return None

    def to_dict(self) -> JsonObject:
        """The JSON object: the class and the extent."""
        return {"class": self.CLASS.value, "extent": self.extent.to_dict()}


@dataclass(frozen=True, slots=True)
class Partial:
    """Contact made, the answer was cut off."""

    CLASS: ClassVar[OutcomeClass] = OutcomeClass.PARTIAL
    payload: JsonLike
    """What arrived, any JSON value; never the whole answer."""
    truncation: Truncation
    """What the answer covered and what it dropped."""

    @property
    def failure_kind(self) -> FailureKind | None:
        """How the answer was cut off."""
        return self.truncation.kind.failure_kind

    def to_dict(self) -> JsonObject:
        """The JSON object: the class, then the payload (keys in order) and the truncation."""
        return {
            "class": self.CLASS.value,
            "payload": sorted_keys(self.payload),
            "truncation": self.truncation.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class AccessFailure:
    """No usable contact. Carries no payload: there is nothing to conclude about the source."""

    CLASS: ClassVar[OutcomeClass] = OutcomeClass.ACCESS_FAILURE
    failure: Failure
    """Why no usable answer arrived."""

    @property
    def failure_kind(self) -> FailureKind | None:
        """Why no usable answer arrived."""
        return self.failure.kind.failure_kind

    def to_dict(self) -> JsonObject:
        """The JSON object: the class and the failure."""
        return {"class": self.CLASS.value, "failure": self.failure.to_dict()}


Outcome: TypeAlias = Success | Empty | Partial | AccessFailure
"""What a call produced: exactly one of four classes, each with what that class needs."""


@dataclass(frozen=True, slots=True)
class Authority:
    """The principal or scope a call ran under. Never a secret."""

    principal: str | None = None
    """Who the call ran as, e.g. a service account name."""
    scope: str | None = None
    """What it was allowed to see, e.g. an OAuth scope or a tenant."""

    def describe(self) -> str | None:
        """One line for logs and attributes: ``principal scope=…``, whichever are known."""
        if self.principal is not None and self.scope is not None:
            return f"{self.principal} scope={self.scope}"
        if self.principal is not None:
            return self.principal
        if self.scope is not None:
            return f"scope={self.scope}"
        return None

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {}
        _put(out, "principal", self.principal)
        _put(out, "scope", self.scope)
        return out


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an answer came from: the source, the call's times, the adapter and the actor."""

    source_system: str
    """The system that answered (or failed to), e.g. the target's host."""
    adapter: str
    """The adapter and its version, e.g. ``candor-adapter/0.1.0``."""
    started_at: datetime
    """When the call started (UTC)."""
    finished_at: datetime
    """When the call finished (UTC)."""
    actor: str | None = None
    """Who made the call, e.g. the service or agent that hosts the adapter."""

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {"source_system": self.source_system}
        _put(out, "actor", self.actor)
        out["adapter"] = self.adapter
        out["started_at"] = format_rfc3339(self.started_at)
        out["finished_at"] = format_rfc3339(self.finished_at)
        return out


@dataclass(frozen=True, slots=True)
class Evidence:
    """A handle that verifies an outcome independently of the call that produced it."""

    kind: EvidenceKind
    """What kind of handle this is."""
    value: str
    """The handle itself: an id, a receipt or a query."""

    def to_dict(self) -> JsonObject:
        """The JSON object."""
        return {"kind": self.kind.value, "value": self.value}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a call, as the retry policy saw it."""

    number: int
    """1-based."""
    started_at: datetime
    """When the attempt started (UTC)."""
    duration_ms: int
    """How long it took, in milliseconds."""
    outcome_class: OutcomeClass
    """How the attempt was classified (``class`` on the wire)."""
    failure_kind: FailureKind | None = None
    """Why it was not a complete answer, for a Partial or an AccessFailure."""
    status: int | None = None
    """The HTTP status, when there was one."""
    retry_action: RetryAction | None = None
    """What the policy did next, for a Partial or an AccessFailure."""
    backoff_ms: int | None = None
    """The wait before the next attempt, when the action is ``retry``."""
    error_type: str | None = None
    """A short, stable error identifier, when there was an error."""

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {
            "number": self.number,
            "started_at": format_rfc3339(self.started_at),
            "duration_ms": self.duration_ms,
            "class": self.outcome_class.value,
        }
        _put(out, "failure_kind", None if self.failure_kind is None else self.failure_kind.value)
        _put(out, "status", self.status)
        _put(out, "retry_action", None if self.retry_action is None else self.retry_action.value)
        _put(out, "backoff_ms", self.backoff_ms)
        _put(out, "error_type", self.error_type)
        return out


@dataclass(frozen=True, slots=True)
class Operation:
    """The asynchronous operation a call started or reported on."""

    id: str
    """The operation's stable id (a job id, not a label)."""
    status_url: str | None = None
    """Where its status can be read, when the source said."""
    generated: bool = False
    """True when the source named no id and the adapter made ``id`` up: unique to the call, but
    nothing the source knows the operation by."""

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {"id": self.id}
        _put(out, "status_url", self.status_url)
        if self.generated:
            out["generated"] = True
        return out


@dataclass(frozen=True, slots=True)
class Resource:
    """The resource an asynchronous operation produced or changed, as its end named it."""

    id: str
    """The resource's stable id or URL."""
    version: str | None = None
    """Its version, when the source said (an ``ETag``, a version number), so that a reader can
    tell the state the operation left from a later change."""

    def to_dict(self) -> JsonObject:
        """The JSON object, absent fields left out."""
        out: JsonObject = {"id": self.id}
        _put(out, "version", self.version)
        return out


# What each state carries besides the operation: each field's name and whether it is required.
_STATE_FIELDS: Final[dict[LifecycleState, dict[str, bool]]] = {
    LifecycleState.ACCEPTED: {},
    LifecycleState.QUEUED: {},
    LifecycleState.RUNNING: {"percent_complete": False},
    LifecycleState.PARTIAL: {"covered": True, "resource": False},
    LifecycleState.COMPLETED: {"verified_by": True, "resource": False},
    LifecycleState.CANCELLED: {},
    LifecycleState.FAILED: {"reason": True},
}
_LIFECYCLE_EXTRAS: Final = ("percent_complete", "covered", "verified_by", "reason", "resource")


def _check_state_fields(
    record: object,
    state: LifecycleState,
    own: Mapping[str, bool],
    fields: tuple[str, ...],
    noun: str,
) -> None:
    """Refuses a field of ``fields`` that ``state`` does not carry, and a required one missing.

    ``own`` maps each field the state carries to whether it is required; ``noun`` names the
    record in the error (``a failed lifecycle carries no covered``).
    """
    for name in fields:
        value = getattr(record, name)
        if name not in own:
            if value is not None:
                raise ValueError(f"a {state} {noun} carries no {name}")
        elif own[name] and value is None:
            raise ValueError(f"a {state} {noun} needs {name}")


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """Where an asynchronous operation stands.

    Each state carries the operation and what that state needs: ``running`` an optional
    ``percent_complete``, ``partial`` what was ``covered``, ``failed`` a ``reason``, and
    ``completed`` the :class:`Evidence` that ``verified_by`` a read independent of the
    acceptance. ``partial`` and ``completed`` may also name the :class:`Resource` the operation
    produced or changed. A field another state carries is refused, and so is a ``completed``
    without evidence.
    """

    state: LifecycleState
    """The state."""
    operation: Operation
    """The operation this state is about."""
    percent_complete: int | None = None
    """Progress in percent, when the source reports it (``running`` only)."""
    covered: str | None = None
    """What was done (``partial`` only)."""
    verified_by: Evidence | None = None
    """The read that verified completion (``completed`` only)."""
    reason: str | None = None
    """Why it failed (``failed`` only)."""
    resource: Resource | None = None
    """The resource the operation produced or changed, when its end named one (``partial`` and
    ``completed`` only)."""

    def __post_init__(self) -> None:
        _check_state_fields(
            self, self.state, _STATE_FIELDS[self.state], _LIFECYCLE_EXTRAS, "lifecycle"
        )

    @classmethod
    def accepted(cls, operation: Operation) -> Lifecycle:
        """Accepted for processing; nothing has been done yet."""
        return cls(LifecycleState.ACCEPTED, operation)

    @classmethod
    def completed(
        cls, operation: Operation, verified_by: Evidence, resource: Resource | None = None
    ) -> Lifecycle:
        """Finished, verified by a read independent of the acceptance.

        ``resource`` is what the operation produced or changed, when its end named it.
        """
        return cls(LifecycleState.COMPLETED, operation, verified_by=verified_by, resource=resource)

    def to_dict(self) -> JsonObject:
        """The JSON object: the state, the operation and the state's own fields."""
        out: JsonObject = {"state": self.state.value, "operation": self.operation.to_dict()}
        _put(out, "percent_complete", self.percent_complete)
        _put(out, "covered", self.covered)
        if self.verified_by is not None:
            out["verified_by"] = self.verified_by.to_dict()
        if self.resource is not None:
            out["resource"] = self.resource.to_dict()
        _put(out, "reason", self.reason)
        return out


_FINISH = (NextAction.FINISH,)


def legal_next_actions(outcome: Outcome, lifecycle: Lifecycle | None) -> tuple[NextAction, ...]:
    """The legal next actions for an outcome (and the lifecycle of an asynchronous operation)."""
    match outcome:
        case Success():
            state = None if lifecycle is None else lifecycle.state
            if state is None or state is LifecycleState.COMPLETED:
                return _FINISH
            if state in (LifecycleState.ACCEPTED, LifecycleState.QUEUED, LifecycleState.RUNNING):
                return (NextAction.POLL, NextAction.COMPENSATE, NextAction.ESCALATE)
            if state is LifecycleState.PARTIAL:
                return (NextAction.FINISH, NextAction.COMPENSATE, NextAction.ESCALATE)
            return (NextAction.COMPENSATE, NextAction.ESCALATE)
        case Empty():
            return _FINISH
        case Partial():
            return (NextAction.FINISH, NextAction.ESCALATE)
        case AccessFailure(failure=failure):
            if failure.retryable:
                return (NextAction.RETRY, NextAction.ESCALATE)
            return (NextAction.ESCALATE,)


@dataclass(frozen=True, slots=True)
class Envelope:
    """The typed result of one tool call.

    Branch on :attr:`outcome` (``match envelope.outcome: case Success(): …``) or on
    :attr:`outcome_class`; there are exactly four classes. :attr:`next_actions` is derived, and
    :meth:`to_json` writes the JSON of ``spec/v1/envelope.v1.schema.json``.
    """

    SCHEMA_VERSION: ClassVar[int] = ENVELOPE_SCHEMA_VERSION
    tool: str
    """The logical tool name."""
    target: str
    """The endpoint or resource reached for, credentials redacted."""
    outcome: Outcome
    """What happened."""
    provenance: Provenance
    """Where the answer came from."""
    attempts: tuple[Attempt, ...] = ()
    """Every attempt, in order."""
    authority: Authority | None = None
    """The authority the call ran under."""
    evidence: Evidence | None = None
    """A handle that verifies the outcome independently."""
    lifecycle: Lifecycle | None = None
    """The state of the asynchronous operation, for asynchronous work."""

    @property
    def outcome_class(self) -> OutcomeClass:
        """The class: the one field every consumer must branch on."""
        return self.outcome.CLASS

    @property
    def next_actions(self) -> tuple[NextAction, ...]:
        """What a consumer may legally do next; derived from the outcome and the lifecycle."""
        return legal_next_actions(self.outcome, self.lifecycle)

    def summary(self) -> str:
        """A one-line human summary whose words follow from the class.

        An AccessFailure is never worded as an absence, a Partial never as a whole, and an
        acceptance never as completion.
        """
        tool, target = self.tool, self.target
        match self.outcome:
            case Success(extent=extent):
                lifecycle = self.lifecycle
                if lifecycle is not None and not lifecycle.state.is_terminal:
                    return (
                        f"{tool}: {target} accepted the request; operation "
                        f"{lifecycle.operation.id} is {lifecycle.state} and has not completed "
                        "yet. Poll its status before relying on the result."
                    )
                if extent.items is not None:
                    return f"{tool}: complete answer from {target} with {extent.items} item(s)."
                return f"{tool}: complete answer from {target}."
            case Empty():
                return (
                    f"{tool}: {target} was reached and confirmed that nothing matches. This is "
                    "a verified absence."
                )
            case Partial(truncation=truncation):
                return (
                    f"{tool}: PARTIAL answer from {target} ({truncation.kind}): covered "
                    f"{truncation.covered}; dropped {truncation.dropped}. Do not treat it as the "
                    "whole answer."
                )
            case AccessFailure(failure=failure):
                status = "" if failure.status is None else f", HTTP {failure.status}"
                return (
                    f"{tool}: FAILED to get an answer from {target} ({failure.kind}{status}, "
                    f"{failure.final_action} after {len(self.attempts)} attempt(s)): "
                    f"{failure.message}. The source's contents are unknown; nothing can be "
                    "concluded from this call."
                )

    def to_dict(self) -> JsonObject:
        """The envelope as JSON values, exactly as the Rust envelope writes it.

        Absent optional fields are left out, times are RFC 3339 UTC with microseconds, and
        payload objects list their keys in order.
        """
        out: JsonObject = {
            "schema_version": self.SCHEMA_VERSION,
            "tool": self.tool,
            "target": self.target,
            "outcome": self.outcome.to_dict(),
            "next_actions": [action.value for action in self.next_actions],
        }
        if self.authority is not None:
            out["authority"] = self.authority.to_dict()
        out["provenance"] = self.provenance.to_dict()
        if self.evidence is not None:
            out["evidence"] = self.evidence.to_dict()
        out["attempts"] = [attempt.to_dict() for attempt in self.attempts]
        if self.lifecycle is not None:
            out["lifecycle"] = self.lifecycle.to_dict()
        return out

    def to_json(self) -> str:
        """The envelope as compact JSON text, byte for byte as the Rust envelope writes it."""
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> Envelope:
        """Reads an envelope from JSON values (as :func:`json.loads` returns them).

        Raises :class:`candor.InvalidEnvelope` whose ``rule`` says what was broken:
        ``schema`` (not the envelope's shape: a missing or unknown field, a value outside a
        closed vocabulary, an AccessFailure with a payload, a ``completed`` lifecycle without
        ``verified_by``), ``version`` (another ``schema_version``) or ``next_actions`` (not the
        ones the outcome allows).
        """
        from candor.wire import read_envelope

        return read_envelope(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        """Reads an envelope from JSON text; see :meth:`from_dict`.

        A field given twice, or text that is not JSON, is a ``schema`` error.
        """
        from candor.wire import read_envelope_json

        return read_envelope_json(text)
