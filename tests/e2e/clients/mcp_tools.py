"""The MCP server and the calls the end-to-end clients share: a tool that answers and one that
returns ``isError: true``, each called once."""

from __future__ import annotations

from typing import Any

from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent


def tools_server() -> MCPServer:
    """An MCP server with the tools ``add`` (answers) and ``search`` (an error in its result)."""
    server = MCPServer("tools")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    @server.tool()
    def search(q: str) -> CallToolResult:
        """Reports an error in its result."""
        return CallToolResult(
            content=[TextContent(type="text", text=f"index offline for {q}")], is_error=True
        )

    return server


async def call_both(server: Any) -> None:
    """Calls ``add`` and ``search`` once each on `server` (anything ``mcp.Client`` connects
    to), and fails unless only ``search`` reported an error."""
    async with Client(server) as client:
        added = await client.call_tool("add", {"a": 1, "b": 2})
        failed = await client.call_tool("search", {"q": "x"})
    if added.is_error or not failed.is_error:
        raise SystemExit(f"unexpected MCP results: {added!r}, {failed!r}")
