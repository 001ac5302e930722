//! The three adapters over the whole pipeline: a Python service reporting through the official
//! OpenTelemetry Python SDK (`adapters/python`), a Node service through the OpenTelemetry JS SDK
//! over OTLP/HTTP (`adapters/typescript`) and a Rust service, each calling the same scripted
//! tool, land in the tables with the same `candor rates` and `candor incident` answers.

use std::path::Path;
use std::time::{Duration, SystemTime};

use candor_adapter::otlp::{self, OtlpConfig};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier, Jitter, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::query::{Answer, candor};
use candor_e2e::tansu::Tansu;
use candor_e2e::{rfc3339, run_node_client, run_python_client, tempdir, wait_for};
use candor_schema::names::resource;
use serde_json::{Value, json};

use crate::{ingest, reconcile};

const RUST_TARGET: &str = "http://inventory.test/v1/rust";
const PYTHON_TARGET: &str = "http://inventory.test/v1/python";
const TS_TARGET: &str = "http://inventory.test/v1/typescript";
const CALLS: usize = 40;
const MAX_ATTEMPTS: u32 = 2;
/// The adapters draw the same backoff, so the services' calls take the same time.
const JITTER: f64 = 0.1;

/// The n-th call's responses, one per attempt: successes, a partial, an exhausted and a
/// permanent AccessFailure, and a retry that succeeds.
fn script(n: usize) -> Vec<(u16, &'static str)> {
    match n % 5 {
        0 => vec![(200, r#"{"items":[1]}"#)],
        1 => vec![(200, r#"{"items":[1],"total":3}"#)],
        2 => vec![(503, ""), (503, "")],
        3 => vec![(400, "")],
        _ => vec![(503, ""), (200, r#"{"items":[2]}"#)],
    }
}

/// What the Python and the Node service are asked to do: the scripted calls, reported to
/// `endpoint` as `service`/`instance`, to `target`.
fn service_spec(endpoint: &str, service: &str, instance: &str, target: &str) -> Value {
    let calls: Vec<Value> = (0..CALLS)
        .map(|n| {
            script(n)
                .into_iter()
                .map(|(status, body)| json!({ "status": status, "body": body }))
                .collect()
        })
        .collect();
    json!({
        "endpoint": endpoint,
        "resource": { resource::SERVICE_NAME: service, resource::SERVICE_INSTANCE_ID: instance },
        "tool": "inventory",
        "target": target,
        "max_attempts": MAX_ATTEMPTS,
        "jitter": JITTER,
        "items_at": "/items",
        "total_at": "/total",
        "calls": calls,
    })
}

/// The classes a client printed.
fn classes_of(printed: &Value) -> Vec<String> {
    printed["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|class| class.as_str().unwrap().to_owned())
        .collect()
}

async fn run_python_service(endpoint: &str) -> Vec<String> {
    let spec = service_spec(endpoint, "checkout-py", "py-1", PYTHON_TARGET);
    classes_of(&run_python_client("adapter_service.py", &spec, Duration::from_secs(120)).await)
}

/// The Node service exports OTLP/HTTP: `endpoint` is the collector's HTTP receiver.
async fn run_typescript_service(endpoint: &str) -> Vec<String> {
    let spec = service_spec(endpoint, "checkout-ts", "ts-1", TS_TARGET);
    classes_of(&run_node_client("ts_adapter/service.mjs", &spec, Duration::from_secs(120)).await)
}

async fn run_rust_service(endpoint: &str) -> Vec<String> {
    let mut config = OtlpConfig::new(endpoint, "checkout-rs");
    config.service_instance_id = Some("rs-1".into());
    let guard = otlp::providers(config).unwrap();
    let adapter = Adapter::builder("inventory", RUST_TARGET)
        .classifier(
            HttpClassifier::new(NotFound::Unreachable)
                .items_at("/items")
                .total_at("/total"),
        )
        .retry(
            RetryPolicy::default()
                .with_max_attempts(MAX_ATTEMPTS)
                .unwrap(),
        )
        .jitter(Jitter::fixed(JITTER))
        .otlp(&guard)
        .build()
        .unwrap();
    let mut classes = Vec::new();
    for n in 0..CALLS {
        let tool = ScriptedTool::returning(
            script(n)
                .into_iter()
                .map(|(status, body)| ingest::json(status, body)),
        );
        let envelope = adapter.call(|ctx| tool.attempt(ctx)).await;
        classes.push(envelope.class().as_str().to_owned());
    }
    reconcile::flush(&guard).await;
    classes
}

/// `candor rates` per target over the window, and its rows.
fn rates(root: &Path, since: &str, until: &str) -> (Answer, Vec<Value>) {
    let answer = candor(
        root,
        &["rates", "--since", since, "--until", until, "--no-live"],
    );
    let rows = answer.rows();
    (answer, rows)
}

fn row_of<'a>(rows: &'a [Value], target: &str) -> Option<&'a Value> {
    rows.iter().find(|row| row["target"] == target)
}

/// An incident's event rows without what names the service, the call, the adapter or the time.
fn incident(root: &Path, target: &str, since: &str, until: &str) -> (Vec<Value>, Vec<String>) {
    let answer = candor(
        root,
        &[
            "incident",
            "--target",
            target,
            "--since",
            since,
            "--until",
            until,
            "--no-live",
        ],
    );
    assert_eq!(answer.code, 0, "{}\n{}", answer.stdout, answer.stderr);
    let rows = answer
        .rows()
        .into_iter()
        .map(|mut row| {
            let fields = row.as_object_mut().unwrap();
            for field in [
                "event_time",
                "service_name",
                "service_instance_id",
                "tool_target",
                "adapter",
                "trace_id",
                "span_id",
                "event_id",
            ] {
                assert!(
                    fields.remove(field).is_some(),
                    "{field} missing from {fields:?}"
                );
            }
            row
        })
        .collect();
    let summary = answer.json()["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap().to_owned())
        .collect();
    (rows, summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_typescript_and_rust_services_calling_the_same_tool_give_the_same_answers() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("adapters");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);

    let python_classes = run_python_service(&collector.grpc_endpoint).await;
    let typescript_classes = run_typescript_service(&collector.http_endpoint).await;
    let rust_classes = run_rust_service(&collector.grpc_endpoint).await;
    assert_eq!(python_classes, rust_classes);
    assert_eq!(typescript_classes, rust_classes);
    let count = |class: &str| rust_classes.iter().filter(|c| *c == class).count();
    assert_eq!(
        [count("success"), count("partial"), count("access_failure")],
        [16, 8, 16],
        "the scripts' classes changed"
    );
    let until = rfc3339(SystemTime::now());
    // The window is whole only once a heartbeat after the last call has reached the tables.
    collector.heartbeat_after_now().await;

    // The services' final counts and terminal failure events (one per failed call, 24) are in
    // the tables, and so is the heartbeat after the window: the compactor may store the rows in
    // one flush and that heartbeat in the next.
    let (rates_answer, rows) = wait_for(
        "the three services' 40 calls in `candor rates`, over a covered window",
        Duration::from_secs(90),
        || async {
            let (answer, rows) = rates(&root, &since, &until);
            let all_in = [RUST_TARGET, PYTHON_TARGET, TS_TARGET]
                .iter()
                .all(|target| {
                    row_of(&rows, target).is_some_and(|row| {
                        row["calls"] == CALLS as u64 && row["failure_events"] == 24
                    })
                });
            (all_in && answer.class() == "success").then_some((answer, rows))
        },
    )
    .await;
    assert_eq!(rates_answer.class(), "success", "{}", rates_answer.stderr);
    let strip = |row: &Value| {
        let mut row = row.clone();
        row.as_object_mut().unwrap().remove("target");
        row
    };
    let rust_rates = strip(row_of(&rows, RUST_TARGET).unwrap());
    let python_rates = strip(row_of(&rows, PYTHON_TARGET).unwrap());
    let typescript_rates = strip(row_of(&rows, TS_TARGET).unwrap());
    assert_eq!(python_rates, rust_rates);
    assert_eq!(typescript_rates, rust_rates);
    assert_eq!(
        (
            rust_rates["success"].as_u64(),
            rust_rates["partial"].as_u64(),
            rust_rates["access_failure"].as_u64()
        ),
        (Some(16), Some(8), Some(16)),
        "{rust_rates:#}"
    );

    let (rust_events, rust_summary) = incident(&root, RUST_TARGET, &since, &until);
    let (python_events, python_summary) = incident(&root, PYTHON_TARGET, &since, &until);
    let (typescript_events, typescript_summary) = incident(&root, TS_TARGET, &since, &until);
    assert_eq!(rust_events.len(), 40, "{rust_events:#?}");
    // The same rows, compared as sets: the rows come in event-time order, and the order of two
    // events of successive calls has differed between the services (the TypeScript service's
    // first calls), which this test does not judge.
    let same_rows = |events: &[Value]| {
        let mut rows: Vec<String> = events.iter().map(Value::to_string).collect();
        rows.sort();
        rows
    };
    assert_eq!(same_rows(&python_events), same_rows(&rust_events));
    assert_eq!(same_rows(&typescript_events), same_rows(&rust_events));
    // Every event says where its result came from.
    assert!(
        rust_events
            .iter()
            .all(|row| row["source_system"] == "inventory.test"),
        "{rust_events:#?}"
    );
    // The retry outcomes agree; the services line names each service, the adapters line each
    // implementation and version.
    assert_eq!(python_summary[0], rust_summary[0]);
    assert_eq!(typescript_summary[0], rust_summary[0]);
    assert_eq!(python_summary[1], "services involved: checkout-py (40)");
    assert_eq!(typescript_summary[1], "services involved: checkout-ts (40)");
    assert_eq!(rust_summary[1], "services involved: checkout-rs (40)");
    assert_eq!(
        rust_summary[2],
        format!(
            "adapters that reported: {} (40)",
            candor_adapter::ADAPTER_VERSION
        )
    );
    assert!(
        python_summary[2].starts_with("adapters that reported: candor-adapter-python/"),
        "{python_summary:?}"
    );
    assert!(
        typescript_summary[2].starts_with("adapters that reported: candor-adapter-typescript/"),
        "{typescript_summary:?}"
    );
}

/// Runs the MCP TypeScript SDK's client against the Rust MCP server helper's test server
/// (`clients/mcp_envelope_server.rs`), `broken` or not, over stdio, and returns what it printed.
async fn sdk_client_against_rust_server(broken: bool) -> Value {
    let spec = json!({
        "command": env!("CARGO_BIN_EXE_candor-mcp-envelope-server"),
        "args": if broken { vec!["--broken"] } else { vec![] },
        "tool": "lookup",
        "cases": MCP_CASES,
    });
    run_node_client("ts_adapter/mcp_client.mjs", &spec, Duration::from_secs(60)).await
}

/// Every class, as the MCP server's `lookup` tool takes it.
const MCP_CASES: [&str; 4] = ["success", "empty", "partial", "access_failure"];

/// The Rust MCP helper (`candor_schema::mcp`) under the MCP SDK's own client: the tool declares
/// the envelope's schema as its `outputSchema`, the client validates every result against it
/// and accepts all four classes, `isError` is set for the AccessFailure alone, and the first
/// text is the summary. A server that hands the client an empty answer instead is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_sdk_client_validates_the_rust_helpers_envelopes_against_the_declared_schema() {
    let printed = sdk_client_against_rust_server(false).await;
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/v1/envelope.v1.schema.json"),
        )
        .expect("the committed envelope schema"),
    )
    .expect("the schema is JSON");
    assert_eq!(
        printed["output_schema"], committed,
        "the declared outputSchema is the envelope's schema"
    );
    let results = printed["results"].as_array().expect("results");
    assert_eq!(results.len(), MCP_CASES.len(), "{printed}");
    for (case, result) in MCP_CASES.iter().zip(results) {
        assert_eq!(result["case"], *case);
        assert!(
            result.get("refused").is_none(),
            "the SDK refused the {case} result: {result}"
        );
        assert_eq!(
            result["structured"]["outcome"]["class"], *case,
            "the structured content is the envelope: {result}"
        );
        assert_eq!(
            result["is_error"],
            *case == "access_failure",
            "isError is set for an AccessFailure alone: {result}"
        );
        let summary = result["texts"][0].as_str().expect("a summary text");
        let words = match *case {
            "access_failure" => "nothing can be concluded",
            "empty" => "verified absence",
            "partial" => "not treat it as the whole answer",
            _ => "complete answer",
        };
        assert!(
            summary.to_lowercase().contains(words),
            "the {case} summary speaks its class's words: {summary:?}"
        );
    }

    let printed = sdk_client_against_rust_server(true).await;
    let results = printed["results"].as_array().expect("results");
    assert_eq!(results.len(), MCP_CASES.len(), "{printed}");
    for result in results {
        let refused = result["refused"].as_str().unwrap_or_else(|| {
            panic!("the SDK accepted an empty answer that breaks the schema: {result}")
        });
        assert!(
            refused
                .to_lowercase()
                .contains("structured content does not match"),
            "{refused}"
        );
    }
}
