//! Calls derived from the telemetry real emitters already send (the contract's section 10.7):
//! a pydantic-ai agent's GenAI `execute_tool` spans, `opentelemetry-instrumentation-httpx`'s
//! HTTP client spans and the `mcp` SDK's `tools/call` spans; LangChain tools traced by
//! OpenInference and by OpenLLMetry, and the Vercel AI SDK's `ai.toolCall` spans, each by its
//! own convention; an MCP client and server in two processes, each call counted once across
//! their export requests; through the collector and the compactor to `candor rates` and
//! `candor incident`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::query::{Answer, candor};
use candor_e2e::tansu::Tansu;
use candor_e2e::{rfc3339, run_node_client, run_python_client, tempdir, wait_for};
use candor_schema::names::resource;
use serde_json::{Value, json};

/// One row of `candor rates`: (target, source) → (unverified, access_failure, cancelled,
/// success + empty + partial).
type Counted = BTreeMap<(String, String), [u64; 4]>;

/// A row's (unverified, access_failure, cancelled, success + empty + partial).
fn classes(row: &Value) -> [u64; 4] {
    let n = |class: &str| row[class].as_u64().unwrap_or(0);
    [
        n("unverified"),
        n("access_failure"),
        n("cancelled"),
        n("success") + n("empty") + n("partial"),
    ]
}

/// A row's `key` and `source`, as texts.
fn group(row: &Value, key: &str) -> (String, String) {
    (
        row[key].as_str().unwrap().to_owned(),
        row["source"].as_str().unwrap().to_owned(),
    )
}

fn counted(rows: &[Value]) -> Counted {
    rows.iter()
        .map(|row| (group(row, "target"), classes(row)))
        .collect()
}

/// Waits until `candor rates` over [`since`, `until`] counts `expected`, and returns its answer.
async fn rates_until(
    root: &std::path::Path,
    since: &str,
    until: &str,
    expected: &Counted,
    what: &str,
) -> Answer {
    wait_for(
        &format!("{what} in `candor rates`, over a covered window"),
        Duration::from_secs(90),
        || async {
            let answer = candor(
                root,
                &["rates", "--since", since, "--until", until, "--no-live"],
            );
            (answer.class() == "success" && counted(&answer.rows()) == *expected).then_some(answer)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_tool_spans_of_real_emitters_count_with_their_failures_and_never_as_success() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("derived");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);
    let spec = json!({
        "endpoint": collector.grpc_endpoint,
        "resource": { resource::SERVICE_NAME: "agent-py", resource::SERVICE_INSTANCE_ID: "agent-1" },
    });
    let printed = run_python_client("derived_emitters.py", &spec, Duration::from_secs(120)).await;
    let until = rfc3339(SystemTime::now());
    collector.heartbeat_after_now().await;

    let server = format!("http://127.0.0.1:{}", printed["http_port"]);
    let closed = format!("http://127.0.0.1:{}", printed["closed_port"]);
    let row = |target: &str, source: &str, counts: [u64; 4]| {
        ((target.to_owned(), source.to_owned()), counts)
    };
    let expected: Counted = [
        // The agent's tools: `lookup` raised, `slow` was cancelled by it, `fetch` answered
        // three times and raised once, on the closed port.
        row("lookup", "genai", [0, 1, 0, 0]),
        row("slow", "genai", [0, 0, 1, 0]),
        row("fetch", "genai", [3, 1, 0, 0]),
        // The requests `fetch` made: 200 is only contact; 401 and 500 failed.
        row(&server, "http", [1, 2, 0, 0]),
        row(&closed, "http", [0, 1, 0, 0]),
        // The MCP server's tools: `search` returned `isError: true`.
        row("add", "mcp", [1, 0, 0, 0]),
        row("search", "mcp", [0, 1, 0, 0]),
    ]
    .into_iter()
    .collect();
    let answer = rates_until(&root, &since, &until, &expected, "every derived call").await;
    for row in answer.rows() {
        assert_eq!(
            row["success"], 0,
            "a derived call is never a success: {row:#}"
        );
        let lower = row["unverified"].as_u64().unwrap() > 0;
        let bound = if lower { "lower_bound" } else { "exact" };
        assert_eq!(row["rate_bound"], bound, "{row:#}");
    }
    let notes = answer.json()["coverage"]["notes"].to_string();
    assert!(notes.contains("lower bound"), "{notes}");

    let incident = |target: &str| {
        let answer = candor(
            &root,
            &[
                "incident",
                "--target",
                target,
                "--since",
                &since,
                "--until",
                &until,
                "--no-live",
            ],
        );
        assert!(answer.stderr.is_empty(), "{}", answer.stderr);
        answer
    };
    let requests = incident(&server);
    assert_eq!(requests.class(), "success");
    let mut failures: Vec<(String, u64, String, Value, Value)> = requests
        .rows()
        .iter()
        .map(|event| {
            assert_eq!(event["source"], "http");
            assert_eq!(event["outcome_class"], "access_failure");
            assert_eq!(event["retry_action"], "");
            assert_eq!(event["service_name"], "agent-py");
            (
                event["failure_kind"].as_str().unwrap().to_owned(),
                event["http_status_code"].as_u64().unwrap(),
                event["error_type"].as_str().unwrap().to_owned(),
                event["evidence_kind"].clone(),
                event["evidence_value"].clone(),
            )
        })
        .collect();
    failures.sort_by_key(|failure| failure.1);
    // Each failure keeps the request id its server assigned, captured by the instrumentation.
    assert_eq!(
        failures,
        [
            (
                "auth".to_owned(),
                401,
                "401".to_owned(),
                json!("request_id"),
                json!("req-401")
            ),
            (
                "server_error".to_owned(),
                500,
                "500".to_owned(),
                json!("request_id"),
                json!("req-500")
            ),
        ]
    );
    let summary = requests.json()["summary"].to_string();
    assert!(summary.contains("derived from standard spans"), "{summary}");

    let kind_of = |target: &str| {
        let answer = incident(target);
        assert_eq!(answer.class(), "success");
        let rows = answer.rows();
        assert_eq!(rows.len(), 1, "{rows:#?}");
        (
            rows[0]["source"].as_str().unwrap().to_owned(),
            rows[0]["failure_kind"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(kind_of("lookup"), ("genai".into(), "connect".into()));
    // The tool's failure keeps its exception and message and the agent's tool call id.
    let lookup = incident("lookup").rows().remove(0);
    assert!(
        lookup["exception_type"]
            .as_str()
            .is_some_and(|t| t.ends_with("ConnectionError")),
        "{lookup}"
    );
    assert!(
        lookup["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("search backend down")),
        "{lookup}"
    );
    assert_eq!(lookup["tool_call_id"], "c-lookup", "{lookup}");
    assert_eq!(kind_of(&closed), ("http".into(), "connect".into()));
    assert_eq!(kind_of("search"), ("mcp".into(), "tool_error".into()));
    // The cancelled sibling is no failure: a confirmed empty answer.
    let slow = incident("slow");
    assert!(slow.rows().is_empty(), "{:#?}", slow.rows());
    assert_eq!(slow.class(), "empty");
}

/// `candor rates --by tool` of one service: tool → (unverified, access_failure, cancelled,
/// success + empty + partial).
fn by_tool(rows: &[Value]) -> BTreeMap<String, [u64; 4]> {
    rows.iter()
        .map(|row| (row["tool"].as_str().unwrap().to_owned(), classes(row)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_frameworks_count_by_their_own_conventions_with_the_failures_their_spans_hide() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("frameworks");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);
    // LangChain tools, once under OpenInference and once under OpenLLMetry (services
    // `agent-py-openinference` and `agent-py-openllmetry`), over OTLP/gRPC.
    let python = run_python_client(
        "framework_emitters.py",
        &json!({
            "endpoint": collector.grpc_endpoint,
            "resource": { resource::SERVICE_NAME: "agent-py", resource::SERVICE_INSTANCE_ID: "py-1" },
        }),
        Duration::from_secs(120),
    )
    .await;
    // The Vercel AI SDK from Node, over OTLP/HTTP protobuf.
    let node = run_node_client(
        "vercel_ai/emit.mjs",
        &json!({
            "endpoint": collector.http_endpoint,
            "resource": { resource::SERVICE_NAME: "agent-js", resource::SERVICE_INSTANCE_ID: "js-1" },
        }),
        Duration::from_secs(120),
    )
    .await;
    let until = rfc3339(SystemTime::now());
    collector.heartbeat_after_now().await;

    // Each tool's calls, by the class its convention's spans and results say: `broken` and
    // `explode` raised; `guarded` was a LangChain tool error the framework handled (a
    // ToolMessage with status "error", its span without error); `mcp_search` returned an MCP
    // result with `isError: true` as an ordinary result.
    let langchain: BTreeMap<String, [u64; 4]> = [
        ("lookup".to_owned(), [2, 0, 0, 0]),
        ("broken".to_owned(), [0, 1, 0, 0]),
        ("guarded".to_owned(), [0, 1, 0, 0]),
    ]
    .into_iter()
    .collect();
    let vercel: BTreeMap<String, [u64; 4]> = [
        ("weather".to_owned(), [2, 0, 0, 0]),
        ("explode".to_owned(), [0, 1, 0, 0]),
        ("mcp_search".to_owned(), [0, 1, 0, 0]),
    ]
    .into_iter()
    .collect();
    let services = [
        (
            python["openinference"]["service"]
                .as_str()
                .unwrap()
                .to_owned(),
            langchain.clone(),
        ),
        (
            python["openllmetry"]["service"]
                .as_str()
                .unwrap()
                .to_owned(),
            langchain,
        ),
        (node["service"].as_str().unwrap().to_owned(), vercel),
    ];
    for (service, expected) in &services {
        wait_for(
            &format!("{service}'s calls in `candor rates --by tool`, over a covered window"),
            Duration::from_secs(90),
            || async {
                let answer = candor(
                    &root,
                    &[
                        "rates",
                        "--by",
                        "tool",
                        "--service",
                        service,
                        "--since",
                        &since,
                        "--until",
                        &until,
                        "--no-live",
                    ],
                );
                (answer.class() == "success" && by_tool(&answer.rows()) == *expected).then_some(())
            },
        )
        .await;
    }
    // Grouped by convention: each framework's calls under its own name, none as a success.
    let answer = candor(
        &root,
        &[
            "rates",
            "--by",
            "convention",
            "--since",
            &since,
            "--until",
            &until,
            "--no-live",
        ],
    );
    let conventions: BTreeMap<(String, String), [u64; 4]> = answer
        .rows()
        .iter()
        .map(|row| (group(row, "convention"), classes(row)))
        .collect();
    let expected: BTreeMap<(String, String), [u64; 4]> =
        ["openinference", "openllmetry", "vercel-ai"]
            .into_iter()
            .map(|name| ((name.to_owned(), "genai".to_owned()), [2, 2, 0, 0]))
            .collect();
    assert_eq!(conventions, expected, "{:#}", answer.json());

    // The failures the spans reported as success say where they were read.
    let incident = |target: &str| {
        let answer = candor(
            &root,
            &[
                "incident",
                "--target",
                target,
                "--since",
                &since,
                "--until",
                &until,
                "--no-live",
            ],
        );
        assert!(answer.stderr.is_empty(), "{}", answer.stderr);
        answer.rows()
    };
    let mut guarded: Vec<(String, String, String)> = incident("guarded")
        .iter()
        .map(|event| {
            assert!(
                event["error_message"]
                    .as_str()
                    .is_some_and(|m| m.contains("captured result") && m.contains("\"error\"")),
                "{event}"
            );
            (
                event["convention"].as_str().unwrap().to_owned(),
                event["failure_kind"].as_str().unwrap().to_owned(),
                event["error_type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    guarded.sort();
    let tool_error = |convention: &str| {
        (
            convention.to_owned(),
            "tool_error".to_owned(),
            "tool_error".to_owned(),
        )
    };
    assert_eq!(
        guarded,
        [tool_error("openinference"), tool_error("openllmetry")]
    );
    let search = incident("mcp_search");
    assert_eq!(search.len(), 1, "{search:#?}");
    assert_eq!(search[0]["convention"], "vercel-ai");
    assert_eq!(search[0]["failure_kind"], "tool_error");
    assert_eq!(search[0]["tool_call_id"], "call_mcp_search_1");
    assert!(
        search[0]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("ai.toolCall.result") && m.contains("/isError = true")),
        "{}",
        search[0]
    );
    // A raised error keeps its exception, read by the emitter's convention.
    let explode = incident("explode");
    assert_eq!(explode.len(), 1, "{explode:#?}");
    assert_eq!(explode[0]["convention"], "vercel-ai");
    assert_eq!(explode[0]["exception_type"], "Error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_and_server_in_two_processes_count_each_call_once() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("mcp-two-processes");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);
    // Each side exports its own spans, as its own service: the server's span of a call (under
    // the client's, by the trace context in the request) reaches the collector first.
    run_python_client(
        "mcp_two_processes.py",
        &json!({
            "endpoint": collector.grpc_endpoint,
            "client": { resource::SERVICE_NAME: "mcp-client", resource::SERVICE_INSTANCE_ID: "client-1" },
            "server": { resource::SERVICE_NAME: "mcp-server", resource::SERVICE_INSTANCE_ID: "server-1" },
        }),
        Duration::from_secs(120),
    )
    .await;
    let until = rfc3339(SystemTime::now());
    collector.heartbeat_after_now().await;

    // One call per tool, counted where it was first seen: `search` failed by its server's
    // span (its result said `isError: true`), which the client's span does not show.
    let expected: Counted = [
        (("add".to_owned(), "mcp".to_owned()), [1, 0, 0, 0]),
        (("search".to_owned(), "mcp".to_owned()), [0, 1, 0, 0]),
    ]
    .into_iter()
    .collect();
    let answer = rates_until(&root, &since, &until, &expected, "each MCP call once").await;
    assert_eq!(answer.rows().len(), 2, "{:#?}", answer.rows());
    // The client's two spans joined the calls its server's spans had counted.
    let joined = collector
        .sample("candor_collector_derived_joined_total{into=\"earlier_request\"}")
        .await;
    assert_eq!(joined, Some(2.0), "{}", collector.metrics().await);
    let incident = candor(
        &root,
        &[
            "incident",
            "--target",
            "search",
            "--since",
            &since,
            "--until",
            &until,
            "--no-live",
        ],
    );
    let rows = incident.rows();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["service_name"], "mcp-server", "{rows:#?}");
    assert_eq!(rows[0]["failure_kind"], "tool_error", "{rows:#?}");
}
