//! OTLP trace requests built in code: the attribute and request builders the e2e suites use, and
//! the load generator's request, shared by `candor-loadgen` and the `ingest` bench.

use candor_schema::names::{self, attr, resource, semconv};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// A string attribute.
pub fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

/// An int attribute.
pub fn kv_int(key: &str, value: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(value))
}

/// One resource (with `resource_attributes`) holding one `tool.call` span that carries `events`.
pub fn one_span_request(
    resource_attributes: Vec<KeyValue>,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    events: Vec<span::Event>,
) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource_attributes,
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id,
                    span_id,
                    name: names::TOOL_CALL_SPAN.to_owned(),
                    events,
                    ..Span::default()
                }],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// A realistic request: one span per event batch, events spread over 50 targets.
pub fn request(connection: usize, batch: usize) -> ExportTraceServiceRequest {
    let events = (0..batch)
        .map(|i| span::Event {
            time_unix_nano: 1_800_000_000_000_000_000 + i as u64,
            name: names::OUTCOME_EVENT.to_owned(),
            attributes: vec![
                kv_str(attr::OUTCOME_CLASS, "access_failure"),
                kv_str(attr::TOOL_NAME, "search"),
                kv_str(
                    attr::TOOL_TARGET,
                    &format!("https://search-{}.internal/v1/items", i % 50),
                ),
                kv_str(attr::FAILURE_KIND, "server_error"),
                kv_str(attr::RETRY_ACTION, "retry"),
                kv_int(attr::RETRY_ATTEMPT, 1),
                kv_int(attr::RETRY_MAX_ATTEMPTS, 3),
                kv_int(attr::RETRY_BACKOFF_MS, 120),
                kv_int(attr::HTTP_STATUS_CODE, 503),
                kv_str(attr::ERROR_TYPE, "503"),
            ],
            dropped_attributes_count: 0,
        })
        .collect();
    one_span_request(
        vec![
            kv_str(resource::SERVICE_NAME, "loadgen"),
            kv_str(resource::SERVICE_INSTANCE_ID, &format!("c{connection}")),
        ],
        vec![connection as u8 + 1; 16],
        vec![7; 8],
        events,
    )
}

/// Makes `request` (of [`mix_request`]) the `sent`-th of its connection: its traces renumbered,
/// so that each request's calls are new calls, as in a fleet, and not copies of the first
/// request's (which the collector's join across requests would count once).
pub fn renumber_traces(request: &mut ExportTraceServiceRequest, sent: u64) {
    let spans = request
        .resource_spans
        .iter_mut()
        .flat_map(|r| &mut r.scope_spans)
        .flat_map(|s| &mut s.spans);
    for span in spans {
        if let Some(low) = span.trace_id.get_mut(8..16)
            && let Ok(bytes) = <[u8; 8]>::try_from(&*low)
        {
            // A mix request's trace numbers stay under 2^24 per connection.
            let renumbered = u64::from_be_bytes(bytes) ^ (sent << 24);
            low.copy_from_slice(&renumbered.to_be_bytes());
        }
    }
}

/// A request of `spans` spans of a realistic mix for the collector's derived sources: out of every
/// 10, 8 ordinary (a server span, database calls, internal work) and 2 tool spans (a GenAI tool
/// call or an MCP call, and an HTTP request it made); two spans in a hundred, one tool call in
/// ten, are failed calls. The connection's number makes its traces and its
/// `service.instance.id` its own.
pub fn mix_request(connection: usize, spans: usize) -> ExportTraceServiceRequest {
    let end = 1_800_000_000_000_000_000u64;
    let mut out = Vec::with_capacity(spans);
    for n in 0..spans {
        let trace = ((connection as u64) << 40) + (n / 10) as u64 + 1;
        let id = n as u64 + 1;
        // The HTTP request is the tool call's child; everything else the server span's.
        let parent = match n % 10 {
            0 => 0,
            9 => n as u64,
            _ => (n - n % 10) as u64 + 1,
        };
        let (name, kind, attributes): (String, span::SpanKind, Vec<KeyValue>) = match n % 10 {
            0 => (
                "GET /orders/{id}".into(),
                span::SpanKind::Server,
                vec![
                    kv_str(semconv::HTTP_REQUEST_METHOD, "GET"),
                    kv_str("http.route", "/orders/{id}"),
                    kv_int(attr::HTTP_STATUS_CODE, 200),
                    kv_str("url.path", "/orders/42"),
                    kv_str("user_agent.original", "python-httpx/0.28"),
                    kv_str(semconv::SERVER_ADDRESS, "orders.internal"),
                ],
            ),
            1..=5 => (
                "SELECT orders".into(),
                span::SpanKind::Client,
                vec![
                    kv_str("db.system.name", "postgresql"),
                    kv_str("db.operation.name", "SELECT"),
                    kv_str("db.collection.name", "orders"),
                    kv_str("db.query.text", "SELECT * FROM orders WHERE id = $1"),
                    kv_str(semconv::SERVER_ADDRESS, "db.internal"),
                    kv_int(semconv::SERVER_PORT, 5432),
                ],
            ),
            6 | 7 => (
                "render".into(),
                span::SpanKind::Internal,
                vec![
                    kv_str("code.function.name", "render_order"),
                    kv_int("items", 3),
                ],
            ),
            8 if n % 20 == 8 => (
                format!("{} search", semconv::EXECUTE_TOOL),
                span::SpanKind::Internal,
                vec![
                    kv_str(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
                    kv_str(semconv::GEN_AI_TOOL_NAME, "search"),
                    kv_str(semconv::GEN_AI_TOOL_CALL_ID, &format!("call_{n}")),
                    kv_str("gen_ai.tool.type", "function"),
                ],
            ),
            8 => (
                "tools/call fetch".into(),
                span::SpanKind::Client,
                vec![
                    kv_str(semconv::MCP_METHOD_NAME, semconv::MCP_TOOLS_CALL),
                    kv_str(semconv::GEN_AI_TOOL_NAME, "fetch"),
                    kv_str("jsonrpc.request.id", &n.to_string()),
                    kv_str(semconv::SERVER_ADDRESS, "mcp.internal"),
                    kv_int(semconv::SERVER_PORT, 8443),
                ],
            ),
            _ => (
                "GET".into(),
                span::SpanKind::Client,
                vec![
                    kv_str(semconv::HTTP_METHOD, "GET"),
                    kv_str(
                        semconv::HTTP_URL,
                        &format!("https://api.example.com/v1/items/{n}?q=x"),
                    ),
                    kv_int(
                        semconv::HTTP_STATUS_CODE_OLD,
                        if n % 100 == 9 { 503 } else { 200 },
                    ),
                ],
            ),
        };
        let failed = n % 100 == 9 || n % 100 == 28;
        out.push(Span {
            trace_id: trace.to_be_bytes().repeat(2),
            span_id: id.to_be_bytes().to_vec(),
            parent_span_id: if parent == 0 {
                Vec::new()
            } else {
                parent.to_be_bytes().to_vec()
            },
            name,
            kind: kind as i32,
            start_time_unix_nano: end - 5_000_000,
            end_time_unix_nano: end,
            attributes,
            status: failed.then(|| Status {
                code: status::StatusCode::Error as i32,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv_str(resource::SERVICE_NAME, "orders"),
                    kv_str(
                        resource::SERVICE_INSTANCE_ID,
                        &format!("orders-{connection}"),
                    ),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: out,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}
