"""The conformance vectors of ``spec/vectors/``, run through this adapter.

Every case is one test: a ``call`` case runs through :meth:`candor.Adapter.acall` on a fake
clock with a fixed jitter, and its envelope, ``tool.outcome`` events, ``tool.call`` span and
``tool.outcomes`` increment are compared with what the case expects, with the same matcher
semantics as the Rust runner (``adapters/rust/tests/vectors.rs``), and so are the log records the
call emitted as its events happened (``spec/vectors/README.md``); an ``envelope`` case is read
with :meth:`candor.Envelope.from_dict`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from candor import (
    Adapter,
    AttemptContext,
    Authority,
    BodyBroken,
    BodyEnd,
    BodySizeCap,
    Envelope,
    FixedJitter,
    HttpArrival,
    HttpClassifier,
    HttpExchange,
    HttpResponse,
    InvalidEnvelope,
    NotFound,
    RetryPolicy,
    TransportError,
    TransportErrorKind,
)
from candor.names import LIFECYCLE_EVENT, OUTCOME_EVENT, OUTCOMES_COUNTER, TOOL_CALL_SPAN, attr
from candor.testing import FakeClock
from candor.timestamps import parse_rfc3339_ns

VECTORS_DIR = Path(__file__).parent / ".." / ".." / ".." / "spec" / "vectors"
CONTRACT = VECTORS_DIR / ".." / "v1" / "contract.md"

Json = Any
"""A JSON value as :func:`json.load` returns it."""

CALL_FIELDS = {
    "kind",
    "id",
    "rules",
    "description",
    "tool",
    "target",
    "classifier",
    "policy",
    "attempt_timeout_ms",
    "deadline_ms",
    "jitter",
    "authority",
    "actor",
    "method",
    "idempotent",
    "idempotency_key",
    "trace_every_call",
    "start",
    "attempts",
    "expect",
}
ENVELOPE_FIELDS = {"kind", "id", "rules", "description", "json", "expect"}
CLASSIFIER_FIELDS = {
    "not_found",
    "items_at",
    "total_at",
    "total_header",
    "truncated_when",
    "has_more_at",
    "operation_id_at",
    "request_id_header",
    "scope",
}
STEP_FIELDS = {"after_ms", "response", "transport_error", "hang", "stall"}
RESPONSE_FIELDS = {"status", "headers", "body", "body_end"}
STALL_FIELDS = {"status", "headers", "body"}
TRANSPORT_FIELDS = {"kind", "message"}
EXPECT_FIELDS = {"envelope", "events", "span", "counter"}
POLICY_FIELDS = {
    "max_attempts",
    "initial_backoff_ms",
    "max_backoff_ms",
    "max_elapsed_ms",
    "retry_after_cap_ms",
}


@dataclass(frozen=True)
class Case:
    """One case of one vector file."""

    file: str
    data: dict[str, Json]

    @property
    def id(self) -> str:
        return str(self.data.get("id", "?"))


def load() -> list[Case]:
    """Every case of every vector file, in file order."""
    files = sorted(VECTORS_DIR.glob("*.json"))
    assert files, f"no vector files in {VECTORS_DIR}"
    cases: list[Case] = []
    for path in files:
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document.get("spec_version") == 1, path.name
        assert f"{document.get('area')}.json" == path.name, "a file is named by its area"
        cases.extend(Case(path.name, case) for case in document["cases"])
    return cases


CASES = load()


def test_case_ids_are_unique_and_every_case_names_a_rule() -> None:
    seen: set[str] = set()
    for case in CASES:
        assert case.id not in seen, f"{case.file}: {case.id} twice"
        seen.add(case.id)
        assert case.data.get("rules"), f"{case.file}: {case.id} names no rule"


def contract_rules() -> set[str]:
    """The rule ids of ``spec/v1/contract.md``: each written as ``**[ID]**`` where it starts."""
    text = CONTRACT.read_text(encoding="utf-8")
    return set(re.findall(r"\*\*\[([A-Z0-9-]+)\]\*\*", text))


def test_every_rule_of_the_contract_has_a_vector_and_every_vector_names_a_rule_of_it() -> None:
    rules = contract_rules()
    assert len(rules) > 20, f"only {len(rules)} rule ids in the contract"
    covered: set[str] = set()
    for case in CASES:
        for rule in case.data.get("rules", []):
            assert rule in rules, f"{case.file}: {case.id} names {rule}, which the contract lacks"
            covered.add(rule)
    assert not rules - covered, f"rules without a vector: {sorted(rules - covered)}"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_vector(case: Case) -> None:
    kind = case.data.get("kind")
    if kind == "call":
        errors = run_call(case.data)
    elif kind == "envelope":
        errors = run_envelope(case.data)
    else:
        errors = [f"unknown case kind {kind!r}"]
    assert not errors, f"{case.file} {case.id}:\n  " + "\n  ".join(errors)


# --- Setting a case up ---------------------------------------------------------------------


def unknown_fields(data: Mapping[str, Json], allowed: set[str], what: str) -> list[str]:
    return [f"unknown {what} field {key!r}" for key in data if key not in allowed]


def classifier(declared: dict[str, Json]) -> HttpClassifier:
    return HttpClassifier(
        NotFound(declared["not_found"]),
        items_at=declared.get("items_at"),
        total_at=declared.get("total_at"),
        total_header=declared.get("total_header", "x-total-count"),
        truncated_when=[(pointer, value) for pointer, value in declared.get("truncated_when", [])],
        has_more_at=tuple(declared["has_more_at"]) if "has_more_at" in declared else None,
        operation_id_at=declared.get("operation_id_at"),
        request_id_header=declared.get("request_id_header", "x-request-id"),
        scope=declared.get("scope"),
    )


def policy(declared: dict[str, Json]) -> RetryPolicy:
    def ms(key: str, default: int) -> timedelta:
        return timedelta(milliseconds=declared.get(key, default))

    return RetryPolicy(
        max_attempts=declared.get("max_attempts", 3),
        initial_backoff=ms("initial_backoff_ms", 100),
        max_backoff=ms("max_backoff_ms", 5_000),
        max_elapsed=ms("max_elapsed_ms", 30_000),
        retry_after_cap=ms("retry_after_cap_ms", 30_000),
    )


def body_end(declared: Json) -> BodyEnd | None:
    if declared in (None, "complete"):
        return None
    if isinstance(declared, dict) and set(declared) == {"size_cap"}:
        return BodySizeCap(declared["size_cap"])
    if isinstance(declared, dict) and set(declared) == {"broken"}:
        return BodyBroken(declared["broken"])
    raise ValueError(f"unknown body_end {declared!r}")


@dataclass
class Script:
    """What the scripted tool plays, and what it could not play."""

    steps: deque[dict[str, Json]]
    clock: FakeClock
    errors: list[str] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    """The idempotency key each attempt was given."""

    async def attempt(self, context: AttemptContext) -> HttpExchange:
        self.keys.append(context.idempotency_key)
        if not self.steps:
            message = f"the adapter made attempt {context.number} but the case lists fewer"
            self.errors.append(message)
            return TransportError(TransportErrorKind.PROTOCOL, message)
        step = self.steps.popleft()
        if "hang" in step:
            await asyncio.get_running_loop().create_future()  # never answers
        try:
            if "stall" in step:
                await self.stall(step["stall"], context)
            self.clock.advance(timedelta(milliseconds=step["after_ms"]))
            if "response" in step:
                response = step["response"]
                return HttpResponse(
                    response["status"],
                    [(name, value) for name, value in response.get("headers", [])],
                    response.get("body", "").encode("utf-8"),
                    body_end(response.get("body_end")),
                    received_at=self.clock.wall_ns(),
                )
            error = step["transport_error"]
            return TransportError(TransportErrorKind(error["kind"]), error["message"])
        except (KeyError, ValueError, TypeError) as err:
            message = f"step {step!r} cannot be played: {err!r}"
            self.errors.append(message)
            return TransportError(TransportErrorKind.PROTOCOL, message)

    async def stall(self, declared: dict[str, Json], context: AttemptContext) -> None:
        """The status, headers and body arrive at once, as a client records them; then nothing.

        The adapter's timer ends the attempt, with what was recorded.
        """
        arrival = context.receiving(
            HttpArrival(
                declared["status"],
                [(name, value) for name, value in declared.get("headers", [])],
                received_at=self.clock.wall_ns(),
            )
        )
        arrival.add(declared.get("body", "").encode("utf-8"))
        await asyncio.get_running_loop().create_future()  # the rest never arrives


def run_call(case: dict[str, Json]) -> list[str]:
    errors = unknown_fields(case, CALL_FIELDS, "case")
    errors += unknown_fields(case["classifier"], CLASSIFIER_FIELDS, "classifier")
    errors += unknown_fields(case.get("policy", {}), POLICY_FIELDS, "policy")
    errors += unknown_fields(case["expect"], EXPECT_FIELDS, "expect")
    errors += unknown_fields(case.get("authority") or {}, {"principal", "scope"}, "authority")
    for step in case["attempts"]:
        errors += unknown_fields(step, STEP_FIELDS, "step")
        errors += unknown_fields(step.get("response", {}), RESPONSE_FIELDS, "response")
        errors += unknown_fields(step.get("stall", {}), STALL_FIELDS, "stall")
        errors += unknown_fields(step.get("transport_error", {}), TRANSPORT_FIELDS, "transport")
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    try:
        clock = FakeClock(parse_rfc3339_ns(case["start"]))
        authority = case.get("authority")
        adapter = Adapter(
            case["tool"],
            case["target"],
            classifier(case["classifier"]),
            retry=policy(case.get("policy", {})),
            attempt_timeout=timedelta(milliseconds=case.get("attempt_timeout_ms", 10_000)),
            deadline=timedelta(milliseconds=case.get("deadline_ms", 30_000)),
            authority=None if authority is None else Authority(**authority),
            actor=case.get("actor"),
            method=case.get("method", "GET"),
            idempotent=case.get("idempotent"),
            idempotency_key=case.get("idempotency_key", False),
            trace_every_call=case.get("trace_every_call", False),
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            jitter=FixedJitter(case["jitter"]),
            clock=clock,
        )
    except (KeyError, ValueError, TypeError) as err:
        return [*errors, f"the case cannot be set up: {err!r}"]
    script = Script(deque(case["attempts"]), clock)
    envelope = asyncio.run(adapter.acall(script.attempt))
    errors += script.errors
    if script.steps:
        errors.append(f"{len(script.steps)} listed attempt(s) were never made")
    errors += idempotency_keys(script.keys, case.get("idempotency_key", False))
    expect = case["expect"]
    generated_ids.clear()
    compare_envelope(envelope, expect["envelope"], errors)
    compare_telemetry(expect, spans, reader, errors)
    compare_logs(expect, spans, logs, errors)
    if len(set(generated_ids)) > 1:
        errors.append(f"the ids matched by $generated_id differ within the case: {generated_ids}")
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()
    return errors


# --- Comparing what the adapter made -------------------------------------------------------


def idempotency_keys(keys: list[str | None], made: bool) -> list[str]:
    """What is wrong with the keys the attempts were given: one key for all when ``made``."""
    if not made:
        return [f"attempts were given idempotency keys: {keys}"] if any(keys) else []
    if len(set(keys)) != 1:
        return [f"the attempts were not given one idempotency key: {keys}"]
    key = keys[0]
    if key is None or GENERATED_ID.fullmatch(key) is None:
        return [f"{key!r} is not an idempotency key the adapter made"]
    return []


def compare_envelope(envelope: Envelope, expected: Json, errors: list[str]) -> None:
    actual = json.loads(envelope.to_json())
    adapter = actual.get("provenance", {}).pop("adapter", None)
    if not isinstance(adapter, str) or not adapter:
        errors.append(f"provenance.adapter must name the adapter: {adapter!r}")
    compare(expected, actual, "envelope", errors)


def rfc3339(ns: int | None) -> str | None:
    if ns is None:
        return None
    at = datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000 // 1000:06d}Z"


def attributes(values: Mapping[str, object] | None) -> dict[str, Json]:
    out: dict[str, Json] = {}
    for key, value in (values or {}).items():
        out[key] = value if isinstance(value, str | bool | int | float) else str(value)
    return out


def span_json(span: ReadableSpan) -> dict[str, Json]:
    kinds = {
        SpanKind.CLIENT: "client",
        SpanKind.SERVER: "server",
        SpanKind.PRODUCER: "producer",
        SpanKind.CONSUMER: "consumer",
        SpanKind.INTERNAL: "internal",
    }
    status: dict[str, Json]
    if span.status.status_code is StatusCode.ERROR:
        status = {"code": "error", "description": span.status.description}
    elif span.status.status_code is StatusCode.OK:
        status = {"code": "ok"}
    else:
        status = {"code": "unset"}
    return {
        "name": span.name,
        "kind": kinds[span.kind],
        "start": rfc3339(span.start_time),
        "end": rfc3339(span.end_time),
        "status": status,
        "attributes": attributes(span.attributes),
    }


def compare_telemetry(
    expect: dict[str, Json],
    spans: InMemorySpanExporter,
    reader: InMemoryMetricReader,
    errors: list[str],
) -> None:
    finished = spans.get_finished_spans()
    calls = [span for span in finished if span.name == TOOL_CALL_SPAN]
    if len(finished) != len(calls):
        errors.append(f"{len(finished) - len(calls)} span(s) other than {TOOL_CALL_SPAN}")
    provenance = expect["envelope"]["provenance"]
    events = []
    for call in calls:
        for event in call.events:
            event_attributes = attributes(event.attributes)
            if event.name == OUTCOME_EVENT:
                check_provenance(event_attributes, provenance, errors)
            events.append(
                {
                    "name": event.name,
                    "time": rfc3339(event.timestamp),
                    "attributes": event_attributes,
                }
            )
    compare(expect["events"], events, "events", errors)
    span: Json = None
    if len(calls) == 1:
        span = span_json(calls[0])
    elif len(calls) > 1:
        errors.append(f"{len(calls)} tool.call spans for one call")
    compare(expect.get("span"), span, "span", errors)
    compare(expect["counter"], counter(reader, errors), "counter", errors)


def check_provenance(
    event_attributes: dict[str, Json], provenance: Json, errors: list[str]
) -> None:
    """Checks and removes a ``tool.outcome`` event's provenance attributes.

    The cases do not list them (``spec/vectors/README.md``): they equal the expected envelope's
    provenance, the adapter any non-empty text and the actor absent when it has none.
    """
    for name, key in (
        (attr.PROVENANCE_SOURCE_SYSTEM, "source_system"),
        (attr.PROVENANCE_ACTOR, "actor"),
    ):
        actual = event_attributes.pop(name, None)
        if not same(provenance.get(key), actual):
            errors.append(
                f"{name}: {json.dumps(actual)}, the envelope's {key} is "
                f"{json.dumps(provenance.get(key))}"
            )
    adapter = event_attributes.pop(attr.PROVENANCE_ADAPTER, None)
    if not isinstance(adapter, str) or not adapter:
        errors.append(f"{attr.PROVENANCE_ADAPTER} must name the adapter: {adapter!r}")


def compare_logs(
    expect: dict[str, Json],
    spans: InMemorySpanExporter,
    logs: InMemoryLogRecordExporter,
    errors: list[str],
) -> None:
    """The log records the call emitted (rule ``TELEMETRY-MOMENT``).

    They are exactly the expected events that happen before the call ends (``tool.outcome``
    with the action ``retry``) and every ``tool.lifecycle`` event, in order, with the same name,
    time and attributes, each in the call's span.
    """
    expected = [
        event
        for event in expect["events"]
        if event["name"] == LIFECYCLE_EVENT or event["attributes"].get(attr.RETRY_ACTION) == "retry"
    ]
    calls = [span for span in spans.get_finished_spans() if span.name == TOOL_CALL_SPAN]
    context = calls[0].get_span_context() if calls else None
    span_ids = None if context is None else (context.trace_id, context.span_id)
    provenance = expect["envelope"]["provenance"]
    records = []
    for emitted in logs.get_finished_logs():
        record = emitted.log_record
        ids = (record.trace_id, record.span_id)
        if ids != span_ids:
            errors.append(f"a log record is not in the call's span: {ids}, the span {span_ids}")
        record_attributes = attributes(record.attributes)
        if record.event_name == OUTCOME_EVENT:
            check_provenance(record_attributes, provenance, errors)
        records.append(
            {
                "name": record.event_name,
                "time": rfc3339(record.timestamp),
                "attributes": record_attributes,
            }
        )
    compare(expected, records, "log records", errors)


def counter(reader: InMemoryMetricReader, errors: list[str]) -> Json:
    """The call's one increment of ``tool.outcomes``: the one attribute set not at 0."""
    data = reader.get_metrics_data()
    counted = []
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != OUTCOMES_COUNTER:
                    continue
                if not isinstance(metric.data, Sum):
                    errors.append(f"{OUTCOMES_COUNTER} is not a sum")
                    continue
                if not metric.data.is_monotonic:
                    errors.append(f"{OUTCOMES_COUNTER} is not monotonic")
                for point in metric.data.data_points:
                    if point.value != 0:
                        counted.append(
                            {
                                "name": metric.name,
                                "unit": metric.unit,
                                "attributes": attributes(point.attributes),
                                "value": point.value,
                            }
                        )
    if len(counted) == 1:
        return counted[0]
    if not counted:
        errors.append(f"nothing counted on {OUTCOMES_COUNTER}")
    else:
        errors.append(f"{len(counted)} attribute sets counted: {counted!r}")
    return None


def run_envelope(case: dict[str, Json]) -> list[str]:
    errors = unknown_fields(case, ENVELOPE_FIELDS, "case")
    errors += unknown_fields(case["expect"], {"valid", "error"}, "expect")
    expect = case["expect"]
    try:
        envelope = Envelope.from_dict(case["json"])
    except InvalidEnvelope as err:
        if expect.get("valid"):
            errors.append(f"refused a valid envelope: {err}")
        elif expect.get("error") != err.rule:
            errors.append(f"refused as {err.rule} ({err}), expected {expect.get('error')!r}")
        return errors
    if not expect.get("valid"):
        errors.append("read an envelope the contract refuses")
    else:
        compare(case["json"], json.loads(envelope.to_json()), "written again", errors)
    return errors


# --- The comparison, as the Rust runner makes it -------------------------------------------

MATCHER_KEYS = {"$contains", "$excludes", "$max_chars", "$any", "$generated_id"}

GENERATED_ID = re.compile(r"candor-[0-9a-f]{32}")
"""An id an adapter made (rule ``HTTP-202``)."""

generated_ids: list[str] = []
"""The texts ``$generated_id`` matched in the case being compared, which must all be one id."""


def is_matcher(value: Json) -> bool:
    return isinstance(value, dict) and bool(value) and all(key.startswith("$") for key in value)


def same(a: Json, b: Json) -> bool:
    """JSON equality: an integer is not a float, a boolean is not a number."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    return cast(bool, a == b)


def compare(expected: Json, actual: Json, path: str, errors: list[str]) -> None:
    if is_matcher(expected):
        match_text(expected, actual, path, errors)
    elif isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            at = f"{path}.{key}"
            if key in expected and key in actual:
                compare(expected[key], actual[key], at, errors)
            elif key in expected:
                errors.append(f"{at}: missing, expected {json.dumps(expected[key])}")
            else:
                errors.append(f"{at}: unexpected {json.dumps(actual[key])}")
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            compare(want, got, f"{path}[{index}]", errors)
    elif not same(expected, actual):
        errors.append(f"{path}: expected {json.dumps(expected)}, got {json.dumps(actual)}")


def match_text(matcher: dict[str, Json], actual: Json, path: str, errors: list[str]) -> None:
    if not isinstance(actual, str):
        errors.append(f"{path}: expected a text, got {json.dumps(actual)}")
        return

    def words(key: str) -> list[str]:
        listed = matcher.get(key)
        return [w for w in listed if isinstance(w, str)] if isinstance(listed, list) else []

    errors.extend(f"{path}: unknown matcher {key}" for key in matcher if key not in MATCHER_KEYS)
    errors.extend(
        f"{path}: {actual!r} does not contain {word!r}"
        for word in words("$contains")
        if word not in actual
    )
    errors.extend(
        f"{path}: {actual!r} contains {word!r}" for word in words("$excludes") if word in actual
    )
    if matcher.get("$generated_id") is True:
        if GENERATED_ID.fullmatch(actual) is None:
            errors.append(f"{path}: {actual!r} is not an id the adapter made")
        generated_ids.append(actual)
    limit = matcher.get("$max_chars")
    if isinstance(limit, int) and not isinstance(limit, bool) and len(actual) > limit:
        errors.append(f"{path}: {len(actual)} characters, at most {limit} expected")
