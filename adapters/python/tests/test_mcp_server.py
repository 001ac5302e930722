"""The MCP server tools: a real MCPServer and the SDK's own client, connected in-process, the
structured content validated against the output schema the tool declared."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from jsonschema.validators import validator_for
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent

from candor import AccessFailure, AccessFailureKind, Adapter, Envelope, RetryPolicy
from candor.integrations.mcp import McpExchange, McpToolClassifier, call_tool
from candor.integrations.mcp_server import envelope_tool, tool_result
from candor.mcp_result import output_schema

from .outcomes import OUTCOMES, answered, answered_async

T = TypeVar("T")


def search(query: str) -> Envelope:
    """Searches the catalogue; the query names the class the call ends in."""
    return answered(OUTCOMES[query])


async def search_async(query: str, ctx: Context) -> Envelope:
    """Searches the catalogue asynchronously."""
    return await answered_async(OUTCOMES[query])


def broken(query: str) -> Envelope:
    """Returns a list."""
    return []  # type: ignore[return-value]


server = MCPServer(
    "catalogue",
    tools=[
        envelope_tool(search),
        envelope_tool(search_async, name="find", title="Find", description="Finds items."),
        envelope_tool(broken),
    ],
)


def connected(run: Callable[[Client], Awaitable[T]]) -> T:
    """Runs ``run`` with the SDK's client connected to the server in-process."""

    async def main() -> T:
        async with Client(server) as client:
            return await run(client)

    return asyncio.run(main())


def called(name: str, query: str) -> tuple[CallToolResult, dict[str, Any]]:
    """The result of the tool ``name``, and the output schema the server declared for it."""

    async def run(client: Client) -> tuple[CallToolResult, dict[str, Any]]:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool(name, {"query": query})
        assert isinstance(result, CallToolResult)
        # The SDK validates results that are not errors itself; an error result is validated
        # here, with the SDK's own check.
        await client.session.validate_tool_result(name, result)
        schema = listed[name].output_schema
        assert schema is not None
        return result, schema

    return connected(run)


def texts(result: CallToolResult) -> list[str]:
    assert all(isinstance(block, TextContent) for block in result.content)
    return [block.text for block in result.content if isinstance(block, TextContent)]


def test_the_tools_declare_the_envelope_schema() -> None:
    async def run(client: Client) -> dict[str, Any]:
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = connected(run)
    assert set(tools) == {"search", "find", "broken"}
    for tool in tools.values():
        assert tool.output_schema == output_schema()
        assert tool.input_schema["properties"] == {"query": {"title": "Query", "type": "string"}}
    assert tools["search"].description == (
        "Searches the catalogue; the query names the class the call ends in."
    )
    assert (tools["find"].title, tools["find"].description) == ("Find", "Finds items.")


@pytest.mark.parametrize("tool", ["search", "find"])
@pytest.mark.parametrize("name", OUTCOMES)
def test_the_result_is_the_envelope_with_its_summary_first(tool: str, name: str) -> None:
    result, schema = called(tool, name)
    structured = result.structured_content
    validator = validator_for(schema)(schema)
    assert list(validator.iter_errors(structured)) == []
    envelope = Envelope.from_dict(structured)
    assert envelope.outcome_class.value == name
    summary, serialised = texts(result)
    assert summary == envelope.summary()
    assert json.loads(serialised) == structured
    assert serialised == envelope.to_json()
    assert result.is_error is (name == "access_failure")


def test_an_access_failure_is_an_error_result() -> None:
    result, _ = called("search", "access_failure")
    assert result.is_error
    summary = texts(result)[0]
    assert summary.startswith("catalogue.search: FAILED to get an answer from ")
    assert "The source's contents are unknown" in summary
    assert result.structured_content is not None
    assert result.structured_content["outcome"]["class"] == "access_failure"


def test_the_declared_schema_refuses_what_is_not_an_envelope() -> None:
    schema = output_schema()
    validator = validator_for(schema)(schema)
    assert not validator.is_valid([])
    assert not validator.is_valid({"items": []})
    payload_on_failure = answered(OUTCOMES["access_failure"]).to_dict()
    outcome = payload_on_failure["outcome"]
    assert isinstance(outcome, dict)
    outcome["payload"] = []
    assert not validator.is_valid(payload_on_failure)


def test_a_function_that_returns_no_envelope_is_a_tool_error() -> None:
    async def run(client: Client) -> CallToolResult:
        result = await client.call_tool("broken", {"query": "cats"})
        assert isinstance(result, CallToolResult)
        return result

    result = connected(run)
    assert result.is_error
    assert result.structured_content is None


def test_tool_result_renders_section_10_5() -> None:
    envelope = answered(OUTCOMES["partial"])
    result = tool_result(envelope)
    assert texts(result) == [envelope.summary(), envelope.to_json()]
    assert result.structured_content == envelope.to_dict()
    assert result.is_error is False


def test_a_candor_client_reads_the_failure_as_a_failure() -> None:
    adapter: Adapter[McpExchange] = Adapter(
        "catalogue.find",
        "mcp://catalogue/search",
        McpToolClassifier(items_at="/outcome/payload/items"),
        retry=RetryPolicy.no_retry(),
    )

    async def run(client: Client) -> Envelope:
        return await call_tool(adapter, client, "search", {"query": "access_failure"})

    envelope = connected(run)
    assert isinstance(envelope.outcome, AccessFailure)
    assert envelope.outcome.failure.kind is AccessFailureKind.SERVER_ERROR
    assert "FAILED to get an answer" in envelope.outcome.failure.message
