//! The official OpenTelemetry Python SDK as a client, over gRPC and over HTTP/protobuf: span
//! events, log-based events (a log record named `tool.outcome`, OTEP 4430) and counter points.

use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::kafka::{decode_all, read_topic};
use candor_e2e::run_python_client;
use candor_e2e::tansu::Tansu;
use candor_records::proto::{OutcomeCount, OutcomeEvent, Temporality};
use candor_schema::names::{self, attr, resource, topic};
use serde_json::{Value, json};

fn spec(protocol: &str, endpoint: &str) -> Value {
    let target = format!("https://lookup.test/{protocol}");
    json!({
        "protocol": protocol,
        "endpoint": endpoint,
        "resource": { resource::SERVICE_NAME: "python-svc", resource::SERVICE_INSTANCE_ID: "py-1" },
        "span": names::TOOL_CALL_SPAN,
        "event": names::OUTCOME_EVENT,
        "events": [
            {
                attr::OUTCOME_CLASS: "access_failure", attr::TOOL_NAME: "lookup", attr::TOOL_TARGET: target,
                attr::FAILURE_KIND: "rate_limited", attr::RETRY_ACTION: "retry", attr::RETRY_ATTEMPT: 1,
                attr::RETRY_MAX_ATTEMPTS: 2, attr::RETRY_BACKOFF_MS: 250, attr::HTTP_STATUS_CODE: 429,
                attr::ERROR_TYPE: "429",
            },
            {
                attr::OUTCOME_CLASS: "access_failure", attr::TOOL_NAME: "lookup", attr::TOOL_TARGET: target,
                attr::FAILURE_KIND: "rate_limited", attr::RETRY_ACTION: "exhausted", attr::RETRY_ATTEMPT: 2,
                attr::RETRY_MAX_ATTEMPTS: 2, attr::HTTP_STATUS_CODE: 429, attr::ERROR_TYPE: "429",
            },
        ],
        "log_events": [
            {
                attr::OUTCOME_CLASS: "partial", attr::TOOL_NAME: "lookup-log", attr::TOOL_TARGET: target,
                attr::FAILURE_KIND: "size_cap", attr::RETRY_ACTION: "accept_partial", attr::RETRY_ATTEMPT: 1,
                attr::RETRY_MAX_ATTEMPTS: 2, attr::PARTIAL_RETURNED: 50, attr::COVERAGE: "the first 50",
                attr::DROPPED: "the rest",
            },
        ],
        "counter": names::OUTCOMES_COUNTER,
        "unit": names::OUTCOMES_COUNTER_UNIT,
        "points": [
            { "value": 4, "attributes": { attr::TOOL_NAME: "lookup", attr::TOOL_TARGET: target, attr::OUTCOME_CLASS: "success" } },
            { "value": 1, "attributes": { attr::TOOL_NAME: "lookup", attr::TOOL_TARGET: target, attr::OUTCOME_CLASS: "access_failure" } },
        ],
    })
}

async fn send_with_python(spec: &Value) -> Value {
    run_python_client("otel_python.py", spec, Duration::from_secs(60)).await
}

async fn python_records_match(protocol: &str) {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let endpoint = match protocol {
        "grpc" => collector.grpc_endpoint.clone(),
        _ => collector.http_endpoint.clone(),
    };
    let spec = spec(protocol, &endpoint);
    let sent = send_with_python(&spec).await;

    let (mut events, logged): (Vec<OutcomeEvent>, Vec<OutcomeEvent>) = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        3,
        Duration::from_secs(30),
    ))
    .into_iter()
    .partition(|event: &OutcomeEvent| event.tool_name != "lookup-log");
    events.sort_by_key(|e| e.retry_attempt);
    assert_eq!(events.len(), 2, "{events:#?}");
    // The log-based event, recorded inside the same span, lands as the span events do.
    assert_eq!(logged.len(), 1, "{logged:#?}");
    let log = &logged[0];
    let want = &spec["log_events"][0];
    assert_eq!(log.trace_id, sent["trace_id"].as_str().unwrap());
    assert_eq!(log.span_id, sent["span_id"].as_str().unwrap());
    assert_eq!(log.service_name, "python-svc");
    assert_eq!(log.outcome_class, want[attr::OUTCOME_CLASS]);
    assert_eq!(log.failure_kind, want[attr::FAILURE_KIND]);
    assert_eq!(log.retry_action, want[attr::RETRY_ACTION]);
    assert_eq!(log.partial_returned, want[attr::PARTIAL_RETURNED].as_u64());
    assert_eq!(log.coverage.as_deref(), want[attr::COVERAGE].as_str());
    assert_eq!(log.dropped.as_deref(), want[attr::DROPPED].as_str());
    for (event, want) in events.iter().zip(spec["events"].as_array().unwrap()) {
        assert_eq!(event.trace_id, sent["trace_id"].as_str().unwrap());
        assert_eq!(event.span_id, sent["span_id"].as_str().unwrap());
        assert_eq!(event.service_name, "python-svc");
        assert_eq!(event.service_instance_id, "py-1");
        assert_eq!(event.outcome_class, want[attr::OUTCOME_CLASS]);
        assert_eq!(event.tool_name, want[attr::TOOL_NAME]);
        assert_eq!(event.tool_target, want[attr::TOOL_TARGET]);
        assert_eq!(event.failure_kind, want[attr::FAILURE_KIND]);
        assert_eq!(event.retry_action, want[attr::RETRY_ACTION]);
        assert_eq!(
            Some(u64::from(event.retry_attempt)),
            want[attr::RETRY_ATTEMPT].as_u64()
        );
        assert_eq!(
            event.retry_backoff_ms,
            want[attr::RETRY_BACKOFF_MS].as_u64()
        );
        assert_eq!(
            event.http_status_code.map(u64::from),
            want[attr::HTTP_STATUS_CODE].as_u64()
        );
        assert_eq!(event.error_type.as_deref(), want[attr::ERROR_TYPE].as_str());
    }

    let counts: Vec<OutcomeCount> = decode_all(&read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_COUNTS,
        2,
        Duration::from_secs(30),
    ));
    let value = |class: &str| {
        counts
            .iter()
            .find(|c| c.outcome_class == class)
            .map(|c| c.value)
    };
    assert_eq!(value("success"), Some(4), "{counts:#?}");
    assert_eq!(value("access_failure"), Some(1), "{counts:#?}");
    assert!(
        counts
            .iter()
            .all(|c| c.temporality == Temporality::Cumulative as i32)
    );
    assert!(counts.iter().all(|c| c.service_name == "python-svc"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_grpc_lands_field_for_field() {
    python_records_match("grpc").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_http_protobuf_lands_field_for_field() {
    python_records_match("http").await;
}
