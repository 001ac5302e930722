//! An MCP server on stdio whose one tool answers with Candor envelopes, rendered by the Rust
//! helper (`candor_schema::mcp`): the envelope as `structuredContent`, its schema as the tool's
//! `outputSchema`, `isError` for an AccessFailure. The end-to-end suite connects the MCP
//! TypeScript SDK's own client to it (`clients/ts_adapter/mcp_client.mjs`), which validates every
//! result against the declared schema.
//!
//! The tool `lookup` takes `{"case": "success" | "empty" | "partial" | "access_failure"}` and
//! makes a real adapter call whose source answers as the case says (a canned HTTP response,
//! classified by the adapter's `HttpClassifier`). With `--broken`, every result hands the client
//! an empty answer whatever happened (`outcome` `{"class": "empty"}` without its extent, and
//! `isError` false): the variant the SDK's validation has to refuse.
//!
//! The transport is MCP's stdio transport: one JSON-RPC message per line each way. The server
//! answers `initialize` (at the protocol revision the helper renders), `ping`, `tools/list` and
//! `tools/call`, refuses any other request with "method not found" and ignores notifications.

use std::io::{BufRead as _, Write as _};

use anyhow::Context as _;
use candor_adapter::classify::http::{HttpResponse, TransportError};
use candor_adapter::{Adapter, HttpClassifier, NotFound};
use candor_schema::mcp;
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

/// JSON-RPC's code for a method the server does not have.
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's code for parameters the method cannot take.
const INVALID_PARAMS: i64 = -32602;

fn main() -> anyhow::Result<()> {
    let broken = std::env::args().skip(1).any(|arg| arg == "--broken");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("starting the runtime")?;
    let lookup = Adapter::builder("lookup", "http://catalogue.test/v1/items")
        .classifier(
            HttpClassifier::new(NotFound::Unreachable)
                .items_at("/items")
                .total_at("/total"),
        )
        .build()
        .context("building the adapter")?;

    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&line).context("a message that is not JSON")?;
        // A notification (no id) needs no answer.
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let answer = match method {
            "initialize" => Ok(json!({
                "protocolVersion": mcp::PROTOCOL_REVISION,
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "candor-mcp-envelope-server", "version": env!("CARGO_PKG_VERSION") },
            })),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": [tool()] })),
            "tools/call" => runtime.block_on(call(&lookup, &params, broken)),
            other => Err((METHOD_NOT_FOUND, format!("no method {other:?}"))),
        };
        let reply = match answer {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err((code, message)) => {
                json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
            }
        };
        let mut out = stdout.lock();
        writeln!(out, "{reply}").context("writing stdout")?;
        out.flush().context("flushing stdout")?;
    }
    Ok(())
}

/// The tool's declaration: its input, and the envelope's schema as its output.
fn tool() -> Value {
    json!({
        "name": "lookup",
        "description": "Looks items up in the catalogue; the source answers as `case` says.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "case": { "type": "string", "enum": ["success", "empty", "partial", "access_failure"] },
            },
            "required": ["case"],
        },
        "outputSchema": mcp::output_schema(),
    })
}

/// Answers `tools/call`: one adapter call whose source answers as the case says, rendered by
/// the helper (or, `broken`, as an empty answer).
async fn call(
    lookup: &Adapter<HttpClassifier>,
    params: &Value,
    broken: bool,
) -> Result<Value, (i64, String)> {
    let case = params
        .pointer("/arguments/case")
        .and_then(Value::as_str)
        .ok_or((INVALID_PARAMS, "lookup takes a string `case`".to_owned()))?;
    let (status, body) = match case {
        "success" => (StatusCode::OK, r#"{"items":[1,2],"total":2}"#),
        "empty" => (StatusCode::OK, r#"{"items":[],"total":0}"#),
        "partial" => (StatusCode::OK, r#"{"items":[1,2,3],"total":10}"#),
        "access_failure" => (StatusCode::UNAUTHORIZED, r#"{"error":"token expired"}"#),
        other => return Err((INVALID_PARAMS, format!("no case {other:?}"))),
    };
    let envelope = lookup
        .call(|_attempt| async move {
            Ok::<_, TransportError>(HttpResponse::new(status, HeaderMap::new(), body))
        })
        .await;
    let mut result = mcp::call_tool_result(&envelope)
        .map_err(|err| (INVALID_PARAMS, format!("rendering the envelope: {err}")))?;
    if broken {
        result["structuredContent"]["outcome"] = json!({ "class": "empty" });
        result["isError"] = json!(false);
    }
    Ok(result)
}
