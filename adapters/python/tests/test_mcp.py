"""The MCP integration: a real MCP server and client connected in-process over the SDK's
memory streams."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import anyio
from mcp import ClientSession, MCPError
from mcp.server.mcpserver import MCPServer
from mcp.shared.memory import create_client_server_memory_streams
from mcp.types import CallToolResult, TextContent

from candor import (
    AccessFailure,
    AccessFailureKind,
    Adapter,
    Empty,
    Envelope,
    NextAction,
    RetryPolicy,
    Success,
)
from candor.integrations.mcp import McpExchange, McpToolClassifier, call_tool

from .conftest import Telemetry

T = TypeVar("T")
FAST = RetryPolicy(
    max_attempts=2, initial_backoff=timedelta(milliseconds=1), max_backoff=timedelta(milliseconds=2)
)

server = MCPServer("catalogue")


@server.tool()
def search(q: str) -> dict[str, list[str]]:
    """Finds items; "none" finds nothing."""
    return {"items": [] if q == "none" else [f"{q}-1", f"{q}-2"]}


@server.tool()
def fails(q: str) -> CallToolResult:
    """Answers with an error result."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"quota exceeded for {q}; token=abc123")],
        is_error=True,
    )


@server.tool()
def raises(q: str) -> str:
    """Raises."""
    raise RuntimeError(f"cannot search {q}")


@server.tool()
def rejects(q: str) -> str:
    """Answers with a JSON-RPC error."""
    raise MCPError(-32602, f"q={q!r} is not a query")


@server.tool()
async def slow(q: str) -> str:
    """Never answers: it waits on an event nothing sets, until the call is cancelled."""
    await anyio.Event().wait()
    return q


def with_session(
    run: Callable[[ClientSession], Awaitable[T]], *, close_transport: bool = False
) -> T:
    """Runs ``run`` with a client session connected to the server in-process."""

    async def main() -> T:
        # The SDK's own in-memory transport runs the server's low-level half the same way.
        lowlevel = server._lowlevel_server
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as group,
        ):
            group.start_soon(
                lowlevel.run,
                server_streams[0],
                server_streams[1],
                lowlevel.create_initialization_options(),
            )
            async with ClientSession(*client_streams) as session:
                await session.initialize()
                if close_transport:
                    await server_streams[1].aclose()
                    await server_streams[0].aclose()
                result = await run(session)
            group.cancel_scope.cancel()
        return result

    return asyncio.run(main())


def tool_adapter(
    telemetry: Telemetry, classifier: McpToolClassifier | None = None, **settings: object
) -> Adapter[McpExchange]:
    return Adapter(
        "catalogue.search",
        "mcp://catalogue",
        classifier or McpToolClassifier(items_at="/items"),
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        **{"retry": FAST, **settings},  # type: ignore[arg-type]
    )


def call(adapter: Adapter[McpExchange], name: str, q: str, **options: bool) -> Envelope:
    return with_session(lambda session: call_tool(adapter, session, name, {"q": q}), **options)


def test_a_result_is_a_success_with_its_items(telemetry: Telemetry) -> None:
    envelope = call(tool_adapter(telemetry), "search", "cats")
    assert isinstance(envelope.outcome, Success)
    assert envelope.outcome.payload == {"items": ["cats-1", "cats-2"]}
    assert envelope.outcome.extent.items == 2
    assert envelope.provenance.source_system == "catalogue"


def test_an_empty_result_is_empty_only_when_the_tool_declares_it(telemetry: Telemetry) -> None:
    undeclared = call(tool_adapter(telemetry), "search", "none")
    assert isinstance(undeclared.outcome, Success)
    assert undeclared.outcome.extent.items == 0
    assert "confirmed" not in undeclared.summary()
    declared = call(
        tool_adapter(telemetry, McpToolClassifier(empty_means_absent=True, items_at="/items")),
        "search",
        "none",
    )
    assert isinstance(declared.outcome, Empty)
    assert "verified absence" in declared.summary()


def test_an_error_result_is_a_permanent_access_failure(telemetry: Telemetry) -> None:
    envelope = call(tool_adapter(telemetry), "fails", "cats")
    assert isinstance(envelope.outcome, AccessFailure)
    failure = envelope.outcome.failure
    assert failure.kind is AccessFailureKind.SERVER_ERROR
    assert not failure.retryable
    assert failure.error_type == "tool_error"
    assert "quota exceeded for cats" in failure.message
    assert "abc123" not in failure.message
    assert len(envelope.attempts) == 1
    [span] = telemetry.spans()
    assert span.status.description == failure.message


def test_a_tool_that_raises_is_an_access_failure(telemetry: Telemetry) -> None:
    envelope = call(tool_adapter(telemetry), "raises", "cats")
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.error_type == "tool_error"


def test_a_json_rpc_error_is_an_access_failure_by_its_code(telemetry: Telemetry) -> None:
    envelope = call(tool_adapter(telemetry), "rejects", "")
    assert isinstance(envelope.outcome, AccessFailure)
    failure = envelope.outcome.failure
    assert failure.kind is AccessFailureKind.CLIENT_ERROR
    assert failure.error_type == "-32602"
    assert failure.message.startswith("MCP error -32602: ")
    assert envelope.next_actions == (NextAction.ESCALATE,)


def test_a_closed_transport_is_a_transient_connect_failure(telemetry: Telemetry) -> None:
    envelope = call(tool_adapter(telemetry), "search", "cats", close_transport=True)
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.CONNECT
    assert envelope.outcome.failure.retryable
    assert len(envelope.attempts) == 2


def test_a_slow_tool_times_out(telemetry: Telemetry) -> None:
    adapter = tool_adapter(
        telemetry, attempt_timeout=timedelta(milliseconds=300), retry=RetryPolicy.no_retry()
    )
    envelope = call(adapter, "slow", "cats")
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.TIMEOUT
    assert telemetry.outcomes()["access_failure"] == 1


def test_a_declared_collection_that_is_missing_is_a_protocol_failure() -> None:
    result = CallToolResult(content=[], structured_content={"rows": []})
    outcome = McpToolClassifier(items_at="/items").classify(result).outcome
    assert isinstance(outcome, AccessFailure)
    assert outcome.failure.kind is AccessFailureKind.PROTOCOL


def test_unstructured_content_is_the_payload() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="hello")])
    outcome = McpToolClassifier().classify(result).outcome
    assert isinstance(outcome, Success)
    assert outcome.payload == [{"type": "text", "text": "hello"}]
