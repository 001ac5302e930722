"""Candor: every tool call ends in exactly one of four outcomes.

An :class:`Adapter` runs a call to a tool or API, classifies what came back into Success,
Empty, Partial or AccessFailure, owns the retry policy, and returns a typed :class:`Envelope`.
For every AccessFailure attempt and every Partial it records one ``tool.outcome`` span event,
and it counts every call on ``tool.outcomes``, through the OpenTelemetry API (the application
installs the SDK). The events a call has before it ends are also emitted when they happen, as
log records in the call's span (:func:`set_logger_provider` says where). A consumer branches
on the envelope's class with :func:`match_outcome`, one arm per class, none left to a default.

>>> from candor import HttpClassifier, HttpResponse, NotFound
>>> classifier = HttpClassifier(NotFound.UNREACHABLE, items_at="/items", total_at="/total")
>>> classifier.classify(HttpResponse(200, body=b'{"items":[1,2,3],"total":10}')).outcome.CLASS
<OutcomeClass.PARTIAL: 'partial'>
"""

import logging

from candor._version import __version__
from candor.adapter import ADAPTER_VERSION, Adapter, AttemptContext, Observation
from candor.classify import Classification, Classifier, ExceptionClassifier, FnClassifier
from candor.classify.http import (
    ArrivalClassifier,
    BodyBroken,
    BodyComplete,
    BodyEnd,
    BodySizeCap,
    BodyTimedOut,
    HttpArrival,
    HttpClassifier,
    HttpExchange,
    HttpResponse,
    NotFound,
    TransportError,
    TransportErrorKind,
)
from candor.clock import Clock, SystemClock
from candor.consumer import match_outcome
from candor.envelope import (
    ENVELOPE_SCHEMA_VERSION,
    AccessFailure,
    Attempt,
    Authority,
    Empty,
    Envelope,
    Evidence,
    Extent,
    Failure,
    Lifecycle,
    Operation,
    Outcome,
    Partial,
    Provenance,
    Resource,
    Success,
    Truncation,
    legal_next_actions,
)
from candor.follow import (
    FnStatus,
    LongRunning,
    OperationStatus,
    StatusRead,
    StatusReader,
    StatusUrl,
)
from candor.jsonvalue import JsonValue
from candor.redact import redact_text, redact_url
from candor.retry import (
    Decision,
    Done,
    FixedJitter,
    GiveUp,
    Jitter,
    RandomJitter,
    Retry,
    RetryPolicy,
    SeededJitter,
)
from candor.telemetry import ExportHeartbeat, set_logger_provider
from candor.vocab import (
    AccessFailureKind,
    EvidenceKind,
    FailureKind,
    LifecycleState,
    NextAction,
    OutcomeClass,
    PartialKind,
    RetryAction,
    UnknownValueError,
)
from candor.wire import EnvelopeRule, InvalidEnvelope

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ADAPTER_VERSION",
    "ENVELOPE_SCHEMA_VERSION",
    "AccessFailure",
    "AccessFailureKind",
    "Adapter",
    "ArrivalClassifier",
    "Attempt",
    "AttemptContext",
    "Authority",
    "BodyBroken",
    "BodyComplete",
    "BodyEnd",
    "BodySizeCap",
    "BodyTimedOut",
    "Classification",
    "Classifier",
    "Clock",
    "Decision",
    "Done",
    "Empty",
    "Envelope",
    "EnvelopeRule",
    "Evidence",
    "EvidenceKind",
    "ExceptionClassifier",
    "ExportHeartbeat",
    "Extent",
    "Failure",
    "FailureKind",
    "FixedJitter",
    "FnClassifier",
    "FnStatus",
    "GiveUp",
    "HttpArrival",
    "HttpClassifier",
    "HttpExchange",
    "HttpResponse",
    "InvalidEnvelope",
    "Jitter",
    "JsonValue",
    "Lifecycle",
    "LifecycleState",
    "LongRunning",
    "NextAction",
    "NotFound",
    "Observation",
    "Operation",
    "OperationStatus",
    "Outcome",
    "OutcomeClass",
    "Partial",
    "PartialKind",
    "Provenance",
    "RandomJitter",
    "Resource",
    "Retry",
    "RetryAction",
    "RetryPolicy",
    "SeededJitter",
    "StatusRead",
    "StatusReader",
    "StatusUrl",
    "Success",
    "SystemClock",
    "TransportError",
    "TransportErrorKind",
    "Truncation",
    "UnknownValueError",
    "__version__",
    "legal_next_actions",
    "match_outcome",
    "redact_text",
    "redact_url",
    "set_logger_provider",
]
