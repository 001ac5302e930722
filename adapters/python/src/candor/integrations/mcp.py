"""MCP: a tool call on an MCP server (``ClientSession.call_tool``) classified by the contract.

=====================================================  =======================================
what came back                                         outcome
=====================================================  =======================================
a result with ``isError: true``                        AccessFailure ``server_error``,
                                                       permanent (the tool said it failed)
a JSON-RPC error (:class:`mcp.MCPError`)               AccessFailure by code: timeout (-32001)
                                                       and connection closed (-32000) and
                                                       internal error (-32603) transient,
                                                       parse error ``protocol``, invalid
                                                       request, params or method
                                                       ``client_error``, any other
                                                       ``server_error``, all permanent
no answer (the transport closed, broke or timed out)   AccessFailure ``connect`` or
                                                       ``timeout``, transient
a result whose collection is empty                     Empty only when the tool declares that
                                                       empty means confirmed absence
                                                       (``empty_means_absent=True``); else
                                                       Success with zero items
any other result                                       Success
=====================================================  =======================================

The payload is the result's ``structuredContent``, or its content blocks when it has none.
Where the collection sits is declared with ``items_at`` (a JSON pointer into the structured
content); without it, a structured content that is a list is the collection.

An empty answer is not evidence of absence unless the tool says so: a search that returns
nothing may have searched nothing. Without the declaration, the envelope is a Success whose
extent says ``items: 0``, worded as a complete answer with 0 items, never as "nothing exists".

    adapter = Adapter("kb.search", "mcp://kb/search", McpToolClassifier(items_at="/items"))
    envelope = await call_tool(adapter, session, "search", {"q": "cats"})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import anyio
from mcp import Client, ClientSession, MCPError
from mcp.types import CallToolResult, TextContent

from candor.adapter import Adapter, AttemptContext
from candor.classify import Classification
from candor.envelope import AccessFailure, Empty, Envelope, Extent, Failure, Success
from candor.jsonvalue import MISSING, JsonValue, json_type, pointer
from candor.redact import redact_text
from candor.vocab import AccessFailureKind

__all__ = ["McpExchange", "McpToolClassifier", "call_tool"]

McpExchange: TypeAlias = CallToolResult
"""One MCP attempt's raw result: the tool's result (errors arrive raised)."""

MESSAGE_CHARS: Final = 200
"""The most characters of a tool's error text repeated in a failure message."""

# JSON-RPC codes, as the MCP SDK raises them.
_CONNECTION_CLOSED: Final = -32000
_REQUEST_TIMEOUT: Final = -32001
_PARSE_ERROR: Final = -32700
_INVALID_REQUEST: Final = -32600
_METHOD_NOT_FOUND: Final = -32601
_INVALID_PARAMS: Final = -32602
_INTERNAL_ERROR: Final = -32603

_CODES: Final[dict[int, tuple[AccessFailureKind, bool]]] = {
    _CONNECTION_CLOSED: (AccessFailureKind.CONNECT, True),
    _REQUEST_TIMEOUT: (AccessFailureKind.TIMEOUT, True),
    _INTERNAL_ERROR: (AccessFailureKind.SERVER_ERROR, True),
    _PARSE_ERROR: (AccessFailureKind.PROTOCOL, False),
    _INVALID_REQUEST: (AccessFailureKind.CLIENT_ERROR, False),
    _METHOD_NOT_FOUND: (AccessFailureKind.CLIENT_ERROR, False),
    _INVALID_PARAMS: (AccessFailureKind.CLIENT_ERROR, False),
}

_TRANSPORT_ERRORS: Final = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
)


def _failure(
    kind: AccessFailureKind, retryable: bool, message: str, error_type: str
) -> Classification:
    return Classification(
        AccessFailure(
            Failure(kind, retryable, redact_text(message[:MESSAGE_CHARS]), error_type=error_type)
        )
    )


def _text(result: CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return " ".join(" ".join(texts).split())


@dataclass(frozen=True, slots=True)
class McpToolClassifier:
    """Classifies MCP tool results, and the errors a ``call_tool`` raises.

    ``empty_means_absent`` is the tool author's declaration that an empty collection is a
    verified absence; ``items_at`` is the JSON pointer of the collection in the structured
    content; ``scope`` is recorded in every Success and Empty extent.
    """

    empty_means_absent: bool = False
    items_at: str | None = None
    scope: str | None = None

    def classify(self, raw: CallToolResult, /) -> Classification:
        """Classifies one tool result."""
        if raw.is_error:
            text = _text(raw) or "the tool reported an error with no text"
            return _failure(
                AccessFailureKind.SERVER_ERROR, False, f"tool error: {text}", "tool_error"
            )
        structured: JsonValue = raw.structured_content
        payload: JsonValue
        if structured is not None:
            payload = structured
        else:
            payload = [
                block.model_dump(mode="json", by_alias=True, exclude_none=True)
                for block in raw.content
            ]
        items: int | None = None
        if self.items_at is not None:
            found = pointer(structured, self.items_at)
            if found is MISSING or not isinstance(found, list | None):
                what = "missing from" if found is MISSING else f"a {json_type(found)} in"
                return _failure(
                    AccessFailureKind.PROTOCOL,
                    False,
                    f"declared collection {self.items_at} is {what} the structured content",
                    "malformed_response",
                )
            items = 0 if found is None else len(found)
        elif isinstance(structured, list):
            items = len(structured)
        extent = Extent(items=items, scope=self.scope)
        if items == 0 and self.empty_means_absent:
            return Classification(Empty(extent))
        return Classification(Success(payload, extent))

    def classify_exception(self, error: Exception, /) -> Classification | None:
        """Classifies a JSON-RPC error or a transport failure; anything else propagates."""
        if isinstance(error, MCPError):
            kind, retryable = _CODES.get(error.code, (AccessFailureKind.SERVER_ERROR, False))
            return _failure(
                kind, retryable, f"MCP error {error.code}: {error.message}", str(error.code)
            )
        if isinstance(error, TimeoutError):
            return _failure(AccessFailureKind.TIMEOUT, True, str(error) or "timed out", "timeout")
        if isinstance(error, _TRANSPORT_ERRORS):
            message = str(error) or f"the MCP transport failed ({type(error).__name__})"
            return _failure(AccessFailureKind.CONNECT, True, message, "connect_error")
        return None


async def call_tool(
    adapter: Adapter[McpExchange],
    session: ClientSession | Client,
    name: str,
    arguments: dict[str, Any] | None = None,
) -> Envelope:
    """Calls the tool ``name`` through ``adapter``, passing each attempt's timeout to the SDK.

    ``adapter`` is built with a :class:`McpToolClassifier`.
    """

    async def attempt(context: AttemptContext) -> CallToolResult:
        return await session.call_tool(
            name, arguments, read_timeout_seconds=context.timeout_seconds
        )

    return await adapter.acall(attempt)
