//! The OTLP trace requests the seeds are made of: good ones, and ones with something to refuse.

use candor_schema::names::{attr, semconv};
use candor_schema::{AccessFailureKind, OutcomeClass, PartialKind, RetryAction};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::{Span, Status, span, status};

use crate::otlp::{
    access_failure, event, int, partial, service, span_of, text, tool_span, traces, traces_of,
    with, with_text, without,
};
use crate::{EVENT_TIME, PATCHED_TOOL, TRACE_ID};

pub(crate) fn retried_server_error() -> ExportTraceServiceRequest {
    traces(vec![tool_span(
        1,
        vec![event(access_failure(
            AccessFailureKind::ServerError,
            RetryAction::Retry,
            1,
        ))],
    )])
}

pub(crate) fn declared_partial() -> ExportTraceServiceRequest {
    traces(vec![tool_span(
        2,
        vec![event(partial(PartialKind::DeclaredTotal))],
    )])
}

/// Events of every class (success and empty are refused as events), spans without one, and a
/// resource without a service name.
pub(crate) fn every_class() -> ExportTraceServiceRequest {
    let exception = span::Event {
        time_unix_nano: EVENT_TIME,
        name: "exception".to_owned(),
        ..Default::default()
    };
    let af = |kind, action, attempt| event(access_failure(kind, action, attempt));
    let of_class = |class: OutcomeClass| {
        event(with_text(
            access_failure(AccessFailureKind::Timeout, RetryAction::Exhausted, 3),
            attr::OUTCOME_CLASS,
            class.as_str(),
        ))
    };
    traces_of(vec![
        (
            Some(service("checkout")),
            vec![
                tool_span(
                    1,
                    vec![
                        af(AccessFailureKind::Timeout, RetryAction::Retry, 1),
                        af(AccessFailureKind::RateLimited, RetryAction::Retry, 2),
                        af(AccessFailureKind::Timeout, RetryAction::Exhausted, 3),
                    ],
                ),
                tool_span(
                    2,
                    vec![af(AccessFailureKind::Auth, RetryAction::Permanent, 1)],
                ),
                tool_span(
                    3,
                    vec![
                        event(partial(PartialKind::SizeCap)),
                        event(partial(PartialKind::MidStream)),
                    ],
                ),
                tool_span(
                    4,
                    vec![
                        of_class(OutcomeClass::Success),
                        of_class(OutcomeClass::Empty),
                    ],
                ),
                tool_span(5, vec![exception.clone()]),
                tool_span(6, Vec::new()),
            ],
        ),
        (
            None,
            vec![tool_span(
                7,
                vec![
                    exception,
                    af(AccessFailureKind::Connect, RetryAction::Retry, 1),
                ],
            )],
        ),
    ])
}

/// Values outside the closed vocabularies, and kinds or actions that do not go with the class.
pub(crate) fn unknown_values() -> ExportTraceServiceRequest {
    let good = || access_failure(AccessFailureKind::ServerError, RetryAction::Retry, 1);
    traces(vec![tool_span(
        3,
        vec![
            event(with_text(good(), attr::OUTCOME_CLASS, "maybe")),
            event(with_text(good(), attr::OUTCOME_CLASS, "Access_Failure")),
            event(with_text(good(), attr::FAILURE_KIND, "melted")),
            event(with_text(good(), attr::RETRY_ACTION, "again")),
            event(with_text(
                good(),
                attr::FAILURE_KIND,
                PartialKind::SizeCap.as_str(),
            )),
            event(with_text(
                partial(PartialKind::DeclaredTotal),
                attr::RETRY_ACTION,
                RetryAction::Retry.as_str(),
            )),
            event(without(good(), attr::OUTCOME_CLASS)),
        ],
    )])
}

/// A value, a key and a service name past their bounds, and too many attributes.
pub(crate) fn oversized_values() -> ExportTraceServiceRequest {
    let good = || access_failure(AccessFailureKind::ServerError, RetryAction::Retry, 1);
    let mut long_key = good();
    long_key.push(text(&"k".repeat(5000), "v"));
    let mut crowd = good();
    crowd.extend((0..200).map(|i| int(&format!("extra.{i}"), i)));
    traces_of(vec![(
        Some(service(&"s".repeat(1000))),
        vec![tool_span(
            4,
            vec![
                event(with_text(good(), attr::TOOL_TARGET, &"x".repeat(5000))),
                event(long_key),
                event(crowd),
            ],
        )],
    )])
}

/// Attributes of the wrong type (bytes that are not UTF-8 among them), twice, or out of range.
pub(crate) fn wrong_types() -> ExportTraceServiceRequest {
    let good = || access_failure(AccessFailureKind::ServerError, RetryAction::Retry, 1);
    let mut twice = good();
    twice.push(text(
        attr::OUTCOME_CLASS,
        OutcomeClass::AccessFailure.as_str(),
    ));
    traces(vec![tool_span(
        5,
        vec![
            event(with_text(good(), attr::RETRY_ATTEMPT, "1")),
            event(with(
                good(),
                attr::HTTP_STATUS_CODE,
                any_value::Value::DoubleValue(503.0),
            )),
            event(with(
                good(),
                attr::OUTCOME_CLASS,
                any_value::Value::IntValue(4),
            )),
            event(with(
                good(),
                attr::TOOL_TARGET,
                any_value::Value::BytesValue(vec![0xff, 0xfe, 0x00, 0x80]),
            )),
            event(twice),
            event(with(
                good(),
                attr::HTTP_STATUS_CODE,
                any_value::Value::IntValue(-1),
            )),
            event(with(
                good(),
                attr::RETRY_ATTEMPT,
                any_value::Value::IntValue(0),
            )),
            event(with(
                good(),
                attr::RETRY_ATTEMPT,
                any_value::Value::IntValue(4),
            )),
            event(without(good(), attr::RETRY_BACKOFF_MS)),
        ],
    )])
}

/// Trace and span ids of the wrong length or all zero, and an event without a time.
pub(crate) fn bad_ids() -> ExportTraceServiceRequest {
    let good = || {
        event(access_failure(
            AccessFailureKind::Timeout,
            RetryAction::Retry,
            1,
        ))
    };
    let mut timeless = good();
    timeless.time_unix_nano = 0;
    traces(vec![
        span_of(&[1, 2, 3], &[6; 8], vec![good()]),
        span_of(&[0; 16], &[6; 8], vec![good()]),
        span_of(&TRACE_ID, &[0; 8], vec![good()]),
        span_of(&TRACE_ID, &[], vec![good()]),
        span_of(&TRACE_ID, &[6; 8], vec![timeless]),
    ])
}

/// Twelve good events over four spans and two services: within the default limit, past the
/// tight one.
pub(crate) fn many_events() -> ExportTraceServiceRequest {
    let spans = |first: u8| {
        (first..first + 2)
            .map(|id| {
                tool_span(
                    id,
                    (1..=3)
                        .map(|attempt| {
                            event(access_failure(
                                AccessFailureKind::ServerError,
                                RetryAction::Retry,
                                attempt,
                            ))
                        })
                        .collect(),
                )
            })
            .collect::<Vec<_>>()
    };
    traces_of(vec![
        (Some(service("checkout")), spans(10)),
        (Some(service("billing")), spans(20)),
    ])
}

/// A request whose tool name is [`PATCHED_TOOL`], for the seeds that break its bytes.
pub(crate) fn to_patch() -> ExportTraceServiceRequest {
    let attributes = with_text(
        access_failure(AccessFailureKind::Deadline, RetryAction::Exhausted, 3),
        attr::TOOL_NAME,
        PATCHED_TOOL,
    );
    traces(vec![tool_span(9, vec![event(attributes)])])
}

/// Standard spans of every derived source, nested as real emitters nest them: an adapter's call
/// with an HTTP span under it, a GenAI tool span with an MCP span and an HTTP span under it, a
/// cancelled sibling, a failed HTTP span with a credential in its URL.
pub(crate) fn derived_spans() -> ExportTraceServiceRequest {
    let derived = |id: u8, parent: u8, kind: span::SpanKind, name: &str, attributes| Span {
        parent_span_id: if parent == 0 {
            Vec::new()
        } else {
            vec![parent; 8]
        },
        name: name.to_owned(),
        kind: kind as i32,
        attributes,
        ..tool_span(id, Vec::new())
    };
    let failed = |mut span: Span, exception: &str| {
        span.status = Some(Status {
            code: status::StatusCode::Error as i32,
            ..Default::default()
        });
        span.events.push(span::Event {
            name: semconv::EXCEPTION_EVENT.to_owned(),
            time_unix_nano: EVENT_TIME,
            attributes: vec![text(semconv::EXCEPTION_TYPE, exception)],
            ..Default::default()
        });
        span
    };
    let internal = span::SpanKind::Internal;
    let client = span::SpanKind::Client;
    let adapter = tool_span(1, Vec::new());
    let under_adapter = derived(2, 1, client, "GET", vec![text(semconv::HTTP_METHOD, "GET")]);
    let genai = derived(
        3,
        0,
        internal,
        "execute_tool fetch",
        vec![
            text(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
            text(semconv::GEN_AI_TOOL_NAME, "fetch"),
            text(semconv::GEN_AI_TOOL_CALL_ID, "call-1"),
        ],
    );
    let mcp = derived(
        4,
        3,
        client,
        "MCP send tools/call fetch",
        vec![
            text(semconv::MCP_METHOD_NAME, semconv::MCP_TOOLS_CALL),
            text(attr::ERROR_TYPE, "tool_error"),
            int(semconv::RPC_RESPONSE_STATUS_CODE, -32603),
        ],
    );
    let request = failed(
        derived(
            5,
            3,
            client,
            "GET",
            vec![
                text(semconv::HTTP_REQUEST_METHOD, "GET"),
                text(
                    semconv::URL_FULL,
                    "https://u:secret@api.test:8443/v1/x?token=t",
                ),
                text(semconv::URL_TEMPLATE, "/v1/{id}"),
                int(attr::HTTP_STATUS_CODE, 503),
            ],
        ),
        "httpx.HTTPStatusError",
    );
    let cancelled = failed(
        derived(6, 0, internal, "execute_tool slow", Vec::new()),
        "asyncio.exceptions.CancelledError",
    );
    traces_of(vec![(
        Some(service("agent")),
        vec![adapter, under_adapter, genai, mcp, request, cancelled],
    )])
}
