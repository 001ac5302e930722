"""MCP servers: a tool that answers with the envelope, as section 10.5 of the contract renders it.

:func:`envelope_tool` turns a function that makes a call through a Candor adapter and returns
its :class:`~candor.Envelope` into a tool of an ``MCPServer`` (the MCP SDK's high-level
server). The tool's parameters, name and description are the function's::

    async def search(query: str) -> Envelope:
        \"\"\"Searches the catalogue.\"\"\"
        return await candor_httpx.acall(adapter, client, "GET", url, params={"q": query})

    server = MCPServer("catalogue", tools=[envelope_tool(search)])

The tool declares the envelope's JSON Schema (:func:`candor.mcp_result.output_schema`) as its
``outputSchema`` and answers each call with :func:`candor.mcp_result.call_tool_result`:

- ``structuredContent`` is the envelope's JSON;
- ``content`` is the summary first (its words follow the class), then the envelope's JSON as
  text, for clients that predate structured content;
- ``isError`` is true exactly for an AccessFailure, so that a client and its model read a
  failure, never an empty result.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, Icon, ToolAnnotations

from candor.envelope import Envelope
from candor.integrations._tools import EnvelopeFunction, declare
from candor.mcp_result import call_tool_result, output_schema

__all__ = ["envelope_tool", "tool_result"]


def tool_result(envelope: Envelope) -> CallToolResult:
    """The ``CallToolResult`` for an envelope (contract, section 10.5), as the SDK's type."""
    return CallToolResult.model_validate(call_tool_result(envelope))


def envelope_tool(
    function: EnvelopeFunction,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    icons: list[Icon] | None = None,
    meta: dict[str, Any] | None = None,
) -> Tool:
    """An ``MCPServer`` tool that calls ``function`` and answers with its envelope.

    ``function`` (a plain or an ``async`` function, which may take the server's ``Context``)
    makes the call through a Candor adapter and returns the :class:`~candor.Envelope`. Its
    parameters are the tool's input schema; its name and docstring are the tool's name and
    description unless ``name`` and ``description`` are given. ``title``, ``annotations``,
    ``icons`` and ``meta`` are declared as given. Pass the tool to the server:
    ``MCPServer(name, tools=[envelope_tool(function)])``.
    """
    # The SDK passes a CallToolResult through as it is, and declares no output schema for it.
    wrapper = declare(function, tool_result, CallToolResult)
    tool = Tool.from_function(
        wrapper,
        name=name,
        title=title,
        description=description,
        annotations=annotations,
        icons=icons,
        meta=meta,
    )
    tool.fn_metadata.output_schema = output_schema()
    return tool
