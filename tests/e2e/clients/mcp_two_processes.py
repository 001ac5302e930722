"""An MCP client and server of the ``mcp`` SDK in two processes, each exporting its own spans.

Reads a JSON spec on stdin: ``endpoint`` (the collector's OTLP/gRPC address), ``client`` and
``server`` (each process's resource attributes). The client launches this file again as the
server, over standard input and output, and calls a tool that answers and one that returns
``isError: true``. The SDK traces both sides (a CLIENT span ``MCP send tools/call {tool}`` and
the server's SERVER span ``tools/call {tool}`` under it, through the trace context the client
puts in the request's ``_meta``).

The server exports each span as it ends, before it answers; the client exports its spans when
it is done. So the server's spans of a call reach the collector in an earlier request than the
client's, from another service.

Prints ``{}`` on stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import StdioServerParameters
from mcp_tools import call_both, tools_server
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

SERVE = "serve"


def traced(resource: dict[str, Any], processor: SpanProcessor) -> TracerProvider:
    """Installs a tracer provider for this process's resource, exporting through `processor`."""
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def serve(endpoint: str, resource: dict[str, Any]) -> None:
    """The server: two tools, over stdio, each span exported as it ends."""
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    provider = traced(resource, SimpleSpanProcessor(exporter))
    server = tools_server()
    server.run("stdio")
    provider.shutdown()


async def call(spec: dict[str, Any]) -> None:
    """The client: launches the server and calls both tools once."""
    server = StdioServerParameters(
        command=sys.executable,
        args=[__file__, SERVE, spec["endpoint"], json.dumps(spec["server"])],
    )
    await call_both(server)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == SERVE:
        serve(sys.argv[2], json.loads(sys.argv[3]))
        return
    spec = json.load(sys.stdin)
    exporter = OTLPSpanExporter(endpoint=spec["endpoint"], insecure=True)
    provider = traced(spec["client"], BatchSpanProcessor(exporter))
    asyncio.run(call(spec))
    provider.shutdown()
    print(json.dumps({}))


if __name__ == "__main__":
    main()
