"""Following an asynchronous operation: reading its status until it ends (contract, 10.8).

A tool that answers "accepted" (an HTTP 202, or a long-running operation resource) has not done
the work yet. An adapter with a status reader (``Adapter(..., status_reader=StatusUrl())``)
follows such an operation with :meth:`~candor.Adapter.call_and_follow` or, later, with
:meth:`~candor.Adapter.resume`: it reads the status under the retry policy's backoff, honours
the source's ``Retry-After``, stops at the operation deadline, and ends the call in a terminal
state:

=======================================  ====================================  =================
the operation                            the envelope's outcome                lifecycle
=======================================  ====================================  =================
completed, with evidence                 Success with the result               ``completed``
finished with part done                  Partial ``operation_partial``         ``partial``
failed                                   AccessFailure ``tool_error``          ``failed``
cancelled                                AccessFailure ``cancelled``           ``cancelled``
not ended at the operation deadline      AccessFailure ``deadline``            the last state
status unreadable                        that read's AccessFailure             the last state
=======================================  ====================================  =================

An operation is never started again: a failed or cancelled operation is reported, not
resubmitted, because starting work twice is not a retry.

:class:`StatusUrl` and :class:`LongRunning` read the two common HTTP protocols; :class:`FnStatus`
takes a tool author's own status read, which is also where an independent check of completion
goes (read the resource back and compare its version, say).

**StatusUrl**: a 202 names a status resource (``Operation-Location``, else ``Location``; Azure's
asynchronous request-reply). A read of it says:

- 202: running (``Retry-After`` honoured; ``percentComplete`` read when the body has it);
- 303 with ``Location``: completed; the location is the result, the ``query`` evidence and the
  resource;
- 2xx with a ``status`` field: by its value, read without regard to case, ``_``, ``-`` or
  spaces: ``notstarted``, ``queued``, ``pending`` and ``accepted`` are queued; ``running``,
  ``inprogress`` and ``started`` running; ``succeeded``, ``completed`` and ``done`` completed,
  with the status URL as ``query`` evidence; ``partiallysucceeded`` and ``partial`` partial;
  ``failed`` and ``error`` failed, with ``error.message`` (else ``error.code``) as the reason;
  ``canceled`` and ``cancelled`` cancelled. Any other value is a protocol failure: a status no
  one can interpret is not a completion. A completed or partial status names its resource by
  ``resourceLocation``, when the body has it;
- 2xx without a ``status`` field: completed; the status URL answered with the resource itself,
  which is the resource, its ``ETag`` the version;
- any other answer, or none: unreadable, by the HTTP rules (5xx and 429 transient, 404
  permanent).

**LongRunning**: a long-running operation resource (Google AIP-151), returned by the start
request with a ``name`` and ``done``. A read of it says: ``done`` absent or false, running
(``metadata.progressPercent`` read when present); ``done`` with ``error``, cancelled when its
``code`` is 1 (``CANCELLED``), else failed with its message; ``done`` with ``response``,
completed with the result ``response`` and the operation's name as ``job_id`` evidence, the
resource being the response's ``name`` with its ``etag`` as the version (AIP-122, AIP-154). ``done``
with neither is refused as a protocol failure: a completion with nothing to show for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from candor.classify import Classification
from candor.classify.http import (
    BodyComplete,
    HttpClassifier,
    HttpExchange,
    HttpResponse,
    NotFound,
    TransportError,
)
from candor.classify.http._parse import _body_snippet, _retry_after_ms
from candor.envelope import (
    AccessFailure,
    Evidence,
    Failure,
    Lifecycle,
    Operation,
    Resource,
    Success,
    _check_state_fields,
)
from candor.jsonvalue import (
    MISSING,
    BodyParseError,
    JsonLike,
    JsonValue,
    Missing,
    dumps,
    loads_body,
    pointer,
)
from candor.redact import redact_text, redact_url
from candor.vocab import AccessFailureKind, EvidenceKind, LifecycleState

__all__ = [
    "FnStatus",
    "LongRunning",
    "OperationStatus",
    "StatusRead",
    "StatusReader",
    "StatusUrl",
]

Q = TypeVar("Q")
Q_contra = TypeVar("Q_contra", contravariant=True)

# What each state a read can report carries besides the result: each field's name and whether
# it is required. A read never reports ``accepted``: that is the start's answer.
_STATUS_FIELDS: Final[dict[LifecycleState, dict[str, bool]]] = {
    LifecycleState.QUEUED: {},
    LifecycleState.RUNNING: {"percent_complete": False},
    LifecycleState.COMPLETED: {"verified_by": True, "resource": False},
    LifecycleState.PARTIAL: {"covered": True, "dropped": True, "resource": False},
    LifecycleState.FAILED: {"reason": True},
    LifecycleState.CANCELLED: {},
}
_STATUS_EXTRAS: Final = (
    "percent_complete",
    "verified_by",
    "covered",
    "dropped",
    "reason",
    "resource",
)
_WITH_RESULT: Final = frozenset({LifecycleState.COMPLETED, LifecycleState.PARTIAL})


@dataclass(frozen=True, slots=True)
class OperationStatus:
    """What one read of an operation's status said about it.

    Build one with the class methods. Each state carries what it needs: ``running`` an optional
    ``percent_complete``; ``completed`` the ``result`` and the :class:`~candor.Evidence` that
    ``verified_by`` a read independent of the acceptance; ``partial`` the ``result``, what was
    ``covered`` and what was ``dropped``; ``failed`` a ``reason``. ``completed`` and ``partial``
    may name the :class:`~candor.Resource` the operation produced or changed. A field another
    state carries is refused, and so is a ``completed`` without evidence.
    """

    state: LifecycleState
    """The state; never ``accepted``, which is the start's answer and not a status read's."""
    result: JsonLike = None
    """What the operation returned (``completed`` and ``partial`` only)."""
    percent_complete: int | None = None
    """Progress in percent, when the source reports it (``running`` only)."""
    verified_by: Evidence | None = None
    """What verified the completion (``completed`` only)."""
    covered: str | None = None
    """What was done (``partial`` only)."""
    dropped: str | None = None
    """What was not done (``partial`` only)."""
    reason: str | None = None
    """Why it failed, as the source said (``failed`` only)."""
    resource: Resource | None = None
    """The resource the operation produced or changed, when the status names it (``completed``
    and ``partial`` only)."""

    def __post_init__(self) -> None:
        own = _STATUS_FIELDS.get(self.state)
        if own is None:
            raise ValueError(f"a status read never says {self.state}: that is the start's answer")
        if self.result is not None and self.state not in _WITH_RESULT:
            raise ValueError(f"a {self.state} status carries no result")
        _check_state_fields(self, self.state, own, _STATUS_EXTRAS, "status")

    @classmethod
    def queued(cls) -> OperationStatus:
        """Accepted and waiting to run."""
        return cls(LifecycleState.QUEUED)

    @classmethod
    def running(cls, percent_complete: int | None = None) -> OperationStatus:
        """Running, with its progress in percent when the source reports it."""
        return cls(LifecycleState.RUNNING, percent_complete=percent_complete)

    @classmethod
    def completed(
        cls, result: JsonLike, verified_by: Evidence, resource: Resource | None = None
    ) -> OperationStatus:
        """Finished, with evidence of completion from a read independent of the acceptance."""
        return cls(LifecycleState.COMPLETED, result, verified_by=verified_by, resource=resource)

    @classmethod
    def partial(
        cls, result: JsonLike, covered: str, dropped: str, resource: Resource | None = None
    ) -> OperationStatus:
        """Finished with part of the work done: ``covered`` was done, ``dropped`` was not."""
        return cls(
            LifecycleState.PARTIAL, result, covered=covered, dropped=dropped, resource=resource
        )

    @classmethod
    def failed(cls, reason: str) -> OperationStatus:
        """Stopped by an error."""
        return cls(LifecycleState.FAILED, reason=reason)

    @classmethod
    def cancelled(cls) -> OperationStatus:
        """Stopped on request before it finished."""
        return cls(LifecycleState.CANCELLED)

    @property
    def is_terminal(self) -> bool:
        """Whether the operation has ended."""
        return self.state.is_terminal

    def lifecycle(self, operation: Operation) -> Lifecycle:
        """The lifecycle of ``operation`` that this status stands for."""
        return Lifecycle(
            self.state,
            operation,
            percent_complete=self.percent_complete,
            covered=self.covered,
            verified_by=self.verified_by,
            reason=self.reason,
            resource=self.resource,
        )


@dataclass(frozen=True, slots=True)
class StatusRead:
    """The result of one status read: the status, or the AccessFailure of a read that failed."""

    status: OperationStatus | Failure
    """What the source said, or why it could not be read."""
    retry_after_ms: int | None = None
    """How long the source asked to wait before the next read (``Retry-After``), in
    milliseconds."""


class StatusReader(ABC, Generic[Q_contra]):
    """Reads the raw result ``Q`` of one status request into a :class:`StatusRead`.

    Implementations must be total (every raw result gets a status or a failure) and
    deterministic. :meth:`read` is the reader's own; :meth:`accepted`, :meth:`refuse` and
    :meth:`read_exception` have defaults that a protocol may override.
    """

    __slots__ = ()

    def accepted(self, start: Classification) -> Operation | None:
        """The operation a start answer accepted, when it names one to follow.

        The default is the start classification's lifecycle when it has not ended. A protocol
        whose acceptance is an ordinary 200 (a long-running operation resource) overrides it.
        """
        lifecycle = start.lifecycle
        if lifecycle is None or lifecycle.state.is_terminal:
            return None
        return lifecycle.operation

    def refuse(self, operation: Operation) -> Failure | None:  # noqa: ARG002 - a default
        """Why this reader cannot follow ``operation``, when it cannot; by default ``None``.

        The call then ends with this AccessFailure and no read is made.
        """
        return None

    def read_exception(
        self,
        operation: Operation,  # noqa: ARG002 - a default
        error: Exception,  # noqa: ARG002 - a default
    ) -> StatusRead | None:
        """What a status request that raised ``error`` read, or ``None`` to let it propagate.

        By default every exception propagates: it is no outcome of the tool.
        """
        return None

    @abstractmethod
    def read(self, operation: Operation, raw: Q_contra, /) -> StatusRead:
        """Reads one status request's raw result."""


class FnStatus(StatusReader[Q]):
    """A status reader made of the tool author's own mapping.

    The mapping takes the operation and one status request's raw result, and returns an
    :class:`OperationStatus`, a :class:`~candor.Failure` (the status could not be read; its
    ``retry_after_ms`` is honoured) or a whole :class:`StatusRead`. A ``completed`` status
    needs its evidence: the author's own check, for example the resource read back with the
    version the operation was to leave.

    >>> from candor import Evidence, EvidenceKind, Operation
    >>> def job(operation: Operation, raw: tuple[str, int | None]) -> OperationStatus:
    ...     state, version = raw
    ...     if state == "done" and version is not None:
    ...         check = f"GET /exports/{operation.id}?version={version}"
    ...         return OperationStatus.completed(version, Evidence(EvidenceKind.QUERY, check))
    ...     return OperationStatus.running()
    >>> FnStatus(job).read(Operation("e-1"), ("done", 7)).status.is_terminal
    True
    """

    __slots__ = ("_mapping",)

    def __init__(
        self, mapping: Callable[[Operation, Q], OperationStatus | Failure | StatusRead]
    ) -> None:
        self._mapping = mapping

    def read(self, operation: Operation, raw: Q, /) -> StatusRead:
        """Applies the mapping."""
        result = self._mapping(operation, raw)
        if isinstance(result, Failure):
            return StatusRead(result, result.retry_after_ms)
        return result if isinstance(result, StatusRead) else StatusRead(result)


class _HttpStatusReader(StatusReader[HttpExchange]):
    """What the HTTP readers share: a raised transport error is read as a returned one."""

    __slots__ = ()

    def read_exception(self, operation: Operation, error: Exception) -> StatusRead | None:
        """Reads a raised :class:`~candor.TransportError` as a returned one; nothing else."""
        return self.read(operation, error) if isinstance(error, TransportError) else None


# The state each ``status`` value of a status URL stands for, normalised by _normalised.
_STATUS_WORDS: Final = {
    **dict.fromkeys(("notstarted", "queued", "pending", "accepted"), LifecycleState.QUEUED),
    **dict.fromkeys(("running", "inprogress", "started"), LifecycleState.RUNNING),
    **dict.fromkeys(("succeeded", "completed", "done"), LifecycleState.COMPLETED),
    **dict.fromkeys(("partiallysucceeded", "partial"), LifecycleState.PARTIAL),
    **dict.fromkeys(("failed", "error"), LifecycleState.FAILED),
    **dict.fromkeys(("canceled", "cancelled"), LifecycleState.CANCELLED),
}
_PART_DONE: Final = "part of the operation's work"
_REST: Final = "the rest of the operation's work"


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusUrl(_HttpStatusReader):
    """Reads the status resource of Azure's asynchronous request-reply; see the module.

    Where a status body says what, as JSON pointers: ``status_at`` its state (default
    ``/status``), ``percent_at`` the progress in percent (``/percentComplete``), ``covered_at``
    what a partial operation did (``/covered``) and ``resource_at`` the resource a completed or
    partial operation names (``/resourceLocation``).
    """

    status_at: str = "/status"
    percent_at: str = "/percentComplete"
    covered_at: str = "/covered"
    resource_at: str = "/resourceLocation"

    def refuse(self, operation: Operation) -> Failure | None:
        """An operation accepted without a status URL cannot be followed by one."""
        if operation.status_url is not None:
            return None
        return Failure(
            AccessFailureKind.PROTOCOL,
            retryable=False,
            message=(
                f"operation {redact_text(operation.id)} was accepted without a status URL (no "
                "Operation-Location or Location header): it cannot be followed"
            ),
            error_type="no_status_url",
        )

    def read(self, operation: Operation, raw: HttpExchange, /) -> StatusRead:
        """Reads one answer of the status URL."""
        response = _answered(raw)
        if isinstance(response, StatusRead):
            return response
        wait = _retry_after_ms(response)
        if response.status == 202:
            progress = self._percent(_lenient_json(response.body))
            return StatusRead(OperationStatus.running(progress), wait)
        if response.status == 303:
            return StatusRead(_see_other(response), wait)
        if not 200 <= response.status <= 299:
            return _unreadable(response)
        body = _json_body(response)
        if isinstance(body, Failure):
            return StatusRead(body, wait)
        return StatusRead(self._read_body(operation, body, response.header("etag")), wait)

    def _read_body(
        self, operation: Operation, body: JsonValue, etag: str | None
    ) -> OperationStatus | Failure:
        """Reads a 2xx body; ``etag`` is the version of a body that is the resource itself."""
        state = pointer(body, self.status_at)
        if state is MISSING:
            # The status URL answered with the resource itself.
            resource = Resource(_status_url_of(operation), etag)
            return _completed_by_query(operation, body, resource)
        if not isinstance(state, str):
            return _protocol_failure(
                f"the status field {self.status_at} is not a string: {_compact(state)}"
            )
        return self._by_state(operation, body, state)

    def _by_state(
        self, operation: Operation, body: JsonValue, state: str
    ) -> OperationStatus | Failure:
        match _STATUS_WORDS.get(_normalised(state)):
            case LifecycleState.QUEUED:
                return OperationStatus.queued()
            case LifecycleState.RUNNING:
                return OperationStatus.running(self._percent(body))
            case LifecycleState.COMPLETED:
                return _completed_by_query(operation, body, self._named_resource(body))
            case LifecycleState.PARTIAL:
                covered = pointer(body, self.covered_at)
                return OperationStatus.partial(
                    body,
                    _PART_DONE if covered is MISSING else _text_of(covered),
                    _REST,
                    self._named_resource(body),
                )
            case LifecycleState.FAILED:
                return OperationStatus.failed(_error_reason(pointer(body, "/error")))
            case LifecycleState.CANCELLED:
                return OperationStatus.cancelled()
            case _:
                return _protocol_failure(
                    f"the status {dumps(redact_text(state))} is not one this reader knows"
                )

    def _percent(self, body: JsonValue) -> int | None:
        return _percent(pointer(body, self.percent_at))

    def _named_resource(self, body: JsonValue) -> Resource | None:
        """The resource a status body names at ``resource_at``, when it names one."""
        location = pointer(body, self.resource_at)
        return Resource(redact_url(location)) if isinstance(location, str) else None


@dataclass(frozen=True, slots=True)
class LongRunning(_HttpStatusReader):
    """Reads a long-running operation resource (Google AIP-151); see the module."""

    def accepted(self, start: Classification) -> Operation | None:
        """The operation a start answer names, also when it is already done.

        That is the start's lifecycle when it has not ended, else an answer that is an operation
        resource: a JSON object with a string ``name`` and a ``done`` field. When it is already
        done, the first status read reports the end.
        """
        if start.lifecycle is not None:
            return super().accepted(start)
        outcome = start.outcome
        if not isinstance(outcome, Success) or not isinstance(outcome.payload, Mapping):
            return None
        name = outcome.payload.get("name")
        if not isinstance(name, str) or "done" not in outcome.payload:
            return None
        return Operation(name)

    def read(self, operation: Operation, raw: HttpExchange, /) -> StatusRead:
        """Reads one answer of the operation resource."""
        response = _answered(raw)
        if isinstance(response, StatusRead):
            return response
        if not 200 <= response.status <= 299:
            return _unreadable(response)
        wait = _retry_after_ms(response)
        body = _json_body(response)
        if isinstance(body, Failure):
            return StatusRead(body, wait)
        return StatusRead(_operation_status(operation, body), wait)


def _operation_status(operation: Operation, body: JsonValue) -> OperationStatus | Failure:
    """What an operation resource says."""
    fields = body if isinstance(body, dict) else {}
    if fields.get("done") is not True:
        return OperationStatus.running(_percent(pointer(body, "/metadata/progressPercent")))
    if "error" in fields:
        error = fields["error"]
        # google.rpc.Code 1 is CANCELLED.
        code = error.get("code") if isinstance(error, dict) else None
        if type(code) is int and code == 1:
            return OperationStatus.cancelled()
        return OperationStatus.failed(_error_reason(error))
    if "response" in fields:
        result = fields["response"]
        evidence = Evidence(EvidenceKind.JOB_ID, operation.id)
        return OperationStatus.completed(result, evidence, _long_running_resource(result))
    return _protocol_failure(
        f"operation {redact_text(operation.id)} says done with neither a response nor an "
        "error: its completion cannot be verified"
    )


def _long_running_resource(response: JsonValue) -> Resource | None:
    """The resource a ``response`` names: its ``name`` (AIP-122), its ``etag`` (AIP-154)."""
    if not isinstance(response, dict):
        return None
    name, etag = response.get("name"), response.get("etag")
    if not isinstance(name, str):
        return None
    return Resource(redact_text(name), etag if isinstance(etag, str) else None)


_UNREACHABLE: Final = HttpClassifier(NotFound.UNREACHABLE)
"""Classifies the answers that say nothing of the operation: failing statuses, no response."""


def _answered(raw: HttpExchange) -> HttpResponse | StatusRead:
    """The response of a read, or the read's failure when nothing usable came back."""
    if isinstance(raw, TransportError):
        return _unreadable(raw)
    if not isinstance(raw.body_end, BodyComplete):
        return StatusRead(
            Failure(
                AccessFailureKind.PROTOCOL,
                retryable=True,
                message=(
                    f"the status response's body was cut ({raw.body_end!r}); its state cannot "
                    "be read"
                ),
                status=raw.status,
                error_type="malformed_response",
            )
        )
    return raw


def _unreadable(raw: HttpExchange) -> StatusRead:
    """The failure of a read that did not answer, or answered what says nothing of the operation.

    A status of 400 or more, and no response at all, are classified by the HTTP rules; a 1xx,
    2xx or 3xx that the reader does not read is a protocol failure.
    """
    if isinstance(raw, HttpResponse) and raw.status < 400:
        return StatusRead(
            _protocol_failure(
                f"the status URL answered {raw.status}, which says nothing about the operation"
            )
        )
    outcome = _UNREACHABLE.classify(raw).outcome
    if not isinstance(outcome, AccessFailure):  # pragma: no cover - a failing status always is
        return StatusRead(_protocol_failure("the status read was not a failure"))
    return StatusRead(outcome.failure, outcome.failure.retry_after_ms)


def _see_other(response: HttpResponse) -> OperationStatus | Failure:
    """A 303: the operation completed, and its result is at the ``Location``."""
    location = response.header("location")
    if location is None:
        return _protocol_failure("the status URL answered 303 without a Location")
    location = redact_url(location)
    evidence = Evidence(EvidenceKind.QUERY, location)
    return OperationStatus.completed(location, evidence, Resource(location))


def _json_body(response: HttpResponse) -> JsonValue | Failure:
    """The body as JSON, or a transient protocol failure when it is not JSON."""
    try:
        return loads_body(response.body)
    except BodyParseError as err:
        return Failure(
            AccessFailureKind.PROTOCOL,
            retryable=True,
            message=f"the status response is not JSON ({err}): {_body_snippet(response.body)}",
            status=response.status,
            error_type="malformed_response",
        )


def _lenient_json(body: bytes) -> JsonValue:
    """The body as JSON, or ``null`` when it is not JSON."""
    try:
        return loads_body(body)
    except BodyParseError:
        return None


def _protocol_failure(message: str) -> Failure:
    return Failure(
        AccessFailureKind.PROTOCOL,
        retryable=False,
        message=message,
        error_type="malformed_response",
    )


def _completed_by_query(
    operation: Operation, result: JsonValue, resource: Resource | None
) -> OperationStatus:
    """Completed, verified by the read of the status URL itself."""
    evidence = Evidence(EvidenceKind.QUERY, _status_url_of(operation))
    return OperationStatus.completed(result, evidence, resource)


def _status_url_of(operation: Operation) -> str:
    """The operation's status URL (its id when it has none), credentials redacted."""
    url = operation.status_url
    return redact_url(operation.id if url is None else url)


def _normalised(state: str) -> str:
    """A status value without case, ``_``, ``-`` or spaces."""
    return "".join(c for c in state if c not in "_- ").lower()


def _percent(value: JsonValue | Missing) -> int | None:
    """A progress in percent: a number from 0 to 100, cut to a whole number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 <= value <= 100 else None


def _error_reason(error: JsonValue | Missing) -> str:
    """Why an operation failed: its error's ``message``, else its ``code``, else the error."""
    if error is MISSING:
        return "the operation reported failure without an error"
    fields = error if isinstance(error, dict) else {}
    message = fields.get("message")
    if isinstance(message, str) and message:
        reason = message
    elif "code" in fields:
        reason = f"error code {_text_of(fields['code'])}"
    else:
        reason = _compact(error)
    return redact_text(reason)


def _text_of(value: JsonValue) -> str:
    return value if isinstance(value, str) else _compact(value)


def _compact(value: JsonValue) -> str:
    """A JSON value as compact text, cut to 200 characters."""
    return dumps(value, sort=True)[:200]
