"""Reading an envelope from JSON, refusing anything the contract refuses.

The checks run in the Rust reader's order: first the shape (every field known, present and of
its type, every vocabulary value a member), then the version, then the next actions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime
from enum import StrEnum
from typing import Final, TypeVar

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
from candor.jsonvalue import JsonValue, loads_text
from candor.timestamps import parse_rfc3339
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
    Vocabulary,
    echo,
)

__all__ = ["EnvelopeRule", "InvalidEnvelope", "read_envelope", "read_envelope_json"]

V = TypeVar("V", bound=Vocabulary)
_P = TypeVar("_P")


class EnvelopeRule(StrEnum):
    """Which rule an envelope read from JSON broke."""

    SCHEMA = "schema"
    """Not the envelope's shape, including a value outside a closed vocabulary."""
    VERSION = "version"
    """Written for another version of the schema."""
    NEXT_ACTIONS = "next_actions"
    """The next actions listed are not the ones the outcome allows."""


class InvalidEnvelope(ValueError):  # noqa: N818 - the contract's name for the refusal
    """An envelope read from JSON was refused; :attr:`rule` says which rule it broke."""

    rule: EnvelopeRule
    """``schema``, ``version`` or ``next_actions``."""
    path: str
    """Where in the JSON the problem is, e.g. ``outcome.failure.kind`` (empty for the whole)."""

    def __init__(self, rule: EnvelopeRule, message: str, path: str = "") -> None:
        self.rule = rule
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


def _schema(path: str, message: str) -> InvalidEnvelope:
    return InvalidEnvelope(EnvelopeRule.SCHEMA, message, path)


class _Fields(dict[str, JsonValue]):
    """A JSON object read from text that remembers a key given twice."""

    duplicate: str | None = None


def _pairs(pairs: list[tuple[str, JsonValue]]) -> _Fields:
    fields = _Fields()
    for key, value in pairs:
        if key in fields and fields.duplicate is None:
            fields.duplicate = key
        fields[key] = value
    return fields


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _object(
    value: object, path: str, required: Iterable[str], optional: Iterable[str] = ()
) -> dict[str, JsonValue]:
    """A JSON object with exactly these fields (an optional one may be absent or null)."""
    if not isinstance(value, dict):
        raise _schema(path, f"expected an object, got {_kind(value)}")
    required, optional = tuple(required), tuple(optional)
    duplicate = getattr(value, "duplicate", None)
    if duplicate is not None:
        raise _schema(path, f"duplicate field `{echo(duplicate)}`")
    for key in value:
        if key not in required and key not in optional:
            raise _schema(path, f"unknown field `{echo(str(key))}`")
    for key in required:
        if key not in value:
            raise _schema(path, f"missing field `{key}`")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _schema(path, f"expected a string, got {_kind(value)}")
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _schema(path, f"expected a boolean, got {_kind(value)}")
    return value


def _uint(value: object, path: str, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _schema(path, f"expected an unsigned integer, got {_kind(value)}")
    if not 0 <= value < 2**bits:
        raise _schema(path, f"{value} is outside the range of a u{bits}")
    return value


def _vocab(cls: type[V], value: object, path: str) -> V:
    try:
        return cls.parse(value)
    except UnknownValueError as err:
        raise _schema(path, str(err)) from None


def _opt_str(data: dict[str, JsonValue], key: str, path: str) -> str | None:
    value = data.get(key)
    return None if value is None else _str(value, _at(path, key))


def _opt_uint(data: dict[str, JsonValue], key: str, path: str, bits: int) -> int | None:
    value = data.get(key)
    return None if value is None else _uint(value, _at(path, key), bits)


def _timestamp(value: object, path: str) -> datetime:
    text = _str(value, path)
    try:
        return parse_rfc3339(text)
    except ValueError as err:
        raise _schema(path, str(err)) from None


def _json(value: object, path: str) -> JsonValue:
    """A free-form JSON value (a payload), checked to be JSON all the way down."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise _schema(at, "object keys must be strings")
                stack.append((child, _at(at, key)))
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{index}]") for index, child in enumerate(item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _schema(at, "a JSON number must be finite")
        elif item is not None and not isinstance(item, bool | int | str):
            raise _schema(at, f"{_kind(item)} is not a JSON value")
    return _plain(value)


def _plain(value: object) -> JsonValue:
    if isinstance(value, dict):
        return {key: _plain(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_plain(child) for child in value]
    return value  # type: ignore[return-value]  # checked by _json


def _extent(value: object, path: str) -> Extent:
    data = _object(value, path, (), ("items", "declared_total", "scope"))
    return Extent(
        items=_opt_uint(data, "items", path, 64),
        declared_total=_opt_uint(data, "declared_total", path, 64),
        scope=_opt_str(data, "scope", path),
    )


def _truncation(value: object, path: str) -> Truncation:
    data = _object(value, path, ("kind", "covered", "dropped"), ("returned", "expected"))
    return Truncation(
        kind=_vocab(PartialKind, data["kind"], _at(path, "kind")),
        covered=_str(data["covered"], _at(path, "covered")),
        dropped=_str(data["dropped"], _at(path, "dropped")),
        returned=_opt_uint(data, "returned", path, 64),
        expected=_opt_uint(data, "expected", path, 64),
    )


def _failure(value: object, path: str) -> Failure:
    data = _object(
        value,
        path,
        ("kind", "retryable", "message"),
        ("status", "error_type", "retry_after_ms"),
    )
    return Failure(
        kind=_vocab(AccessFailureKind, data["kind"], _at(path, "kind")),
        retryable=_bool(data["retryable"], _at(path, "retryable")),
        message=_str(data["message"], _at(path, "message")),
        status=_opt_uint(data, "status", path, 16),
        error_type=_opt_str(data, "error_type", path),
        retry_after_ms=_opt_uint(data, "retry_after_ms", path, 64),
    )


_OUTCOME_FIELDS: Final = {
    OutcomeClass.SUCCESS: ("payload", "extent"),
    OutcomeClass.EMPTY: ("extent",),
    OutcomeClass.PARTIAL: ("payload", "truncation"),
    OutcomeClass.ACCESS_FAILURE: ("failure",),
}


def _tag(cls: type[V], value: object, path: str, key: str) -> V:
    """The tag of a tagged object: the member of ``cls`` that its field ``key`` names."""
    if not isinstance(value, dict):
        raise _schema(path, f"expected an object, got {_kind(value)}")
    if key not in value:
        raise _schema(path, f"missing field `{key}`")
    return _vocab(cls, value[key], _at(path, key))


def _outcome(value: object, path: str) -> Outcome:
    cls = _tag(OutcomeClass, value, path, "class")
    data = _object(value, path, ("class", *_OUTCOME_FIELDS[cls]))
    match cls:
        case OutcomeClass.SUCCESS:
            return Success(
                payload=_json(data["payload"], _at(path, "payload")),
                extent=_extent(data["extent"], _at(path, "extent")),
            )
        case OutcomeClass.EMPTY:
            return Empty(extent=_extent(data["extent"], _at(path, "extent")))
        case OutcomeClass.PARTIAL:
            return Partial(
                payload=_json(data["payload"], _at(path, "payload")),
                truncation=_truncation(data["truncation"], _at(path, "truncation")),
            )
        case OutcomeClass.ACCESS_FAILURE:
            return AccessFailure(failure=_failure(data["failure"], _at(path, "failure")))


def _authority(value: object, path: str) -> Authority:
    data = _object(value, path, (), ("principal", "scope"))
    return Authority(
        principal=_opt_str(data, "principal", path), scope=_opt_str(data, "scope", path)
    )


def _provenance(value: object, path: str) -> Provenance:
    data = _object(
        value, path, ("source_system", "adapter", "started_at", "finished_at"), ("actor",)
    )
    return Provenance(
        source_system=_str(data["source_system"], _at(path, "source_system")),
        actor=_opt_str(data, "actor", path),
        adapter=_str(data["adapter"], _at(path, "adapter")),
        started_at=_timestamp(data["started_at"], _at(path, "started_at")),
        finished_at=_timestamp(data["finished_at"], _at(path, "finished_at")),
    )


def _evidence(value: object, path: str) -> Evidence:
    data = _object(value, path, ("kind", "value"))
    return Evidence(
        kind=_vocab(EvidenceKind, data["kind"], _at(path, "kind")),
        value=_str(data["value"], _at(path, "value")),
    )


def _optional_vocab(cls: type[V], data: dict[str, JsonValue], key: str, path: str) -> V | None:
    value = data.get(key)
    return None if value is None else _vocab(cls, value, _at(path, key))


def _attempt(value: object, path: str) -> Attempt:
    data = _object(
        value,
        path,
        ("number", "started_at", "duration_ms", "class"),
        ("failure_kind", "status", "retry_action", "backoff_ms", "error_type"),
    )
    return Attempt(
        number=_uint(data["number"], _at(path, "number"), 32),
        started_at=_timestamp(data["started_at"], _at(path, "started_at")),
        duration_ms=_uint(data["duration_ms"], _at(path, "duration_ms"), 64),
        outcome_class=_vocab(OutcomeClass, data["class"], _at(path, "class")),
        failure_kind=_optional_vocab(FailureKind, data, "failure_kind", path),
        status=_opt_uint(data, "status", path, 16),
        retry_action=_optional_vocab(RetryAction, data, "retry_action", path),
        backoff_ms=_opt_uint(data, "backoff_ms", path, 64),
        error_type=_opt_str(data, "error_type", path),
    )


def _operation(value: object, path: str) -> Operation:
    data = _object(value, path, ("id",), ("status_url", "generated"))
    return Operation(
        id=_str(data["id"], _at(path, "id")),
        status_url=_opt_str(data, "status_url", path),
        generated="generated" in data and _bool(data["generated"], _at(path, "generated")),
    )


def _resource(value: object, path: str) -> Resource:
    data = _object(value, path, ("id",), ("version",))
    return Resource(id=_str(data["id"], _at(path, "id")), version=_opt_str(data, "version", path))


# Each state's fields besides `state` and `operation`: (required, optional).
_LIFECYCLE_FIELDS: Final[dict[LifecycleState, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    LifecycleState.ACCEPTED: ((), ()),
    LifecycleState.QUEUED: ((), ()),
    LifecycleState.RUNNING: ((), ("percent_complete",)),
    LifecycleState.PARTIAL: (("covered",), ("resource",)),
    LifecycleState.COMPLETED: (("verified_by",), ("resource",)),
    LifecycleState.CANCELLED: ((), ()),
    LifecycleState.FAILED: (("reason",), ()),
}


def _lifecycle(value: object, path: str) -> Lifecycle:
    state = _tag(LifecycleState, value, path, "state")
    required, optional = _LIFECYCLE_FIELDS[state]
    data = _object(value, path, ("state", "operation", *required), optional)
    # A state's own field is required (not nullable) where the state needs it.
    needs = set(required)
    # A `resource` on a state that carries none was refused above, as an unknown field.
    resource = data.get("resource")
    return Lifecycle(
        state=state,
        operation=_operation(data["operation"], _at(path, "operation")),
        percent_complete=_opt_uint(data, "percent_complete", path, 8),
        covered=_str(data["covered"], _at(path, "covered")) if "covered" in needs else None,
        verified_by=(
            _evidence(data["verified_by"], _at(path, "verified_by"))
            if "verified_by" in needs
            else None
        ),
        reason=_str(data["reason"], _at(path, "reason")) if "reason" in needs else None,
        resource=None if resource is None else _resource(resource, _at(path, "resource")),
    )


def _next_actions(value: object, path: str) -> tuple[NextAction, ...]:
    if not isinstance(value, list):
        raise _schema(path, f"expected a list, got {_kind(value)}")
    return tuple(_vocab(NextAction, item, f"{path}[{i}]") for i, item in enumerate(value))


def _optional_part(
    data: dict[str, JsonValue], key: str, read: Callable[[object, str], _P]
) -> _P | None:
    value = data.get(key)
    return None if value is None else read(value, key)


_ENVELOPE_REQUIRED: Final = (
    "schema_version",
    "tool",
    "target",
    "outcome",
    "next_actions",
    "provenance",
    "attempts",
)
_ENVELOPE_OPTIONAL: Final = ("authority", "evidence", "lifecycle")


def read_envelope(value: object) -> Envelope:
    """Reads an envelope from JSON values; raises :class:`InvalidEnvelope`."""
    data = _object(value, "", _ENVELOPE_REQUIRED, _ENVELOPE_OPTIONAL)
    version = _uint(data["schema_version"], "schema_version", 32)
    attempts = data["attempts"]
    if not isinstance(attempts, list):
        raise _schema("attempts", f"expected a list, got {_kind(attempts)}")
    found = _next_actions(data["next_actions"], "next_actions")
    envelope = Envelope(
        tool=_str(data["tool"], "tool"),
        target=_str(data["target"], "target"),
        outcome=_outcome(data["outcome"], "outcome"),
        provenance=_provenance(data["provenance"], "provenance"),
        attempts=tuple(_attempt(item, f"attempts[{i}]") for i, item in enumerate(attempts)),
        authority=_optional_part(data, "authority", _authority),
        evidence=_optional_part(data, "evidence", _evidence),
        lifecycle=_optional_part(data, "lifecycle", _lifecycle),
    )
    if version != ENVELOPE_SCHEMA_VERSION:
        raise InvalidEnvelope(
            EnvelopeRule.VERSION,
            f"unsupported envelope schema_version {version}; this reader understands "
            f"{ENVELOPE_SCHEMA_VERSION}",
            "schema_version",
        )
    legal = legal_next_actions(envelope.outcome, envelope.lifecycle)
    if found != legal:
        raise InvalidEnvelope(
            EnvelopeRule.NEXT_ACTIONS,
            f"next_actions {[a.value for a in found]} do not match the "
            f"{envelope.outcome_class} outcome, which allows {[a.value for a in legal]}",
            "next_actions",
        )
    return envelope


def read_envelope_json(text: str | bytes) -> Envelope:
    """Reads an envelope from JSON text; raises :class:`InvalidEnvelope`."""
    try:
        value = loads_text(text, object_pairs_hook=_pairs)
    except (ValueError, RecursionError) as err:
        raise _schema("", f"not JSON: {err}") from None
    return read_envelope(value)
