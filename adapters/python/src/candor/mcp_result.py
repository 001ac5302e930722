"""The envelope as an MCP tool result (protocol revision 2025-06-18).

A tool that returns envelopes declares :func:`output_schema` as its ``outputSchema`` and
answers with :func:`call_tool_result`: ``structuredContent`` is the envelope, ``content``
carries the summary (whose words follow the class) and, for clients that predate structured
content, the envelope serialised as text, and ``isError`` is true exactly for an AccessFailure.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Final

from candor.envelope import Envelope
from candor.jsonvalue import JsonValue
from candor.vocab import OutcomeClass

__all__ = ["PROTOCOL_REVISION", "call_tool_result", "output_schema"]

PROTOCOL_REVISION: Final = "2025-06-18"
"""The MCP protocol revision whose ``CallToolResult`` shape this module renders."""


def call_tool_result(envelope: Envelope) -> dict[str, JsonValue]:
    """Renders an envelope as an MCP ``CallToolResult`` (JSON values)."""
    return {
        "content": [
            {"type": "text", "text": envelope.summary()},
            {"type": "text", "text": envelope.to_json()},
        ],
        "structuredContent": envelope.to_dict(),
        "isError": envelope.outcome_class is OutcomeClass.ACCESS_FAILURE,
    }


def output_schema() -> dict[str, JsonValue]:
    """The envelope's JSON Schema, to declare as the tool's ``outputSchema``."""
    text = resources.files("candor").joinpath("envelope.v1.schema.json").read_text("utf-8")
    schema: dict[str, JsonValue] = json.loads(text)
    return schema
