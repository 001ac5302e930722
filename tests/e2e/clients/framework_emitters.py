"""Real LangChain tool calls traced by two third-party instrumentations, none of which knows Candor.

Reads a JSON spec on stdin: ``endpoint`` (the collector's OTLP/gRPC address) and ``resource``
(the resource attributes). Then runs the same LangChain round twice, offline, each time with its
own ``TracerProvider`` exporting there with the official OpenTelemetry SDK, and its own
``service.name``: the spec's with ``-openinference`` or ``-openllmetry`` appended.

- ``openinference``: Arize's ``openinference-instrumentation-langchain``
  (``LangChainInstrumentor``);
- ``openllmetry``: Traceloop's ``opentelemetry-instrumentation-langchain``
  (``LangchainInstrumentor``), with content tracing on (``TRACELOOP_TRACE_CONTENT=true``) so the
  tools' results are recorded.

A round is a chain (``RunnableLambda`` named ``tool_round``) in which a fake chat model
(``FakeMessagesListChatModel``, no real model) answers with four tool calls, each then run through
LangChain's tool-calling path (``tool.invoke(tool_call)``), so every call has its id
(``{phase}-{tool}-{n}``):

- ``lookup`` twice, answering;
- ``broken`` once, raising ``ConnectionError`` (caught here);
- ``guarded`` once, raising ``ToolException`` with ``handle_tool_error=True``, so LangChain returns
  a ``ToolMessage`` with ``status="error"`` and the tool run ends without an error.

Prints, per phase, the service name, the number of calls per tool and the call ids, as JSON on
stdout.

With ``CANDOR_DUMP_SPANS=/dir/name.json`` in the environment, nothing is exported: each phase's
spans are kept by the SDK's ``InMemorySpanExporter`` and written as JSON to
``/dir/name-{phase}.json`` (``endpoint`` may then be left out of the spec).
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Instrumentor(Protocol):
    """What both instrumentors share (OpenTelemetry's ``BaseInstrumentor``, which mypy cannot
    see: its module opts out of type checking)."""

    def instrument(self, **kwargs: Any) -> None: ...

    def uninstrument(self, **kwargs: Any) -> None: ...


PHASES: dict[str, Callable[[], Instrumentor]] = {
    "openinference": LangChainInstrumentor,
    "openllmetry": LangchainInstrumentor,
}


def lookup(query: str) -> str:
    """Looks a query up."""
    return f"found {query}"


def broken(query: str) -> str:
    """Cannot reach its backend."""
    raise ConnectionError(f"search backend down for {query}")


def guarded(query: str) -> str:
    """Fails in a way LangChain hands back to the model."""
    raise ToolException(f"quota exceeded for {query}")


TOOLS: dict[str, BaseTool] = {
    "lookup": StructuredTool.from_function(lookup),
    "broken": StructuredTool.from_function(broken),
    "guarded": StructuredTool.from_function(guarded, handle_tool_error=True),
}


def planned_calls(phase: str) -> list[ToolCall]:
    """The calls the fake model asks for: `lookup` twice, then `broken`, then `guarded`."""
    order = ["lookup", "lookup", "broken", "guarded"]
    seen: Counter[str] = Counter()
    calls = []
    for name in order:
        seen[name] += 1
        calls.append(
            ToolCall(
                name=name,
                args={"query": f"q{seen[name]}"},
                id=f"{phase}-{name}-{seen[name]}",
                type="tool_call",
            )
        )
    return calls


def check(call: ToolCall, result: ToolMessage) -> None:
    """Fails the run if LangChain did not answer as this script expects."""
    expected = "error" if call["name"] == "guarded" else "success"
    if result.status != expected or result.tool_call_id != call["id"]:
        raise SystemExit(f"unexpected result of {call!r}: {result!r}")


def tool_round(phase: str) -> Callable[[str], list[str]]:
    """The chain body: asks the fake model, then runs each tool call it returns."""
    model = FakeMessagesListChatModel(
        responses=[AIMessage(content="", tool_calls=planned_calls(phase))]
    )

    def run(question: str) -> list[str]:
        answer = model.invoke(question)
        if not isinstance(answer, AIMessage):
            raise SystemExit(f"unexpected model answer: {answer!r}")
        ran = []
        for call in answer.tool_calls:
            try:
                result = TOOLS[call["name"]].invoke(call)
            except ConnectionError:
                if call["name"] != "broken":
                    raise
            else:
                if not isinstance(result, ToolMessage):
                    raise SystemExit(f"unexpected result of {call!r}: {result!r}")
                check(call, result)
            ran.append(str(call["id"]))
        return ran

    return run


def span_json(span: ReadableSpan) -> dict[str, Any]:
    """One finished span, its attribute values with their JSON types (str, int, bool, list)."""
    context = span.context
    if context is None:
        raise SystemExit(f"span without context: {span.name}")
    return {
        "name": span.name,
        "kind": span.kind.name,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "attributes": dict(span.attributes or {}),
        "events": [
            {"name": event.name, "attributes": dict(event.attributes or {})}
            for event in span.events
        ],
        "resource": dict(span.resource.attributes),
    }


def dump(path: Path, spans: Sequence[ReadableSpan]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ordered = sorted(spans, key=lambda span: span.start_time or 0)
    path.write_text(json.dumps([span_json(span) for span in ordered], indent=2) + "\n")


def run_phase(phase: str, spec: dict[str, Any], dump_to: Path | None) -> dict[str, Any]:
    """Runs one round under one instrumentation, with its own provider, flushed and shut down."""
    resource = dict(spec["resource"])
    service = f"{resource.get('service.name', 'framework-emitters')}-{phase}"
    resource["service.name"] = service
    provider = TracerProvider(resource=Resource.create(resource))
    memory = InMemorySpanExporter() if dump_to is not None else None
    if memory is None:
        exporter = OTLPSpanExporter(endpoint=spec["endpoint"], insecure=True)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    else:
        provider.add_span_processor(SimpleSpanProcessor(memory))

    instrumentor = PHASES[phase]()
    instrumentor.instrument(tracer_provider=provider)
    try:
        chain = RunnableLambda(tool_round(phase), name="tool_round")
        ran = chain.invoke("look it up")
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    provider.shutdown()

    if dump_to is not None and memory is not None:
        dump(
            dump_to.with_name(f"{dump_to.stem}-{phase}{dump_to.suffix}"),
            memory.get_finished_spans(),
        )
    counts = Counter(call_id.removeprefix(f"{phase}-").rsplit("-", 1)[0] for call_id in ran)
    return {"service": service, "calls": dict(counts), "call_ids": ran}


def main() -> None:
    spec = json.load(sys.stdin)
    # OpenLLMetry records tool arguments and results only with content tracing on: its default,
    # set here so that an inherited TRACELOOP_TRACE_CONTENT=false cannot turn it off.
    os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
    dump_env = os.environ.get("CANDOR_DUMP_SPANS")
    dump_to = Path(dump_env) if dump_env else None
    answer = {phase: run_phase(phase, spec, dump_to) for phase in PHASES}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
