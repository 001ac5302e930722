"""The envelope: its JSON, what a reader refuses, the next actions and the summary."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from candor import (
    ADAPTER_VERSION,
    AccessFailure,
    AccessFailureKind,
    Attempt,
    Authority,
    Empty,
    Envelope,
    EnvelopeRule,
    Evidence,
    EvidenceKind,
    Extent,
    Failure,
    FailureKind,
    InvalidEnvelope,
    Lifecycle,
    LifecycleState,
    NextAction,
    Operation,
    OutcomeClass,
    Partial,
    PartialKind,
    Provenance,
    Resource,
    RetryAction,
    Success,
    Truncation,
    legal_next_actions,
)
from candor.jsonvalue import dumps
from candor.mcp_result import call_tool_result, output_schema

START = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
SCHEMA = Path(__file__).parent / ".." / ".." / ".." / "spec" / "v1" / "envelope.v1.schema.json"


def envelope(outcome: Any = None, **fields: Any) -> Envelope:
    return Envelope(
        **{
            "tool": "search",
            "target": "https://s.example/v1",
            "outcome": outcome if outcome is not None else Success({"items": [1]}, Extent(items=1)),
            "provenance": Provenance(
                "s.example", ADAPTER_VERSION, START, START + timedelta(milliseconds=40)
            ),
            "attempts": (Attempt(1, START, 40, OutcomeClass.SUCCESS),),
            **fields,
        }
    )


def test_to_json_writes_compact_json_with_sorted_payload_keys() -> None:
    written = envelope(
        Partial(
            {"b": 1.5e-5, "a": [True, None, 2**63, 'é\u0001"'], "c": {"z": 1e16, "y": -0.0}},
            Truncation(PartialKind.DECLARED_TOTAL, "items 1-2 of 9", "7 item(s)", 2, 9),
        ),
        provenance=Provenance(
            "s.example",
            "candor-adapter-python/0.1.0",
            START,
            START + timedelta(microseconds=40_123),
            actor="agent",
        ),
        attempts=(
            Attempt(
                1,
                START,
                40,
                OutcomeClass.PARTIAL,
                FailureKind.DECLARED_TOTAL,
                retry_action=RetryAction.ACCEPT_PARTIAL,
            ),
        ),
        authority=Authority(principal="svc"),
        evidence=Evidence(EvidenceKind.REQUEST_ID, "r-1"),
    ).to_json()
    assert written == (
        '{"schema_version":1,"tool":"search","target":"https://s.example/v1",'
        '"outcome":{"class":"partial","payload":{"a":[true,null,9223372036854775808,'
        '"é\\u0001\\""],"b":1.5e-05,"c":{"y":-0.0,"z":1e+16}},'
        '"truncation":{"kind":"declared_total","covered":"items 1-2 of 9",'
        '"dropped":"7 item(s)","returned":2,"expected":9}},'
        '"next_actions":["finish","escalate"],"authority":{"principal":"svc"},'
        '"provenance":{"source_system":"s.example","actor":"agent",'
        '"adapter":"candor-adapter-python/0.1.0","started_at":"2027-01-15T08:00:00.000000Z",'
        '"finished_at":"2027-01-15T08:00:00.040123Z"},'
        '"evidence":{"kind":"request_id","value":"r-1"},'
        '"attempts":[{"number":1,"started_at":"2027-01-15T08:00:00.000000Z","duration_ms":40,'
        '"class":"partial","failure_kind":"declared_total","retry_action":"accept_partial"}]}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.5e300, "1.5e+300"),
        (1e-5, "1e-05"),
        (1.25e-6, "1.25e-06"),
        (-2.5, "-2.5"),
        (123456.789, "123456.789"),
        (float("inf"), "null"),
        (float("nan"), "null"),
    ],
)
def test_a_float_is_written_as_its_repr_or_as_null_when_not_finite(value: float, text: str) -> None:
    assert dumps(value) == text


def test_an_envelope_read_back_is_the_same() -> None:
    original = envelope(
        Success(
            {"id": "job-1"},
            Extent(scope="tenant-7"),
        ),
        lifecycle=Lifecycle.accepted(Operation("job-1", "https://s.example/jobs/1")),
        evidence=Evidence(EvidenceKind.JOB_ID, "job-1"),
    )
    assert Envelope.from_json(original.to_json()) == original
    assert Envelope.from_dict(json.loads(original.to_json())).to_json() == original.to_json()


def test_a_lifecycle_names_its_resource_after_its_own_field() -> None:
    completed = Lifecycle.completed(
        Operation("j-77"),
        Evidence(EvidenceKind.QUERY, "GET /v1/jobs/j-77 -> done"),
        Resource("https://store.example/exports/e-9", '"v7"'),
    )
    partial = Lifecycle(
        LifecycleState.PARTIAL, Operation("j-78"), covered="3 of 5 files", resource=Resource("e-10")
    )
    assert dumps(completed.to_dict()) == (
        '{"state":"completed","operation":{"id":"j-77"},'
        '"verified_by":{"kind":"query","value":"GET /v1/jobs/j-77 -> done"},'
        '"resource":{"id":"https://store.example/exports/e-9","version":"\\"v7\\""}}'
    )
    assert dumps(partial.to_dict()) == (
        '{"state":"partial","operation":{"id":"j-78"},"covered":"3 of 5 files",'
        '"resource":{"id":"e-10"}}'
    )
    for lifecycle in (completed, partial):
        original = envelope(Success(None), lifecycle=lifecycle)
        assert Envelope.from_json(original.to_json()) == original
        assert Envelope.from_dict(json.loads(original.to_json())).to_json() == original.to_json()


def test_written_envelopes_match_the_json_schema() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert output_schema() == schema, "the packaged schema is a copy of spec/v1's"
    failure = AccessFailure(Failure(AccessFailureKind.SERVER_ERROR, True, "HTTP 503", 503, "503"))
    for outcome in [
        Success(None, Extent()),
        Empty(Extent(items=0, scope="s")),
        Partial("{", Truncation(PartialKind.SIZE_CAP, "the first 1 bytes of the body", "rest")),
        failure,
    ]:
        jsonschema.validate(envelope(outcome).to_dict(), schema)


EXAMPLES = SCHEMA.with_name("envelope.v1.examples.json")


def test_the_rust_example_envelopes_match_the_json_schema() -> None:
    """The Rust types' example envelopes (committed by ``schema/tests/envelope_schema.rs``) meet
    the committed schema, read by this validator rather than the Rust side's own."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    examples = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    classes = {example["outcome"]["class"] for example in examples}
    assert classes == {"success", "empty", "partial", "access_failure"}
    assert any("lifecycle" in example for example in examples)
    for example in examples:
        jsonschema.validate(example, schema)


def test_the_schema_refuses_what_the_contract_forbids() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    examples = {
        ("lifecycle" in example, example["outcome"]["class"]): example
        for example in json.loads(EXAMPLES.read_text(encoding="utf-8"))
    }
    validator = jsonschema.Draft202012Validator(schema)

    def breaks(key: tuple[bool, str], change: Any) -> bool:
        data = copy.deepcopy(examples[key])
        change(data)
        return not validator.is_valid(data)

    failure = (False, "access_failure")
    assert validator.is_valid(examples[failure])
    assert breaks(failure, lambda d: d["outcome"].update({"class": "unknown"}))
    assert breaks(failure, lambda d: d["outcome"].update({"payload": []}))
    assert breaks((False, "partial"), lambda d: d["outcome"]["truncation"].pop("covered"))
    assert breaks((True, "success"), lambda d: d["lifecycle"].update({"state": "completed"}))


def valid() -> dict[str, Any]:
    return json.loads(envelope().to_json())  # type: ignore[no-any-return]


def refused(data: object) -> InvalidEnvelope:
    with pytest.raises(InvalidEnvelope) as caught:
        Envelope.from_dict(data)
    return caught.value


def mutated(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(valid())
    change(data)
    return data


def completed_with_resource(resource: object) -> dict[str, Any]:
    """A completed lifecycle, which allows ``finish``, naming ``resource``."""
    return {
        "state": "completed",
        "operation": {"id": "j"},
        "verified_by": {"kind": "query", "value": "GET /jobs/j"},
        "resource": resource,
    }


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(extra=1),
        lambda d: d.pop("attempts"),
        lambda d: d["outcome"].update({"class": "Success"}),
        lambda d: d["outcome"].update({"class": "SUCCESS"}),
        lambda d: d.update(schema_version="1"),
        lambda d: d.update(schema_version=True),
        lambda d: d["attempts"][0].update(duration_ms=-1),
        lambda d: d["attempts"][0].update(duration_ms=1.0),
        lambda d: d["attempts"][0].update(number=2**32),
        lambda d: d["provenance"].update(started_at="2027-01-15T08:00:00+01:00"),
        lambda d: d["provenance"].update(started_at="1969-12-31T23:59:59Z"),
        lambda d: d["outcome"]["extent"].update(unknown=1),
        lambda d: d.update(
            outcome={
                "class": "access_failure",
                "payload": [],
                "failure": {"kind": "timeout", "retryable": True, "message": "x"},
            },
            next_actions=["retry", "escalate"],
        ),
        lambda d: d.update(
            outcome={
                "class": "access_failure",
                "failure": {"kind": "size_cap", "retryable": True, "message": "x"},
            },
            next_actions=["retry", "escalate"],
        ),
        lambda d: d.update(
            lifecycle={"state": "completed", "operation": {"id": "j"}},
        ),
        lambda d: d.update(
            lifecycle={"state": "completed", "operation": {"id": "j"}, "verified_by": None},
        ),
        lambda d: d.update(
            lifecycle={"state": "failed", "operation": {"id": "j"}, "reason": None},
            next_actions=["compensate", "escalate"],
        ),
        lambda d: d["outcome"].update(payload=float("nan")),
        lambda d: d["outcome"].update(extent=None),
        lambda d: d.update(
            lifecycle={"state": "running", "operation": {"id": "j"}, "percent_complete": 256},
            next_actions=["poll", "compensate", "escalate"],
        ),
        lambda d: d.update(
            lifecycle={"state": "running", "operation": {"id": "j"}, "resource": {"id": "r"}},
            next_actions=["poll", "compensate", "escalate"],
        ),
        lambda d: d.update(
            lifecycle={"state": "accepted", "operation": {"id": "j"}, "resource": None},
            next_actions=["poll", "compensate", "escalate"],
        ),
        lambda d: d.update(
            lifecycle={
                "state": "failed",
                "operation": {"id": "j"},
                "reason": "x",
                "resource": {"id": "r"},
            },
            next_actions=["compensate", "escalate"],
        ),
        lambda d: d.update(lifecycle=completed_with_resource({"version": "v1"})),
        lambda d: d.update(lifecycle=completed_with_resource({"id": 7})),
        lambda d: d.update(lifecycle=completed_with_resource({"id": None})),
        lambda d: d.update(lifecycle=completed_with_resource({"id": "r", "version": 7})),
        lambda d: d.update(lifecycle=completed_with_resource({"id": "r", "etag": "v1"})),
        lambda d: d.update(lifecycle=completed_with_resource("r")),
    ],
)
def test_a_reader_refuses_what_is_not_the_shape(change: Any) -> None:
    assert refused(mutated(change)).rule is EnvelopeRule.SCHEMA


def test_the_shape_is_checked_before_the_version_and_the_version_before_next_actions() -> None:
    assert refused(mutated(lambda d: d.update(schema_version=2))).rule is EnvelopeRule.VERSION
    both = mutated(lambda d: d.update(schema_version=2, extra=1))
    assert refused(both).rule is EnvelopeRule.SCHEMA
    wrong = mutated(lambda d: d.update(next_actions=["finish", "escalate"]))
    error = refused(wrong)
    assert error.rule is EnvelopeRule.NEXT_ACTIONS
    assert "success" in str(error)
    version_first = mutated(lambda d: d.update(schema_version=2, next_actions=[]))
    assert refused(version_first).rule is EnvelopeRule.VERSION


def test_optional_fields_given_as_null_read_as_absent() -> None:
    data = valid()
    data["authority"] = None
    data["provenance"]["actor"] = None
    read = Envelope.from_dict(data)
    assert read.authority is None
    assert "authority" not in read.to_dict()
    data["lifecycle"] = completed_with_resource(None)
    assert Envelope.from_dict(data).lifecycle == Lifecycle.completed(
        Operation("j"), Evidence(EvidenceKind.QUERY, "GET /jobs/j")
    )
    data["lifecycle"] = completed_with_resource({"id": "r", "version": None})
    read = Envelope.from_dict(data)
    assert read.lifecycle is not None
    assert read.lifecycle.resource == Resource("r")


def test_text_with_a_field_given_twice_is_refused() -> None:
    text = envelope().to_json().replace('"tool":"search"', '"tool":"search","tool":"other"')
    assert "search" in text
    with pytest.raises(InvalidEnvelope) as caught:
        Envelope.from_json(text)
    assert caught.value.rule is EnvelopeRule.SCHEMA
    with pytest.raises(InvalidEnvelope):
        Envelope.from_json("{not json")


def test_next_actions_follow_the_table() -> None:
    operation = Operation("job-1")
    transient = AccessFailure(Failure(AccessFailureKind.TIMEOUT, True, "slow"))
    permanent = AccessFailure(Failure(AccessFailureKind.AUTH, False, "no"))
    success = Success(None)
    states = {
        LifecycleState.ACCEPTED: ["poll", "compensate", "escalate"],
        LifecycleState.QUEUED: ["poll", "compensate", "escalate"],
        LifecycleState.RUNNING: ["poll", "compensate", "escalate"],
        LifecycleState.PARTIAL: ["finish", "compensate", "escalate"],
        LifecycleState.CANCELLED: ["compensate", "escalate"],
        LifecycleState.FAILED: ["compensate", "escalate"],
    }
    extra = {LifecycleState.PARTIAL: {"covered": "half"}, LifecycleState.FAILED: {"reason": "x"}}
    for state, actions in states.items():
        lifecycle = Lifecycle(state, operation, **extra.get(state, {}))  # type: ignore[arg-type]
        assert legal_next_actions(success, lifecycle) == tuple(NextAction(a) for a in actions)
    completed = Lifecycle.completed(operation, Evidence(EvidenceKind.QUERY, "GET /jobs/1"))
    assert legal_next_actions(success, completed) == (NextAction.FINISH,)
    assert legal_next_actions(Empty(), None) == (NextAction.FINISH,)
    assert legal_next_actions(transient, None) == (NextAction.RETRY, NextAction.ESCALATE)
    assert legal_next_actions(permanent, None) == (NextAction.ESCALATE,)


def test_a_lifecycle_carries_what_its_state_needs() -> None:
    with pytest.raises(ValueError, match="needs verified_by"):
        Lifecycle(LifecycleState.COMPLETED, Operation("j"))
    with pytest.raises(ValueError, match="carries no covered"):
        Lifecycle(LifecycleState.ACCEPTED, Operation("j"), covered="x")
    for state in (LifecycleState.ACCEPTED, LifecycleState.RUNNING, LifecycleState.CANCELLED):
        with pytest.raises(ValueError, match="carries no resource"):
            Lifecycle(state, Operation("j"), resource=Resource("r"))
    with pytest.raises(ValueError, match="carries no resource"):
        Lifecycle(LifecycleState.FAILED, Operation("j"), reason="x", resource=Resource("r"))
    assert Lifecycle(
        LifecycleState.PARTIAL, Operation("j"), covered="half", resource=Resource("r", "v2")
    ).resource == Resource("r", "v2")


def test_the_summary_follows_the_class() -> None:
    failure = AccessFailure(
        Failure(AccessFailureKind.SERVER_ERROR, True, "HTTP 503 Service Unavailable", 503)
    )
    assert envelope(failure).summary() == (
        "search: FAILED to get an answer from https://s.example/v1 (server_error, HTTP 503, "
        "exhausted after 1 attempt(s)): HTTP 503 Service Unavailable. The source's contents "
        "are unknown; nothing can be concluded from this call."
    )
    assert envelope(Empty()).summary() == (
        "search: https://s.example/v1 was reached and confirmed that nothing matches. This is "
        "a verified absence."
    )
    partial = Partial("x", Truncation(PartialKind.SIZE_CAP, "the first 1 bytes", "the rest"))
    assert envelope(partial).summary() == (
        "search: PARTIAL answer from https://s.example/v1 (size_cap): covered the first 1 "
        "bytes; dropped the rest. Do not treat it as the whole answer."
    )
    assert (
        envelope().summary() == "search: complete answer from https://s.example/v1 with 1 item(s)."
    )
    accepted = envelope(Success(None), lifecycle=Lifecycle.accepted(Operation("job-9")))
    assert accepted.summary() == (
        "search: https://s.example/v1 accepted the request; operation job-9 is accepted and has "
        "not completed yet. Poll its status before relying on the result."
    )
    for text in (envelope(failure).summary(),):
        for absence in ("no results", "not found", "nothing matches", "empty"):
            assert absence not in text


def test_the_mcp_rendering() -> None:
    failure = envelope(AccessFailure(Failure(AccessFailureKind.AUTH, False, "HTTP 401")))
    result = call_tool_result(failure)
    assert result["isError"] is True
    assert result["structuredContent"] == failure.to_dict()
    assert result["content"] == [
        {"type": "text", "text": failure.summary()},
        {"type": "text", "text": failure.to_json()},
    ]
    assert (
        call_tool_result(envelope(Partial("x", Truncation(PartialKind.SIZE_CAP, "a", "b"))))[
            "isError"
        ]
        is False
    )


def test_the_packaged_schema_is_the_specs() -> None:
    packaged = resources.files("candor").joinpath("envelope.v1.schema.json").read_text("utf-8")
    assert json.loads(packaged) == json.loads(SCHEMA.read_text("utf-8")), (
        "copy spec/v1/envelope.v1.schema.json to adapters/python/src/candor/"
    )
