"""Real emitters of standard tool-call telemetry, none of which knows Candor.

Reads a JSON spec on stdin: ``endpoint`` (the collector's OTLP/gRPC address) and ``resource``
(the resource attributes). Then, with the official OpenTelemetry SDK exporting there:

- a pydantic-ai agent (``FunctionModel``, offline, ``Agent.instrument_all``) runs two tools in
  parallel, one of which raises ``ConnectionError`` while the other is still running (and is
  cancelled), then a tool that fetches four URLs with ``httpx2``;
- ``opentelemetry-instrumentation-httpx`` traces those requests, capturing the ``X-Request-Id``
  response header, against a local server that answers 200, 401 and 500 (with the request id
  ``req-{status}``), and against a closed port;
- an MCP client and server of the ``mcp`` SDK, in one process, call a tool that answers and
  one that returns ``isError: true``.

Prints the local server's port and the closed port as JSON on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
from mcp_tools import call_both, tools_server
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


class StatusHandler(BaseHTTPRequestHandler):
    """Answers `/{status}/...` with that status."""

    def do_GET(self) -> None:
        status = int(self.path.strip("/").split("/")[0])
        self.send_response(status)
        self.send_header("x-request-id", f"req-{status}")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: stdout carries the answer."""


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def first_run(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for `lookup` and `slow` at once."""
    del messages, info
    return ModelResponse(
        parts=[
            ToolCallPart("lookup", {}, tool_call_id="c-lookup"),
            ToolCallPart("slow", {}, tool_call_id="c-slow"),
        ]
    )


def fetching(urls: list[str]) -> FunctionModel:
    """Asks for `fetch` of each URL, one call at a time, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        asked = sum(1 for message in messages if isinstance(message, ModelResponse))
        if asked < len(urls):
            return ModelResponse(
                parts=[ToolCallPart("fetch", {"url": urls[asked]}, tool_call_id=f"c-fetch-{asked}")]
            )
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


async def agent_calls(base: str, closed: str) -> None:
    slow_started = asyncio.Event()
    never = asyncio.Event()
    agent = Agent(FunctionModel(first_run))

    @agent.tool_plain
    async def lookup() -> str:
        """Fails while `slow` still runs."""
        await slow_started.wait()
        raise ConnectionError("search backend down")

    @agent.tool_plain
    async def slow() -> str:
        """Runs until it is cancelled."""
        slow_started.set()
        await never.wait()
        return "never"

    with contextlib.suppress(ConnectionError):
        await agent.run("look it up")

    fetcher = Agent(
        fetching([f"{base}/200/a", f"{base}/401/b?token=abc", f"{base}/500/c", f"{closed}/d"])
    )

    @fetcher.tool_plain
    async def fetch(url: str) -> str:
        """Fetches one URL; a refused connection raises."""
        async with httpx2.AsyncClient() as client:
            response = await client.get(url)
            return str(response.status_code)

    with contextlib.suppress(httpx2.ConnectError):
        await fetcher.run("fetch them")


async def mcp_calls() -> None:
    await call_both(tools_server())


def main() -> None:
    spec = json.load(sys.stdin)
    provider = TracerProvider(resource=Resource.create(spec["resource"]))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=spec["endpoint"], insecure=True))
    )
    trace.set_tracer_provider(provider)
    os.environ["OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE"] = "x-request-id"
    HTTPX2ClientInstrumentor().instrument()
    Agent.instrument_all()

    server = ThreadingHTTPServer(("127.0.0.1", 0), StatusHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    http_port = server.server_address[1]
    closed = closed_port()
    asyncio.run(agent_calls(f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{closed}"))
    asyncio.run(mcp_calls())
    server.shutdown()
    provider.shutdown()
    json.dump({"http_port": http_port, "closed_port": closed}, sys.stdout)


if __name__ == "__main__":
    main()
