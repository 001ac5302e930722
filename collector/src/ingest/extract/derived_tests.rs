//! Calls derived from standard spans: recognition, classification, targets, joins, the cap.

use candor_records::proto::{CountClass, OutcomeEvent, OutcomeSource};
use candor_schema::names::{attr, resource, semconv};
use candor_schema::{FailureKind, OutcomeClass};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};

use super::derived::{Conventions, DerivedConfig, OTHER_TARGET, RawConvention};
use super::*;

const TRACE: [u8; 16] = [7; 16];
const END: u64 = 1_800_000_000_000_000_000;

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..Default::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..Default::default()
    }
}

/// A span `id` (its last byte), under `parent` (0: a root), of `kind`.
fn span(id: u8, parent: u8, name: &str, kind: span::SpanKind, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: TRACE.to_vec(),
        span_id: vec![0, 0, 0, 0, 0, 0, 0, id],
        parent_span_id: if parent == 0 {
            Vec::new()
        } else {
            vec![0, 0, 0, 0, 0, 0, 0, parent]
        },
        name: name.to_owned(),
        kind: kind as i32,
        start_time_unix_nano: END - 1_000_000,
        end_time_unix_nano: END,
        attributes,
        ..Default::default()
    }
}

fn failed(mut span: Span, exception_type: Option<&str>) -> Span {
    span.status = Some(Status {
        code: status::StatusCode::Error as i32,
        ..Default::default()
    });
    if let Some(exception_type) = exception_type {
        span.events.push(span::Event {
            name: semconv::EXCEPTION_EVENT.to_owned(),
            time_unix_nano: END,
            attributes: vec![text(semconv::EXCEPTION_TYPE, exception_type)],
            ..Default::default()
        });
    }
    span
}

fn genai(id: u8, parent: u8, tool: &str) -> Span {
    span(
        id,
        parent,
        &format!("{} {tool}", semconv::EXECUTE_TOOL),
        span::SpanKind::Internal,
        vec![
            text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
            text(semconv::GEN_AI_TOOL_NAME, tool),
        ],
    )
}

fn mcp(id: u8, parent: u8, attributes: Vec<KeyValue>) -> Span {
    let mut all = vec![text(semconv::MCP_METHOD_NAME, semconv::MCP_TOOLS_CALL)];
    all.extend(attributes);
    span(id, parent, "tools/call", span::SpanKind::Client, all)
}

fn http(id: u8, parent: u8, attributes: Vec<KeyValue>) -> Span {
    span(id, parent, "GET", span::SpanKind::Client, attributes)
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text(resource::SERVICE_NAME, "agent"),
                    text(resource::SERVICE_INSTANCE_ID, "i-1"),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// What a test reads: the failure events and the counts, as records.
struct Seen {
    events: Vec<OutcomeEvent>,
    /// (source, tool, target, class, value), sorted.
    counts: Vec<(String, String, String, String, u64)>,
    point_ids: Vec<String>,
    /// The conventions of the counts, in the order of `counts`.
    conventions: Vec<String>,
    rejections: Vec<Rejection>,
    ignored: u64,
    /// Values whose credentials were removed.
    redacted: u64,
    stats: derived::DerivedStats,
    /// The calls to remember once Kafka holds the request.
    remember: derived::Remember,
}

fn extract_with(spans: Vec<Span>, derivation: &Derivation) -> Seen {
    extract_at(spans, derivation, END + 5)
}

/// [`extract_with`], the request received at `received_at` (Unix nanoseconds).
fn extract_at(spans: Vec<Span>, derivation: &Derivation, received_at: u64) -> Seen {
    let limits = Limits::default();
    let request = request(spans);
    let received = Received {
        collector_id: "c-1",
        time_unix_nano: received_at,
        limits: &limits,
        derivation,
    };
    let out = extract_traces(&request, &received);
    let mut counts: Vec<_> = out
        .counts
        .iter()
        .map(|c| {
            (
                (
                    c.source.clone().unwrap_or_default(),
                    c.tool_name.clone(),
                    c.tool_target.clone(),
                    c.outcome_class.clone(),
                    c.value,
                ),
                c.convention.clone().unwrap_or_default(),
            )
        })
        .collect();
    counts.sort();
    let (counts, conventions) = counts.into_iter().unzip();
    Seen {
        events: out
            .events
            .iter()
            .map(|event| event.clone().into_record())
            .collect(),
        counts,
        conventions,
        point_ids: out.counts.iter().map(|c| c.point_id.clone()).collect(),
        rejections: out.rejections,
        ignored: out.ignored,
        redacted: out.redacted,
        stats: out.derived,
        remember: out.remember,
    }
}

fn extract(spans: Vec<Span>) -> Seen {
    extract_with(spans, &Derivation::default())
}

fn count(
    source: &str,
    tool: &str,
    target: &str,
    class: &str,
    n: u64,
) -> (String, String, String, String, u64) {
    (source.into(), tool.into(), target.into(), class.into(), n)
}

#[test]
fn a_genai_tool_span_without_error_is_counted_as_unverified_never_as_success() {
    let seen = extract(vec![genai(1, 0, "search")]);
    assert!(seen.events.is_empty());
    assert_eq!(
        seen.counts,
        [count("genai", "search", "search", "unverified", 1)]
    );
    assert_eq!(seen.ignored, 0);
    assert_eq!(
        seen.stats.calls,
        [(
            OutcomeSource::Genai,
            "otel-genai".to_owned(),
            CountClass::Unverified,
            1
        )]
    );
}

#[test]
fn a_failed_genai_tool_span_is_an_access_failure_typed_by_its_exception() {
    let seen = extract(vec![failed(
        genai(1, 0, "search"),
        Some("builtins.ConnectionError"),
    )]);
    assert_eq!(
        seen.counts,
        [count("genai", "search", "search", "access_failure", 1)]
    );
    let [event] = seen.events.as_slice() else {
        panic!("{:?}", seen.events);
    };
    assert_eq!(event.outcome_class, OutcomeClass::AccessFailure.as_str());
    assert_eq!(event.failure_kind, FailureKind::Connect.as_str());
    assert_eq!(
        event.error_type.as_deref(),
        Some("builtins.ConnectionError")
    );
    assert_eq!(event.source.as_deref(), Some("genai"));
    assert_eq!(
        event.retry_action, "",
        "a span does not say how it was retried"
    );
    assert_eq!(event.service_name, "agent");
    assert_eq!(event.span_id, "0000000000000001");
    assert_eq!(event.event_time_unix_nano, END);
}

#[test]
fn an_older_emitter_is_recognised_by_its_span_name() {
    let old = span(
        1,
        0,
        "execute_tool lookup",
        span::SpanKind::Internal,
        vec![],
    );
    let seen = extract(vec![old]);
    assert_eq!(
        seen.counts,
        [count("genai", "lookup", "lookup", "unverified", 1)]
    );
    let unrelated = span(1, 0, "execute_toolbox", span::SpanKind::Internal, vec![]);
    assert_eq!(extract(vec![unrelated]).ignored, 1);
}

#[test]
fn a_sibling_its_caller_cancelled_is_not_a_failure() {
    let seen = extract(vec![
        failed(
            genai(1, 0, "slow"),
            Some("asyncio.exceptions.CancelledError"),
        ),
        failed(genai(2, 0, "broken"), Some("ValueError")),
    ]);
    assert_eq!(
        seen.counts,
        [
            count("genai", "broken", "broken", "access_failure", 1),
            count("genai", "slow", "slow", "cancelled", 1),
        ]
    );
    assert_eq!(seen.events.len(), 1);
    assert_eq!(seen.events[0].tool_name, "broken");
    assert_eq!(seen.events[0].failure_kind, FailureKind::Unknown.as_str());
    assert_eq!(seen.events[0].error_type.as_deref(), Some("ValueError"));
}

#[test]
fn an_mcp_tool_error_names_its_server_and_takes_the_alias_for_its_tool() {
    let seen = extract(vec![mcp(
        1,
        0,
        vec![
            text(semconv::MCP_TOOL_NAME, "fetch"),
            text(semconv::SERVER_ADDRESS, "tools.internal"),
            int(semconv::SERVER_PORT, 8443),
            text(attr::ERROR_TYPE, "tool_error"),
        ],
    )]);
    assert_eq!(
        seen.counts,
        [count(
            "mcp",
            "fetch",
            "tools.internal:8443",
            "access_failure",
            1
        )]
    );
    assert_eq!(seen.events[0].failure_kind, FailureKind::ToolError.as_str());
}

#[test]
fn an_mcp_call_over_stdio_with_a_json_rpc_error_is_a_client_error() {
    let mut span = failed(
        mcp(
            1,
            0,
            vec![
                text(semconv::NETWORK_TRANSPORT, "pipe"),
                int(semconv::RPC_RESPONSE_STATUS_CODE, -32602),
            ],
        ),
        None,
    );
    span.name = "MCP send tools/call add".to_owned();
    let seen = extract(vec![span]);
    assert_eq!(
        seen.counts,
        [count("mcp", "add", "stdio", "access_failure", 1)]
    );
    assert_eq!(
        seen.events[0].failure_kind,
        FailureKind::ClientError.as_str()
    );
    assert_eq!(seen.events[0].error_type.as_deref(), Some("-32602"));
}

#[test]
fn other_mcp_methods_are_not_tool_calls() {
    let list = span(
        1,
        0,
        "tools/list",
        span::SpanKind::Client,
        vec![text(semconv::MCP_METHOD_NAME, "tools/list")],
    );
    let seen = extract(vec![list]);
    assert!(seen.counts.is_empty());
    assert_eq!(seen.ignored, 1);
}

#[test]
fn an_http_target_keeps_scheme_host_and_port_and_never_the_path_query_or_credentials() {
    let seen = extract(vec![failed(
        http(
            1,
            0,
            vec![
                text(semconv::HTTP_METHOD, "get"),
                text(
                    semconv::HTTP_URL,
                    "https://user:hunter2@API.example.com/v1/users/42?token=abc#frag",
                ),
                int(semconv::HTTP_STATUS_CODE_OLD, 500),
            ],
        ),
        None,
    )]);
    assert_eq!(
        seen.counts,
        [count(
            "http",
            "GET",
            "https://api.example.com:443",
            "access_failure",
            1
        )]
    );
    let event = &seen.events[0];
    assert_eq!(event.http_status_code, Some(500));
    assert_eq!(event.failure_kind, FailureKind::ServerError.as_str());
    assert_eq!(event.error_type.as_deref(), Some("500"));
    let stored = format!("{event:?}");
    for secret in ["hunter2", "token=abc", "/users/42"] {
        assert!(!stored.contains(secret), "{secret} in {stored}");
    }
}

#[test]
fn stable_http_names_take_the_url_template_and_the_server_attributes() {
    let seen = extract(vec![http(
        1,
        0,
        vec![
            text(semconv::HTTP_REQUEST_METHOD, "PATCH"),
            text(semconv::URL_FULL, "http://[::1]:8080/orders/7"),
            text(semconv::URL_TEMPLATE, "/orders/{id}"),
            int(attr::HTTP_STATUS_CODE, 204),
        ],
    )]);
    assert_eq!(
        seen.counts,
        [count(
            "http",
            "PATCH",
            "http://::1:8080/orders/{id}",
            "unverified",
            1
        )]
    );
}

#[test]
fn an_unknown_http_method_cannot_make_new_tools() {
    let seen = extract(vec![http(
        1,
        0,
        vec![
            text(semconv::HTTP_REQUEST_METHOD, "PURGE-EVERYTHING-NOW"),
            text(semconv::SERVER_ADDRESS, "cache"),
            int(semconv::SERVER_PORT, 80),
        ],
    )]);
    assert_eq!(
        seen.counts,
        [count("http", "_OTHER", "http://cache:80", "unverified", 1)]
    );
}

#[test]
fn only_client_spans_are_http_calls() {
    let mut server = http(1, 0, vec![text(semconv::HTTP_REQUEST_METHOD, "GET")]);
    server.kind = span::SpanKind::Server as i32;
    let seen = extract(vec![server]);
    assert!(seen.counts.is_empty());
    assert_eq!(seen.ignored, 1);
}

#[test]
fn a_connection_refused_before_any_status_is_a_connect_failure() {
    let seen = extract(vec![failed(
        http(
            1,
            0,
            vec![
                text(semconv::HTTP_METHOD, "GET"),
                text(semconv::HTTP_URL, "http://127.0.0.1:9/"),
            ],
        ),
        Some("httpx.ConnectError"),
    )]);
    assert_eq!(
        seen.counts,
        [count(
            "http",
            "GET",
            "http://127.0.0.1:9",
            "access_failure",
            1
        )]
    );
    assert_eq!(seen.events[0].failure_kind, FailureKind::Connect.as_str());
    assert_eq!(seen.events[0].http_status_code, None);
}

#[test]
fn a_call_an_adapter_declared_is_the_adapters_even_two_levels_down() {
    let adapter = span(
        1,
        0,
        names::TOOL_CALL_SPAN,
        span::SpanKind::Internal,
        vec![],
    );
    let between = span(2, 1, "retry loop", span::SpanKind::Internal, vec![]);
    let request = failed(
        http(
            3,
            2,
            vec![
                text(semconv::HTTP_METHOD, "GET"),
                text(semconv::HTTP_URL, "http://a/"),
            ],
        ),
        None,
    );
    let seen = extract(vec![request, between, adapter]);
    assert!(seen.counts.is_empty(), "{:?}", seen.counts);
    assert!(seen.events.is_empty());
    assert_eq!(seen.stats.joined_into_adapter, 1);
    // The adapter's span and the span between are not calls of any source.
    assert_eq!(seen.ignored, 2);
}

#[test]
fn the_genai_and_mcp_spans_of_one_call_count_once_failed_when_either_failed() {
    let outer = genai(1, 0, "fetch");
    let inner = mcp(2, 1, vec![text(attr::ERROR_TYPE, "tool_error")]);
    let seen = extract(vec![inner, outer]);
    assert_eq!(
        seen.counts,
        [count("genai", "fetch", "fetch", "access_failure", 1)]
    );
    assert_eq!(seen.events.len(), 1);
    assert_eq!(seen.events[0].failure_kind, FailureKind::ToolError.as_str());
    assert_eq!(
        seen.events[0].span_id, "0000000000000001",
        "the call's own span"
    );
    assert_eq!(seen.stats.joined_into_derived, 1);
}

#[test]
fn spans_sharing_a_tool_call_id_count_once_even_when_not_nested() {
    let mut first = genai(1, 0, "fetch");
    first
        .attributes
        .push(text(semconv::GEN_AI_TOOL_CALL_ID, "call_9"));
    let second = mcp(2, 0, vec![text(semconv::GEN_AI_TOOL_CALL_ID, "call_9")]);
    let mut other = genai(3, 0, "fetch");
    other
        .attributes
        .push(text(semconv::GEN_AI_TOOL_CALL_ID, "call_10"));
    let seen = extract(vec![first, second, other]);
    assert_eq!(
        seen.counts,
        [count("genai", "fetch", "fetch", "unverified", 2)]
    );
    assert_eq!(seen.stats.joined_into_derived, 1);
}

/// Extracts `spans` received at `at` and, as the service does once Kafka holds them, remembers
/// their calls.
fn stored(spans: Vec<Span>, derivation: &Derivation, at: u64) -> Seen {
    let mut seen = extract_at(spans, derivation, at);
    derivation.remember(std::mem::take(&mut seen.remember), at);
    seen
}

/// A server's span of an MCP tool call (another process's), under the client's span `parent`.
fn mcp_server(id: u8, parent: u8, attributes: Vec<KeyValue>) -> Span {
    let mut server = mcp(id, parent, attributes);
    server.kind = span::SpanKind::Server as i32;
    server
        .attributes
        .push(text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL));
    server
}

#[test]
fn a_call_whose_spans_arrive_in_two_requests_counts_once_and_its_failure_is_never_lost() {
    const SECOND: u64 = 1_000_000_000;
    let derivation = Derivation::default();
    let tool = || text(semconv::GEN_AI_TOOL_NAME, "search");
    // The server's failed span first, then the client's span it is the child of.
    let server = stored(
        vec![failed(mcp_server(2, 1, vec![tool()]), None)],
        &derivation,
        END + SECOND,
    );
    assert_eq!(
        server.counts,
        [count("mcp", "search", "search", "access_failure", 1)]
    );
    let client = stored(vec![mcp(1, 0, vec![tool()])], &derivation, END + 2 * SECOND);
    assert_eq!(client.counts, [], "the client's span is the counted call");
    assert_eq!(client.stats.joined_across_requests, 1);

    // A span with the same tool call id in the trace, in a third request: the same call.
    let mut first = genai(3, 0, "lookup");
    first
        .attributes
        .push(text(semconv::GEN_AI_TOOL_CALL_ID, "call_3"));
    stored(vec![first], &derivation, END + 3 * SECOND);
    let mut again = genai(4, 0, "lookup");
    again
        .attributes
        .push(text(semconv::GEN_AI_TOOL_CALL_ID, "call_3"));
    let joined = stored(vec![again.clone()], &derivation, END + 4 * SECOND);
    assert_eq!(joined.counts, []);

    // The other order: the client's span counted only contact, and the server's failure that
    // arrives after it is counted too, and said to be.
    let derivation = Derivation::default();
    let client = stored(vec![mcp(1, 0, vec![tool()])], &derivation, END + SECOND);
    assert_eq!(
        client.counts,
        [count("mcp", "search", "search", "unverified", 1)]
    );
    let server = stored(
        vec![failed(mcp_server(2, 1, vec![tool()]), None)],
        &derivation,
        END + 2 * SECOND,
    );
    assert_eq!(
        server.counts,
        [count("mcp", "search", "search", "access_failure", 1)]
    );
    assert_eq!(server.events.len(), 1);
    assert_eq!(server.stats.revised_across_requests, 1);
    // Past two windows the call is forgotten: a copy sent that late counts again.
    let late = stored(
        vec![mcp(1, 0, vec![tool()])],
        &derivation,
        END + 70 * SECOND,
    );
    assert_eq!(
        late.counts,
        [count("mcp", "search", "search", "unverified", 1)]
    );

    // A request that was never stored leaves nothing to join.
    let derivation = Derivation::default();
    extract_at(vec![again.clone()], &derivation, END + SECOND);
    let sent_again = extract_at(vec![again], &derivation, END + 2 * SECOND);
    assert_eq!(
        sent_again.counts,
        [count("genai", "lookup", "lookup", "unverified", 1)]
    );
}

#[test]
fn sibling_calls_in_two_requests_are_two_calls() {
    let derivation = Derivation::default();
    stored(vec![genai(2, 1, "fetch")], &derivation, END + 1);
    let sibling = stored(vec![genai(3, 1, "fetch")], &derivation, END + 2);
    assert_eq!(
        sibling.counts,
        [count("genai", "fetch", "fetch", "unverified", 1)],
        "two tool calls of one agent span are two calls"
    );
}

#[test]
fn a_request_a_tool_made_counts_on_its_own() {
    let tool = failed(genai(1, 0, "weather"), Some("httpx.HTTPStatusError"));
    let request = failed(
        http(
            2,
            1,
            vec![
                text(semconv::HTTP_METHOD, "GET"),
                text(semconv::HTTP_URL, "https://weather.example/today"),
                int(semconv::HTTP_STATUS_CODE_OLD, 401),
            ],
        ),
        None,
    );
    let seen = extract(vec![request, tool]);
    assert_eq!(
        seen.counts,
        [
            count("genai", "weather", "weather", "access_failure", 1),
            count(
                "http",
                "GET",
                "https://weather.example:443",
                "access_failure",
                1
            ),
        ]
    );
    let kinds: Vec<&str> = seen
        .events
        .iter()
        .map(|e| e.failure_kind.as_str())
        .collect();
    assert!(kinds.contains(&"auth"), "{kinds:?}");
}

#[test]
fn a_source_turned_off_is_ignored() {
    let derivation = Derivation::new(DerivedConfig {
        conventions: Conventions::new(Vec::new(), &[], |layer| layer != OutcomeSource::Http)
            .unwrap(),
        ..DerivedConfig::default()
    });
    let seen = extract_with(
        vec![
            http(1, 0, vec![text(semconv::HTTP_METHOD, "GET")]),
            genai(2, 0, "search"),
        ],
        &derivation,
    );
    assert_eq!(
        seen.counts,
        [count("genai", "search", "search", "unverified", 1)]
    );
    assert_eq!(seen.ignored, 1);
}

#[test]
fn a_declared_entry_under_a_built_in_name_takes_its_place() {
    let mut otel_mcp = RawConvention::built_in()
        .into_iter()
        .find(|c| c.name == "otel-mcp")
        .unwrap();
    otel_mcp.tool_name.insert(0, "vendor.tool".to_owned());
    let derivation = Derivation::new(DerivedConfig {
        conventions: Conventions::new(vec![otel_mcp], &[], |_| true).unwrap(),
        ..DerivedConfig::default()
    });
    let mut span = mcp(1, 0, vec![text("vendor.tool", "grep")]);
    span.name = "call".to_owned();
    let seen = extract_with(vec![span], &derivation);
    assert_eq!(seen.counts, [count("mcp", "grep", "grep", "unverified", 1)]);
    assert_eq!(seen.conventions, ["otel-mcp"]);
}

#[test]
fn targets_past_a_services_cap_are_folded_into_other_and_counted() {
    // Room for two targets and the tool `GET`.
    let derivation = Derivation::new(DerivedConfig {
        max_targets_per_service: 3,
        ..DerivedConfig::default()
    });
    let calls = |hosts: &[&str]| {
        hosts
            .iter()
            .enumerate()
            .map(|(i, host)| {
                http(
                    u8::try_from(i + 1).unwrap(),
                    0,
                    vec![
                        text(semconv::HTTP_METHOD, "GET"),
                        text(semconv::HTTP_URL, &format!("http://{host}/")),
                    ],
                )
            })
            .collect::<Vec<_>>()
    };
    let first = extract_with(calls(&["a", "b", "c"]), &derivation);
    assert_eq!(
        first.counts,
        [
            count("http", "GET", "http://a:80", "unverified", 1),
            count("http", "GET", "http://b:80", "unverified", 1),
            count("http", "GET", OTHER_TARGET, "unverified", 1),
        ]
    );
    assert_eq!(first.stats.folded_targets, 1);
    // The cap holds across requests; a target already kept stays kept.
    let second = extract_with(calls(&["d", "a"]), &derivation);
    assert_eq!(
        second.counts,
        [
            count("http", "GET", "http://a:80", "unverified", 1),
            count("http", "GET", OTHER_TARGET, "unverified", 1),
        ]
    );
}

#[test]
fn a_request_sent_again_gets_the_same_ids_and_other_calls_get_others() {
    let spans = || {
        vec![
            genai(1, 0, "search"),
            genai(2, 0, "search"),
            failed(genai(3, 0, "search"), Some("TimeoutError")),
        ]
    };
    let once = extract(spans());
    let again = extract(spans());
    assert_eq!(once.point_ids, again.point_ids);
    assert_eq!(once.events[0].event_id, again.events[0].event_id);
    assert_eq!(
        once.counts,
        [
            count("genai", "search", "search", "access_failure", 1),
            count("genai", "search", "search", "unverified", 2),
        ]
    );
    let fewer = extract(vec![genai(1, 0, "search")]);
    assert!(!once.point_ids.contains(&fewer.point_ids[0]));
}

#[test]
fn calls_of_different_minutes_are_different_points() {
    let mut later = genai(2, 0, "search");
    later.end_time_unix_nano += 61_000_000_000;
    let seen = extract(vec![genai(1, 0, "search"), later]);
    assert_eq!(seen.point_ids.len(), 2);
}

#[test]
fn a_derived_span_without_valid_ids_or_time_is_refused_with_its_reason() {
    let mut no_trace = genai(1, 0, "search");
    no_trace.trace_id = vec![0; 16];
    let mut no_time = genai(2, 0, "search");
    no_time.start_time_unix_nano = 0;
    no_time.end_time_unix_nano = 0;
    let seen = extract(vec![no_trace, no_time]);
    let reasons: Vec<RejectReason> = seen.rejections.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        [RejectReason::InvalidTraceId, RejectReason::MissingTime]
    );
    assert!(seen.rejections.iter().all(|r| r.signal == Signal::Traces));
    assert!(seen.counts.is_empty());
}

#[test]
fn a_hostile_tool_name_is_refused_and_a_hostile_target_is_only_text() {
    let huge = "x".repeat(Limits::default().max_value_bytes + 1);
    let seen = extract(vec![genai(1, 0, &huge)]);
    assert_eq!(seen.rejections[0].reason, RejectReason::ValueTooLong);
    assert!(seen.rejections[0].input.len() <= Limits::default().max_rejected_copy_bytes);
    let seen = extract(vec![mcp(
        1,
        0,
        vec![
            text(semconv::GEN_AI_TOOL_NAME, "../../etc/passwd"),
            text(semconv::SERVER_ADDRESS, "host\n\u{0}name"),
        ],
    )]);
    assert_eq!(
        seen.counts,
        [count(
            "mcp",
            "../../etc/passwd",
            "host\n\u{0}name",
            "unverified",
            1
        )]
    );
}

#[test]
fn credentials_and_queries_never_reach_a_target_even_in_malformed_urls() {
    let target_of = |url: &str| {
        let seen = extract(vec![http(
            1,
            0,
            vec![
                text(semconv::HTTP_METHOD, "GET"),
                text(semconv::HTTP_URL, url),
            ],
        )]);
        seen.counts[0].2.clone()
    };
    // A password holding an unencoded `/` or `#`: everything to the last `@` is user info.
    assert_eq!(
        target_of("https://alice:pa/ss@h.test/"),
        "https://h.test:443"
    );
    assert_eq!(target_of("https://bob:1234#x@h.test"), "https://h.test:443");
    // An `@` in the query is not user information.
    assert_eq!(
        target_of("https://api.test/x?e=alice@corp.test"),
        "https://api.test:443"
    );
    // Not a URL: no part of it passes for a scheme or a host.
    assert_eq!(
        target_of("/reset?email=a@b.test&next=http://h"),
        "http://unknown:80"
    );
    assert_eq!(target_of("https://h.test:12ab/"), "https://unknown:443");
}

#[test]
fn spans_of_one_call_are_gathered_however_their_ids_and_nesting_chain() {
    // A (id x), B (id y), C under B (id x), E (id y): one call, through C.
    let with_id = |mut span: Span, id: &str| {
        span.attributes.push(text(semconv::GEN_AI_TOOL_CALL_ID, id));
        span
    };
    let seen = extract(vec![
        with_id(genai(1, 0, "fetch"), "x"),
        failed(with_id(genai(2, 0, "fetch"), "y"), Some("TimeoutError")),
        with_id(mcp(3, 2, vec![]), "x"),
        with_id(mcp(5, 0, vec![]), "y"),
    ]);
    assert_eq!(
        seen.counts,
        [count("genai", "fetch", "fetch", "access_failure", 1)]
    );
    assert_eq!(seen.events.len(), 1, "one event for the one call");
    assert_eq!(seen.stats.joined_into_derived, 3);
}

#[test]
fn a_failure_anywhere_in_a_call_outweighs_a_cancellation() {
    let outer = failed(
        genai(1, 0, "fetch"),
        Some("asyncio.exceptions.CancelledError"),
    );
    let inner = mcp(2, 1, vec![text(attr::ERROR_TYPE, "tool_error")]);
    let seen = extract(vec![inner, outer]);
    assert_eq!(
        seen.counts,
        [count("genai", "fetch", "fetch", "access_failure", 1)]
    );
    assert_eq!(seen.events[0].failure_kind, FailureKind::ToolError.as_str());
}

#[test]
fn a_span_sent_twice_in_one_request_is_one_call() {
    let span = || failed(http(1, 0, vec![text(semconv::HTTP_METHOD, "GET")]), None);
    let seen = extract(vec![span(), span()]);
    assert_eq!(
        seen.counts,
        [count(
            "http",
            "GET",
            "http://unknown:80",
            "access_failure",
            1
        )]
    );
    assert_eq!(seen.events.len(), 1);
    assert_eq!(seen.stats.joined_into_derived, 1);
}

#[test]
fn tool_names_past_a_services_cap_are_folded_too() {
    let derivation = Derivation::new(DerivedConfig {
        max_targets_per_service: 3,
        ..DerivedConfig::default()
    });
    // Each call has a new tool, which is also its target: two values per call.
    let seen = extract_with(
        vec![genai(1, 0, "a"), genai(2, 0, "b"), genai(3, 0, "c")],
        &derivation,
    );
    assert_eq!(
        seen.counts,
        [
            count("genai", "a", "a", "unverified", 1),
            count("genai", OTHER_TARGET, "b", "unverified", 1),
            count("genai", OTHER_TARGET, OTHER_TARGET, "unverified", 1),
        ]
    );
    assert_eq!(seen.stats.folded_targets, 2);
}

#[test]
fn failed_calls_past_the_event_limit_are_counted_with_one_rejection_for_all() {
    let limits = Limits {
        max_events_per_request: 1,
        ..Limits::default()
    };
    let request = request(vec![
        failed(genai(1, 0, "a"), Some("TimeoutError")),
        failed(genai(2, 0, "a"), Some("TimeoutError")),
        failed(genai(3, 0, "a"), Some("TimeoutError")),
    ]);
    let derivation = Derivation::default();
    let received = Received {
        collector_id: "c-1",
        time_unix_nano: END + 5,
        limits: &limits,
        derivation: &derivation,
    };
    let out = extract_traces(&request, &received);
    assert_eq!(out.events.len(), 1);
    let counted: u64 = out.counts.iter().map(|c| c.value).sum();
    assert_eq!(counted, 3, "every call is still counted");
    let [summary] = out.rejections.as_slice() else {
        panic!("{:?}", out.rejections);
    };
    assert_eq!(summary.reason, RejectReason::TooManyEvents);
    assert_eq!(summary.count, 2);
    assert_eq!(out.derived.events_over_limit, 2);
}

#[test]
fn a_failed_call_keeps_its_message_exception_json_rpc_code_call_id_and_request_id() {
    let mut outer = genai(1, 0, "search");
    outer
        .attributes
        .push(text(semconv::GEN_AI_TOOL_CALL_ID, "call_7"));
    let mut inner = failed(
        mcp(2, 1, vec![int(semconv::RPC_RESPONSE_STATUS_CODE, -32602)]),
        Some("McpError"),
    );
    inner.events[0].attributes.push(text(
        semconv::EXCEPTION_MESSAGE,
        "invalid params: api_key=s3cr3t",
    ));
    let mut request = failed(
        http(
            3,
            0,
            vec![
                text(semconv::HTTP_REQUEST_METHOD, "GET"),
                text(semconv::URL_FULL, "https://api.example/v1"),
                int(attr::HTTP_STATUS_CODE, 503),
            ],
        ),
        None,
    );
    request.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: "upstream unavailable".to_owned(),
    });
    request.attributes.push(KeyValue {
        key: semconv::HTTP_RESPONSE_HEADER_X_REQUEST_ID.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::ArrayValue(
                opentelemetry_proto::tonic::common::v1::ArrayValue {
                    values: vec![AnyValue {
                        value: Some(any_value::Value::StringValue("req-9".to_owned())),
                    }],
                },
            )),
        }),
        ..Default::default()
    });
    let seen = extract(vec![outer, inner, request]);
    assert!(seen.rejections.is_empty(), "{:?}", seen.rejections);
    let by_source = |source: &str| {
        seen.events
            .iter()
            .find(|event| event.source.as_deref() == Some(source))
            .unwrap_or_else(|| panic!("a {source} event in {:?}", seen.events))
    };
    let tool = by_source("genai");
    assert_eq!(
        (
            tool.error_message.as_deref(),
            tool.exception_type.as_deref(),
            tool.rpc_status_code.as_deref(),
            tool.tool_call_id.as_deref(),
            tool.evidence_kind.as_deref(),
        ),
        (
            Some("invalid params: api_key=REDACTED"),
            Some("McpError"),
            Some("-32602"),
            Some("call_7"),
            None
        ),
        "the MCP span failed; the GenAI span it is joined into names the call and its id"
    );
    let http = by_source("http");
    assert_eq!(
        (
            http.error_message.as_deref(),
            http.exception_type.as_deref(),
            http.tool_call_id.as_deref(),
            http.evidence_kind.as_deref(),
            http.evidence_value.as_deref(),
        ),
        (
            Some("upstream unavailable"),
            None,
            None,
            Some("request_id"),
            Some("req-9")
        )
    );
}

#[test]
fn an_adapters_event_takes_the_call_id_of_the_genai_call_it_ran_in() {
    let mut outer = genai(1, 0, "search");
    outer
        .attributes
        .push(text(semconv::GEN_AI_TOOL_CALL_ID, "call_42"));
    let between = span(2, 1, "tool body", span::SpanKind::Internal, vec![]);
    let mut adapter = span(3, 2, names::TOOL_CALL_SPAN, span::SpanKind::Client, vec![]);
    adapter.events.push(span::Event {
        name: names::OUTCOME_EVENT.to_owned(),
        time_unix_nano: END,
        attributes: vec![
            text(attr::OUTCOME_CLASS, "access_failure"),
            text(attr::TOOL_NAME, "search"),
            text(attr::TOOL_TARGET, "https://search.example/v1?token=abc"),
            text(attr::FAILURE_KIND, "server_error"),
            text(attr::RETRY_ACTION, "permanent"),
            int(attr::RETRY_ATTEMPT, 1),
            int(attr::RETRY_MAX_ATTEMPTS, 1),
        ],
        ..Default::default()
    });
    let elsewhere = span(9, 0, names::TOOL_CALL_SPAN, span::SpanKind::Client, vec![]);
    let mut unrelated = adapter.clone();
    unrelated.span_id = elsewhere.span_id.clone();
    unrelated.parent_span_id = Vec::new();
    let seen = extract(vec![adapter, between, outer, unrelated]);
    assert!(seen.rejections.is_empty(), "{:?}", seen.rejections);
    let ids: Vec<(Option<&str>, Option<&str>)> = seen
        .events
        .iter()
        .map(|event| (event.source.as_deref(), event.tool_call_id.as_deref()))
        .collect();
    assert_eq!(
        ids,
        [(Some("adapter"), Some("call_42")), (Some("adapter"), None)],
        "the adapter's span under the GenAI call takes its id; one outside any call has none"
    );
    // Each event's target was redacted once, the one given an id included.
    assert_eq!(seen.redacted, 2);
}

#[test]
fn a_target_no_call_names_for_a_period_gives_up_its_place_under_the_cap() {
    // Room for one target and the tool `GET`; periods of an hour.
    let derivation = Derivation::new(DerivedConfig {
        max_targets_per_service: 2,
        forget_targets_after: std::time::Duration::from_secs(3600),
        ..DerivedConfig::default()
    });
    let call = |host: &str| {
        vec![http(
            1,
            0,
            vec![
                text(semconv::HTTP_METHOD, "GET"),
                text(semconv::HTTP_URL, &format!("http://{host}/")),
            ],
        )]
    };
    let hour = 3_600_000_000_000;
    let start = END - END % hour;
    let target = |seen: &Seen| seen.counts[0].2.clone();
    assert_eq!(
        target(&extract_at(call("a"), &derivation, start)),
        "http://a:80"
    );
    assert_eq!(
        target(&extract_at(call("b"), &derivation, start + 1)),
        OTHER_TARGET
    );
    // Named in the next period, `a` keeps its place through the one after.
    assert_eq!(
        target(&extract_at(call("a"), &derivation, start + hour)),
        "http://a:80"
    );
    assert_eq!(
        target(&extract_at(call("b"), &derivation, start + 2 * hour)),
        OTHER_TARGET
    );
    // A period in which nothing names `a`: from the one after it, `b` takes the place.
    let later = start + 4 * hour;
    assert_eq!(
        target(&extract_at(call("b"), &derivation, later)),
        "http://b:80"
    );
    assert_eq!(
        target(&extract_at(call("a"), &derivation, later + 1)),
        OTHER_TARGET
    );
}

/// A span carrying a captured result in `key`.
fn with_result(mut span: Span, key: &str, result: &str) -> Span {
    span.attributes.push(text(key, result));
    span
}

fn openinference_tool(id: u8, tool: &str) -> Span {
    span(
        id,
        0,
        tool,
        span::SpanKind::Internal,
        vec![
            text("openinference.span.kind", "TOOL"),
            text(attr::TOOL_NAME, tool),
        ],
    )
}

fn vercel_tool(id: u8, tool: &str) -> Span {
    span(
        id,
        0,
        "ai.toolCall",
        span::SpanKind::Internal,
        vec![
            text("ai.operationId", "ai.toolCall"),
            text("ai.toolCall.name", tool),
            text("ai.toolCall.id", &format!("call_{tool}_{id}")),
        ],
    )
}

#[test]
fn openinference_tool_spans_count_with_their_convention_and_handled_errors_fail() {
    // As LangChain traced by OpenInference sends them: a success, a raised error (status
    // ERROR with an exception event), and an error LangChain handled (status OK, the
    // ToolMessage's status in the captured output).
    let mut ok = with_result(
        openinference_tool(1, "lookup"),
        "output.value",
        r#"{"type": "tool", "data": {"content": "found q1", "tool_call_id": "c-1", "status": "success"}}"#,
    );
    ok.status = Some(Status {
        code: status::StatusCode::Ok as i32,
        ..Default::default()
    });
    let raised = failed(openinference_tool(2, "broken"), Some("ConnectionError"));
    let mut handled = with_result(
        openinference_tool(3, "guarded"),
        "output.value",
        r#"{"type": "tool", "data": {"content": "quota exceeded for q1", "tool_call_id": "c-3", "status": "error"}}"#,
    );
    handled.status = ok.status.clone();
    let seen = extract(vec![ok, raised, handled]);
    assert_eq!(
        seen.counts,
        [
            count("genai", "broken", "broken", "access_failure", 1),
            count("genai", "guarded", "guarded", "access_failure", 1),
            count("genai", "lookup", "lookup", "unverified", 1),
        ]
    );
    assert_eq!(seen.conventions, ["openinference"; 3]);
    let by_tool = |tool: &str| {
        seen.events
            .iter()
            .find(|e| e.tool_name == tool)
            .unwrap_or_else(|| panic!("no event of {tool}: {:?}", seen.events))
    };
    let broken = by_tool("broken");
    assert_eq!(broken.failure_kind, FailureKind::Connect.as_str());
    assert_eq!(broken.convention.as_deref(), Some("openinference"));
    let guarded = by_tool("guarded");
    assert_eq!(guarded.failure_kind, FailureKind::ToolError.as_str());
    assert_eq!(guarded.error_type.as_deref(), Some("tool_error"));
    let message = guarded.error_message.as_deref().unwrap();
    assert!(
        message.contains("output.value") && message.contains("/data/status = \"error\""),
        "{message}"
    );
    assert_eq!(seen.stats.result_failures, 1);
}

#[test]
fn an_openinference_exception_event_alone_marks_a_failure() {
    let mut span = openinference_tool(1, "broken");
    span.events.push(span::Event {
        name: semconv::EXCEPTION_EVENT.to_owned(),
        time_unix_nano: END,
        attributes: vec![text(semconv::EXCEPTION_TYPE, "TimeoutError")],
        ..Default::default()
    });
    let seen = extract(vec![span]);
    assert_eq!(
        seen.counts,
        [count("genai", "broken", "broken", "access_failure", 1)]
    );
    assert_eq!(seen.events[0].failure_kind, FailureKind::Timeout.as_str());
}

#[test]
fn a_result_failure_of_a_call_an_earlier_request_counted_is_not_counted_again() {
    let mcp_error = r#"{"content":[],"isError":true}"#;
    let span = || {
        with_result(
            vercel_tool(2, "mcp_search"),
            "ai.toolCall.result",
            mcp_error,
        )
    };
    let derivation = Derivation::default();
    let first = stored(vec![span()], &derivation, END + 1);
    assert_eq!(first.stats.result_failures, 1);
    // The same span again, in a later request: joined, and neither counted nor a failure twice.
    let again = stored(vec![span()], &derivation, END + 2);
    assert_eq!(again.counts, []);
    assert_eq!(again.stats.joined_across_requests, 1);
    assert_eq!(again.stats.result_failures, 0);
}

#[test]
fn a_vercel_mcp_result_with_is_error_fails_a_call_its_span_reports_as_success() {
    let mcp_error =
        r#"{"content":[{"type":"text","text":"upstream index unavailable"}],"isError":true}"#;
    let seen = extract(vec![
        with_result(
            vercel_tool(1, "weather"),
            "ai.toolCall.result",
            r#"{"city":"Oslo"}"#,
        ),
        with_result(
            vercel_tool(2, "mcp_search"),
            "ai.toolCall.result",
            mcp_error,
        ),
        failed(vercel_tool(3, "explode"), Some("Error")),
        failed(vercel_tool(4, "slow"), Some("AbortError")),
    ]);
    assert_eq!(
        seen.counts,
        [
            count("genai", "explode", "explode", "access_failure", 1),
            count("genai", "mcp_search", "mcp_search", "access_failure", 1),
            count("genai", "slow", "slow", "cancelled", 1),
            count("genai", "weather", "weather", "unverified", 1),
        ]
    );
    assert_eq!(seen.conventions, ["vercel-ai"; 4]);
    let search = seen
        .events
        .iter()
        .find(|e| e.tool_name == "mcp_search")
        .unwrap();
    assert_eq!(search.failure_kind, FailureKind::ToolError.as_str());
    assert_eq!(search.tool_call_id.as_deref(), Some("call_mcp_search_2"));
    assert_eq!(search.convention.as_deref(), Some("vercel-ai"));
}

#[test]
fn a_result_over_the_bound_is_not_read_and_is_counted() {
    let derivation = Derivation::new(DerivedConfig {
        max_result_bytes: 16,
        ..DerivedConfig::default()
    });
    let mcp_error = r#"{"content":[],"isError":true}"#;
    let seen = extract_with(
        vec![with_result(
            vercel_tool(1, "search"),
            "ai.toolCall.result",
            mcp_error,
        )],
        &derivation,
    );
    assert_eq!(
        seen.counts,
        [count("genai", "search", "search", "unverified", 1)]
    );
    assert_eq!(seen.stats.results_unread, 1);
    assert_eq!(seen.stats.result_failures, 0);
}

#[test]
fn openllmetry_failure_attributes_and_handled_errors_fail_its_calls() {
    let tool = |id: u8, name: &str, extra: Vec<KeyValue>| {
        let mut attributes = vec![
            text("traceloop.span.kind", "tool"),
            text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
            text(semconv::GEN_AI_TOOL_NAME, name),
        ];
        attributes.extend(extra);
        span(
            id,
            0,
            &format!("{} {name}", semconv::EXECUTE_TOOL),
            span::SpanKind::Internal,
            attributes,
        )
    };
    let handled = r#"{"output": {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"], "kwargs": {"content": "quota exceeded", "status": "error"}}, "kwargs": {"name": "guarded"}}"#;
    let success = r#"{"output": {"lc": 1, "kwargs": {"content": "found", "status": "success"}}}"#;
    let seen = extract(vec![
        tool(1, "lookup", vec![text("gen_ai.tool.call.result", success)]),
        // Marked failed by the task status alone, without a span status.
        tool(2, "broken", vec![text("gen_ai.task.status", "failure")]),
        tool(3, "guarded", vec![text("gen_ai.tool.call.result", handled)]),
    ]);
    assert_eq!(
        seen.counts,
        [
            count("genai", "broken", "broken", "access_failure", 1),
            count("genai", "guarded", "guarded", "access_failure", 1),
            count("genai", "lookup", "lookup", "unverified", 1),
        ]
    );
    assert_eq!(seen.conventions, ["openllmetry"; 3]);
}

#[test]
fn a_declared_convention_recognises_a_made_up_framework() {
    let acme: RawConvention = toml::from_str(
        "name = \"acme-agent\"\nlayer = \"genai\"\n\
         recognise = [{ attribute = \"acme.kind\", equals = \"tool\" }]\n\
         tool_name = [\"acme.tool\"]\ncall_id = [\"acme.call\"]\n\
         failure = [{ attribute = \"acme.outcome\", equals = \"failed\" }]\n\
         cancel = [{ attribute = \"acme.aborted\" }]\n\
         result = [\"acme.result\"]\n\
         result_markers = [{ pointer = \"/ok\", equals = false }]",
    )
    .unwrap();
    let derivation = Derivation::new(DerivedConfig {
        conventions: Conventions::new(vec![acme], &[], |_| true).unwrap(),
        ..DerivedConfig::default()
    });
    let tool = |id: u8, name: &str, extra: Vec<KeyValue>| {
        let mut attributes = vec![text("acme.kind", "tool"), text("acme.tool", name)];
        attributes.extend(extra);
        span(id, 0, "acme", span::SpanKind::Internal, attributes)
    };
    let seen = extract_with(
        vec![
            tool(1, "fine", vec![text("acme.result", r#"{"ok": true}"#)]),
            tool(2, "refused", vec![text("acme.result", r#"{"ok": false}"#)]),
            tool(3, "failed", vec![text("acme.outcome", "failed")]),
            tool(4, "stopped", vec![text("acme.aborted", "yes")]),
            // Not a tool span of the framework.
            span(
                5,
                0,
                "acme",
                span::SpanKind::Internal,
                vec![text("acme.kind", "llm")],
            ),
        ],
        &derivation,
    );
    assert_eq!(
        seen.counts,
        [
            count("genai", "failed", "failed", "access_failure", 1),
            count("genai", "fine", "fine", "unverified", 1),
            count("genai", "refused", "refused", "access_failure", 1),
            count("genai", "stopped", "stopped", "cancelled", 1),
        ]
    );
    assert_eq!(seen.conventions, ["acme-agent"; 4]);
    assert_eq!(seen.ignored, 1);
}

#[test]
fn a_pydantic_ai_deferred_call_is_cancelled_and_a_validation_failure_fails() {
    let tool = |id: u8, name: &str, extra: Vec<KeyValue>| {
        let mut attributes = vec![
            text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
            text(semconv::GEN_AI_TOOL_NAME, name),
        ];
        attributes.extend(extra);
        span(
            id,
            0,
            &format!("{} {name}", semconv::EXECUTE_TOOL),
            span::SpanKind::Internal,
            attributes,
        )
    };
    let spans = vec![
        tool(
            1,
            "approve",
            vec![text("pydantic_ai.tool.deferral.name", "approval")],
        ),
        tool(
            2,
            "typed",
            vec![text("pydantic_ai.tool.failure_stage", "validation")],
        ),
    ];
    let limits = Limits::default();
    let mut request = request(spans);
    request.resource_spans[0].scope_spans[0].scope = Some(InstrumentationScope {
        name: "pydantic-ai".to_owned(),
        ..Default::default()
    });
    let derivation = Derivation::default();
    let received = Received {
        collector_id: "c-1",
        time_unix_nano: END + 5,
        limits: &limits,
        derivation: &derivation,
    };
    let out = extract_traces(&request, &received);
    let mut classes: Vec<(String, String, Option<String>)> = out
        .counts
        .iter()
        .map(|c| {
            (
                c.tool_name.clone(),
                c.outcome_class.clone(),
                c.convention.clone(),
            )
        })
        .collect();
    classes.sort();
    let pydantic = Some("pydantic-ai".to_owned());
    assert_eq!(
        classes,
        [
            (
                "approve".to_owned(),
                "cancelled".to_owned(),
                pydantic.clone()
            ),
            ("typed".to_owned(), "access_failure".to_owned(), pydantic),
        ]
    );
}

#[test]
fn spans_with_a_sampling_threshold_are_weighted_and_those_without_are_marked_unknown() {
    let sampled = |id: u8, tool: &str, state: &str| {
        let mut span = genai(id, 0, tool);
        span.trace_state = state.to_owned();
        span
    };
    let limits = Limits::default();
    let request = request(vec![
        // Kept at one in four and one in two: they stand for six calls.
        sampled(1, "search", "ot=th:c"),
        sampled(2, "search", "ot=rv:00000000000001;th:8"),
        failed(sampled(3, "search", "ot=th:c"), Some("TimeoutError")),
        // No threshold: one span is one call, whatever was left out.
        sampled(4, "search", "vendor=x"),
        sampled(5, "search", "ot=th:zz"),
    ]);
    let derivation = Derivation::default();
    let received = Received {
        collector_id: "c-1",
        time_unix_nano: END + 5,
        limits: &limits,
        derivation: &derivation,
    };
    let out = extract_traces(&request, &received);
    let mut points: Vec<(String, String, u64)> = out
        .counts
        .iter()
        .map(|c| {
            (
                c.outcome_class.clone(),
                c.sampling.clone().unwrap_or_default(),
                c.value,
            )
        })
        .collect();
    points.sort();
    assert_eq!(
        points,
        [
            ("access_failure".to_owned(), "weighted".to_owned(), 4),
            ("unverified".to_owned(), "unknown".to_owned(), 2),
            ("unverified".to_owned(), "weighted".to_owned(), 6),
        ]
    );
    assert_eq!(out.derived.sampling_unknown, 2);
    // One failure event per failed span kept: events are not weighted.
    assert_eq!(out.events.len(), 1);
}
