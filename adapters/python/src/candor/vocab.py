"""The closed vocabularies of the contract.

Every value has exactly one wire spelling, which is the member's value. Parsing is exact: an
unknown or differently-cased value raises :class:`UnknownValueError`, which names the vocabulary
and the value, never a default.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Self

__all__ = [
    "AccessFailureKind",
    "EvidenceKind",
    "FailureKind",
    "LifecycleState",
    "NextAction",
    "OutcomeClass",
    "PartialKind",
    "RetryAction",
    "UnknownValueError",
    "Vocabulary",
]

MAX_ECHO_CHARS = 64
"""The longest part of a rejected value that an error message repeats."""


def echo(value: str) -> str:
    """``value`` cut to :data:`MAX_ECHO_CHARS` characters, so a hostile value cannot flood a log."""
    if len(value) <= MAX_ECHO_CHARS:
        return value
    return value[:MAX_ECHO_CHARS] + "…"


class UnknownValueError(ValueError):
    """A value that is not a member of a closed vocabulary."""

    vocabulary: str
    """Which vocabulary was asked for, e.g. ``outcome class``."""
    value: str
    """The rejected value, cut to a bounded length."""
    expected: tuple[str, ...]
    """The accepted spellings."""

    def __init__(self, vocabulary: str, value: object, expected: tuple[str, ...]) -> None:
        self.vocabulary = vocabulary
        self.value = echo(value if isinstance(value, str) else repr(value))
        self.expected = expected
        shown = json.dumps(self.value, ensure_ascii=False)
        super().__init__(f"unknown {vocabulary} {shown}; expected one of: {', '.join(expected)}")


class Vocabulary(StrEnum):
    """A closed vocabulary: members compare and format as their wire spelling."""

    @classmethod
    def vocabulary_name(cls) -> str:
        """The vocabulary's name, as error messages say it (e.g. ``outcome class``)."""
        return _NAMES.get(cls, cls.__name__)

    @classmethod
    def parse(cls, value: object) -> Self:
        """The member spelled exactly ``value``.

        Raises :class:`UnknownValueError` for anything else, including another case or a
        value that is not a string.
        """
        if isinstance(value, str):
            for member in cls:
                if member.value == value:
                    return member
        raise UnknownValueError(cls.vocabulary_name(), value, tuple(member.value for member in cls))


class OutcomeClass(Vocabulary):
    """The outcome of a tool call: exactly one of four, with no catch-all."""

    SUCCESS = "success"
    """Contact made, complete answer: use it."""
    EMPTY = "empty"
    """Contact made, the source verified that nothing matches: a real absence, never retried."""
    PARTIAL = "partial"
    """Contact made, the answer was cut off: use what arrived, never as the whole."""
    ACCESS_FAILURE = "access_failure"
    """No usable contact: conclude nothing about the source."""


class FailureKind(Vocabulary):
    """Why an attempt was not a complete answer: the ``tool.failure.kind`` attribute."""

    TIMEOUT = "timeout"
    """No status arrived within the attempt's time (or the server answered 408)."""
    CONNECT = "connect"
    """The connection could not be made or was reset."""
    SERVER_ERROR = "server_error"
    """The server answered 5xx."""
    RATE_LIMITED = "rate_limited"
    """The server answered 429."""
    AUTH = "auth"
    """The server answered 401 or 403."""
    CLIENT_ERROR = "client_error"
    """The server answered another 4xx."""
    PROTOCOL = "protocol"
    """The response could not be understood."""
    SIZE_CAP = "size_cap"
    """The answer hit a size cap."""
    DECLARED_TOTAL = "declared_total"
    """The source declared a total larger than what it returned."""
    TRUNCATION_MARKER = "truncation_marker"
    """The source marked its answer as truncated."""
    MID_STREAM = "mid_stream"
    """The answer broke off while it was being received."""
    OPERATION_PARTIAL = "operation_partial"
    """The asynchronous operation finished with part of its work done."""
    DEADLINE = "deadline"
    """The call's overall deadline ran out."""
    DNS = "dns"
    """The host name could not be resolved."""
    TLS = "tls"
    """The TLS handshake or the server's certificate failed."""
    TOOL_ERROR = "tool_error"
    """The tool ran and reported an error in its result (an MCP result with ``isError``)."""
    CANCELLED = "cancelled"
    """The asynchronous operation was cancelled before it finished."""
    UNKNOWN = "unknown"
    """An error no rule knows: ``error_type`` keeps what was sent."""


class AccessFailureKind(Vocabulary):
    """Why an attempt made no usable contact: the failure kinds an AccessFailure can carry."""

    TIMEOUT = "timeout"
    """No status arrived within the attempt's time (or the server answered 408)."""
    CONNECT = "connect"
    """The connection could not be made or was reset."""
    SERVER_ERROR = "server_error"
    """The server answered 5xx."""
    RATE_LIMITED = "rate_limited"
    """The server answered 429."""
    AUTH = "auth"
    """The server answered 401 or 403."""
    CLIENT_ERROR = "client_error"
    """The server answered another 4xx (including a 404 declared as "could not reach")."""
    PROTOCOL = "protocol"
    """The response could not be understood."""
    DEADLINE = "deadline"
    """The call's overall deadline ran out before any answer."""
    DNS = "dns"
    """The host name could not be resolved."""
    TLS = "tls"
    """The TLS handshake or the server's certificate failed."""
    TOOL_ERROR = "tool_error"
    """The tool ran and reported an error in its result (an MCP result with ``isError``)."""
    CANCELLED = "cancelled"
    """The asynchronous operation was cancelled before it finished."""
    UNKNOWN = "unknown"
    """An error no rule knows: ``error_type`` keeps what was sent."""

    @property
    def failure_kind(self) -> FailureKind:
        """The same kind in the wider :class:`FailureKind` vocabulary."""
        return _FAILURE_KINDS[self]


class PartialKind(Vocabulary):
    """How an answer was cut off: the failure kinds a Partial can carry."""

    SIZE_CAP = "size_cap"
    """The answer hit a size cap."""
    DECLARED_TOTAL = "declared_total"
    """The source declared a total larger than what it returned."""
    TRUNCATION_MARKER = "truncation_marker"
    """The source marked its answer as truncated."""
    MID_STREAM = "mid_stream"
    """The answer broke off while it was being received."""
    OPERATION_PARTIAL = "operation_partial"
    """The asynchronous operation finished with part of its work done."""
    DEADLINE = "deadline"
    """The overall deadline ran out while the answer was arriving."""

    @property
    def failure_kind(self) -> FailureKind:
        """The same kind in the wider :class:`FailureKind` vocabulary."""
        return _FAILURE_KINDS[self]


_FAILURE_KINDS: dict[str, FailureKind] = {kind.value: kind for kind in FailureKind}
"""Each :class:`FailureKind` by its spelling; a member of another vocabulary, being a str of
its spelling, finds its own (a lookup that costs less than calling :class:`FailureKind`)."""


class RetryAction(Vocabulary):
    """What the retry policy did after an attempt: the ``tool.retry.action`` attribute."""

    RETRY = "retry"
    """Another attempt follows after a backoff."""
    EXHAUSTED = "exhausted"
    """The failure was transient but the budget (attempts, elapsed time, deadline) ran out."""
    PERMANENT = "permanent"
    """The failure will not change by asking again; no retry."""
    ACCEPT_PARTIAL = "accept_partial"
    """A partial answer was accepted as it is."""


class LifecycleState(Vocabulary):
    """Where an asynchronous operation stands; a 202-style acceptance is never ``completed``."""

    ACCEPTED = "accepted"
    """The request was accepted for processing; nothing has been done yet."""
    QUEUED = "queued"
    """Waiting to run."""
    RUNNING = "running"
    """Running."""
    PARTIAL = "partial"
    """Finished with part of the work done."""
    COMPLETED = "completed"
    """Finished, and the completion was verified by a read independent of the acceptance."""
    CANCELLED = "cancelled"
    """Stopped before finishing, on request."""
    FAILED = "failed"
    """Stopped before finishing, by an error."""

    @property
    def is_terminal(self) -> bool:
        """Whether the operation can no longer change state."""
        return self in _TERMINAL


_TERMINAL = frozenset(
    {
        LifecycleState.PARTIAL,
        LifecycleState.COMPLETED,
        LifecycleState.CANCELLED,
        LifecycleState.FAILED,
    }
)


class NextAction(Vocabulary):
    """What a consumer may legally do next with an envelope."""

    RETRY = "retry"
    """Ask again (the failure was transient)."""
    POLL = "poll"
    """Read the status of an asynchronous operation again."""
    COMPENSATE = "compensate"
    """Undo or repair what partly happened."""
    ESCALATE = "escalate"
    """Report upward: a person or a higher layer has to decide."""
    FINISH = "finish"
    """Use the answer as it stands."""


class EvidenceKind(Vocabulary):
    """What kind of handle verifies an outcome independently of the call that produced it."""

    REQUEST_ID = "request_id"
    """The request id the source assigned (e.g. an ``X-Request-Id`` response header)."""
    RECEIPT = "receipt"
    """A receipt the source issued."""
    JOB_ID = "job_id"
    """The id of an asynchronous job whose status can be read."""
    QUERY = "query"
    """A query that re-checks the outcome against the source."""


_NAMES: dict[type[Vocabulary], str] = {
    OutcomeClass: "outcome class",
    FailureKind: "failure kind",
    AccessFailureKind: "access failure kind",
    PartialKind: "partial kind",
    RetryAction: "retry action",
    LifecycleState: "lifecycle state",
    NextAction: "next action",
    EvidenceKind: "evidence kind",
}
