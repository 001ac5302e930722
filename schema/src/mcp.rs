//! The envelope as an MCP tool result (protocol revision 2025-06-18).
//!
//! A tool that returns envelopes declares [`output_schema`] as its `outputSchema` and answers
//! with [`call_tool_result`]: `structuredContent` is the envelope, `content` carries the summary
//! (whose words follow the class) and, for clients that predate structured content, the
//! envelope serialised as text, and `isError` is true exactly for an AccessFailure.

use serde::Serialize;
use serde_json::{Value, json};

use crate::envelope::Envelope;
use crate::vocab::OutcomeClass;

/// The MCP protocol revision whose `CallToolResult` shape this module renders.
pub const PROTOCOL_REVISION: &str = "2025-06-18";

/// Renders an envelope as an MCP `CallToolResult`.
pub fn call_tool_result<T: Serialize>(envelope: &Envelope<T>) -> Result<Value, serde_json::Error> {
    let structured = serde_json::to_value(envelope)?;
    let serialised = serde_json::to_string(&structured)?;
    Ok(json!({
        "content": [
            { "type": "text", "text": envelope.summary() },
            { "type": "text", "text": serialised },
        ],
        "structuredContent": structured,
        "isError": envelope.class() == OutcomeClass::AccessFailure,
    }))
}

/// The JSON Schema to declare as the tool's `outputSchema`.
pub fn output_schema() -> Value {
    crate::envelope_json_schema()
}
