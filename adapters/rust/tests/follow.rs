//! Following asynchronous operations against local servers that implement each protocol: a
//! status URL with `Retry-After` (Azure's asynchronous request-reply) and a long-running
//! operation resource (Google AIP-151).
//!
//! Time is a [`FakeClock`]: waits take no real time and are recorded. Each HTTP exchange is made
//! to completion before the adapter polls its future (`block_in_place`), so that a fake
//! attempt timeout never races the loopback round trip.

#![allow(clippy::unwrap_used)] // a panic in a test is its failure report

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candor_adapter::classify::http::HttpExchange;
use candor_adapter::follow::http::{LongRunning, StatusUrl};
use candor_adapter::follow::{FnStatus, OperationStatus, ReadStatus, StatusRead};
use candor_adapter::http_client::HttpClient;
use candor_adapter::testing::FakeClock;
use candor_adapter::{Adapter, AttemptContext, HttpClassifier, NotFound, RetryPolicy};
use candor_schema::{
    AccessFailureKind, Envelope, EvidenceKind, Lifecycle, LifecycleState, Operation, Outcome,
    OutcomeClass, PartialKind, RetryAction,
};
use http::HeaderMap;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted answer: status line, headers, body.
#[derive(Clone)]
struct Reply {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn reply(status: &'static str, body: Value) -> Reply {
    Reply {
        status,
        headers: Vec::new(),
        body: if body.is_null() {
            String::new()
        } else {
            body.to_string()
        },
    }
}

impl Reply {
    fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn bytes(&self) -> String {
        let mut head = format!("HTTP/1.1 {}\r\n", self.status);
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        format!(
            "{head}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
            self.body.len(),
            self.body
        )
    }
}

/// A server that answers each path from its own script; the last reply of a script repeats.
struct Server {
    addr: SocketAddr,
    scripts: Arc<Mutex<HashMap<String, VecDeque<Reply>>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let scripts: Arc<Mutex<HashMap<String, VecDeque<Reply>>>> = Arc::default();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let (served, log) = (scripts.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, served.clone(), log.clone()));
            }
        });
        Self {
            addr,
            scripts,
            requests,
        }
    }

    fn script(&self, path: &str, replies: Vec<Reply>) {
        self.scripts
            .lock()
            .unwrap()
            .insert(path.to_owned(), replies.into());
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The request lines received (`GET /path`), in order.
    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    scripts: Arc<Mutex<HashMap<String, VecDeque<Reply>>>>,
    log: Arc<Mutex<Vec<String>>>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut line = head.lines().next().unwrap_or_default().split(' ');
    let (method, path) = (line.next().unwrap(), line.next().unwrap().to_owned());
    log.lock().unwrap().push(format!("{method} {path}"));
    let reply = {
        let mut scripts = scripts.lock().unwrap();
        let script = scripts
            .get_mut(&path)
            .unwrap_or_else(|| panic!("no script for {path}"));
        if script.len() > 1 {
            script.pop_front().unwrap()
        } else {
            script.front().unwrap().clone()
        }
    };
    let _ = stream.write_all(reply.bytes().as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Makes one exchange to its end on this thread, so that the future the adapter polls is ready.
fn exchange(
    client: &HttpClient,
    context: AttemptContext,
    method: &str,
    url: &str,
) -> std::future::Ready<HttpExchange> {
    let handle = tokio::runtime::Handle::current();
    let headers = HeaderMap::new();
    let result = tokio::task::block_in_place(|| {
        handle.block_on(async {
            match method {
                "POST" => {
                    client
                        .post(context, url, &headers, bytes::Bytes::new())
                        .await
                }
                _ => client.get(context, url, &headers).await,
            }
        })
    });
    std::future::ready(result)
}

fn policy() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(3)
        .unwrap()
        .with_backoff(Duration::from_secs(1), Duration::from_secs(8))
        .unwrap()
}

fn adapter<S>(status: S, clock: &FakeClock) -> Adapter<HttpClassifier, FakeClock, S> {
    Adapter::builder("export", "http://exports.test/v1/exports")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .follow(status)
        .clock(clock.clone())
        .retry(policy())
        .jitter_seed(7)
        .operation_deadline(Duration::from_secs(300))
        .build()
        .unwrap()
}

/// Starts an export at `/v1/exports` and follows it with GETs on the status location (a status
/// URL as the server wrote it), or on `/v1/{name}` for a long-running operation.
async fn start_and_follow<S>(server: &Server, status: S, clock: &FakeClock) -> Envelope<Value>
where
    S: ReadStatus<HttpExchange, Payload = Value>,
{
    let adapter = adapter(status, clock);
    let client = HttpClient::default();
    let start = server.url("/v1/exports");
    adapter
        .call_and_follow(
            |context| exchange(&client, context, "POST", &start),
            |operation: &Operation, context| {
                let url = match &operation.status_url {
                    Some(url) => url.clone(),
                    None => server.url(&format!("/v1/{}", operation.id)),
                };
                exchange(&client, context, "GET", &url)
            },
        )
        .await
}

/// A server whose export is accepted with a status URL and `Retry-After: 7`, then reads as
/// `statuses` in turn.
async fn status_url_server(statuses: Vec<Reply>) -> Server {
    let server = Server::start().await;
    let status_url = server.url("/v1/operations/op-1");
    server.script(
        "/v1/exports",
        vec![
            reply("202 Accepted", Value::Null)
                .header("Operation-Location", status_url)
                .header("Location", server.url("/v1/exports/e-1"))
                .header("Retry-After", "7"),
        ],
    );
    server.script("/v1/operations/op-1", statuses);
    server
}

fn lifecycle(envelope: &Envelope<Value>) -> &Lifecycle {
    envelope
        .lifecycle()
        .expect("a followed call has a lifecycle")
}

fn failure(envelope: &Envelope<Value>) -> &candor_schema::Failure {
    match envelope.outcome() {
        Outcome::AccessFailure { failure } => failure,
        other => panic!("not an AccessFailure: {other:?}"),
    }
}

/// The last attempt is the following, from the acceptance to the end.
fn following(envelope: &Envelope<Value>) -> &candor_schema::Attempt {
    let attempts = envelope.attempts();
    assert_eq!(
        attempts.len(),
        2,
        "the start, then the following: {attempts:?}"
    );
    &attempts[1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_is_followed_to_a_verified_completion_honouring_retry_after() {
    let server = status_url_server(vec![
        reply("202 Accepted", Value::Null).header("Retry-After", "3"),
        reply(
            "200 OK",
            json!({"status": "Running", "percentComplete": 40}),
        ),
        reply("200 OK", json!({"status": "Succeeded", "rows": 1200})),
    ])
    .await;
    let clock = FakeClock::default();
    let envelope = start_and_follow(&server, StatusUrl::default(), &clock).await;

    assert_eq!(envelope.class(), OutcomeClass::Success, "{envelope:?}");
    assert_eq!(
        envelope.outcome().payload(),
        Some(&json!({"status": "Succeeded", "rows": 1200}))
    );
    let Lifecycle::Completed {
        operation,
        verified_by,
        resource,
    } = lifecycle(&envelope)
    else {
        panic!("{envelope:?}");
    };
    assert_eq!(resource, &None, "the status named no resource");
    assert_eq!(
        operation.status_url.as_deref(),
        Some(server.url("/v1/operations/op-1").as_str())
    );
    assert_eq!(verified_by.kind, EvidenceKind::Query);
    assert_eq!(verified_by.value, server.url("/v1/operations/op-1"));
    assert_eq!(envelope.evidence(), Some(verified_by));
    assert_eq!(following(&envelope).class, OutcomeClass::Success);
    assert_eq!(following(&envelope).retry_action, None);
    assert_eq!(
        server.requests(),
        [
            "POST /v1/exports",
            "GET /v1/operations/op-1",
            "GET /v1/operations/op-1",
            "GET /v1/operations/op-1",
        ]
    );
    // The acceptance asked for 7 s and the first status read for 3 s: neither was shortened.
    let slept = clock.slept();
    assert_eq!(slept.len(), 3, "{slept:?}");
    assert!(slept[0] >= Duration::from_secs(7), "{slept:?}");
    assert!(slept[1] >= Duration::from_secs(3), "{slept:?}");
}

/// A status URL's end names the operation's resource three ways: a 303's `Location`, a status
/// body's `resourceLocation` (credentials redacted), or the status URL itself when it answers
/// with the resource, whose `ETag` is its version. A partial status names it as a completed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_end_names_the_resource_and_its_version() {
    /// A resource's id (`{status_url}` standing for the status URL) and version.
    type Named = Option<(&'static str, Option<&'static str>)>;
    let cases: [(Reply, Named, LifecycleState); 4] = [
        (
            reply("303 See Other", Value::Null).header("Location", "https://store.test/e/1"),
            Some(("https://store.test/e/1", None)),
            LifecycleState::Completed,
        ),
        (
            reply(
                "200 OK",
                json!({"status": "Succeeded", "resourceLocation": "https://bob:hunter2@store.test/e/1?sig=s3cret"}),
            ),
            Some(("https://REDACTED@store.test/e/1?sig=REDACTED", None)),
            LifecycleState::Completed,
        ),
        (
            reply("200 OK", json!({"rows": 1200})).header("ETag", "\"v7\""),
            Some(("{status_url}", Some("\"v7\""))),
            LifecycleState::Completed,
        ),
        (
            reply(
                "200 OK",
                json!({"status": "PartiallySucceeded", "covered": "3 of 5 tables", "resourceLocation": "https://store.test/e/1"}),
            ),
            Some(("https://store.test/e/1", None)),
            LifecycleState::Partial,
        ),
    ];
    for (read, expected, state) in cases {
        let server = status_url_server(vec![read]).await;
        let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;
        let lifecycle = lifecycle(&envelope);
        assert_eq!(lifecycle.state(), state, "{envelope:?}");
        let status_url = server.url("/v1/operations/op-1");
        let expected = expected.map(|(id, version)| candor_schema::Resource {
            id: id.replace("{status_url}", &status_url),
            version: version.map(str::to_owned),
        });
        assert_eq!(lifecycle.resource(), expected.as_ref(), "{envelope:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_that_reports_failure_ends_the_call_as_a_permanent_tool_error() {
    let server = status_url_server(vec![reply(
        "200 OK",
        json!({"status": "Failed", "error": {"code": "DiskFull", "message": "disk full"}}),
    )])
    .await;
    let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;

    let failure = failure(&envelope);
    assert_eq!(failure.kind, AccessFailureKind::ToolError);
    assert!(!failure.retryable);
    assert!(failure.message.contains("disk full"), "{failure:?}");
    assert!(
        matches!(lifecycle(&envelope), Lifecycle::Failed { reason, .. } if reason == "disk full")
    );
    assert_eq!(
        following(&envelope).retry_action,
        Some(RetryAction::Permanent)
    );
    // Never started again: one POST.
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|r| r.starts_with("POST"))
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_that_reports_part_done_ends_the_call_as_partial() {
    let server = status_url_server(vec![reply(
        "200 OK",
        json!({"status": "PartiallySucceeded", "covered": "3 of 5 tables"}),
    )])
    .await;
    let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;

    let Outcome::Partial { truncation, .. } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(truncation.kind, PartialKind::OperationPartial);
    assert_eq!(truncation.covered, "3 of 5 tables");
    assert!(
        matches!(lifecycle(&envelope), Lifecycle::Partial { covered, .. } if covered == "3 of 5 tables")
    );
    assert_eq!(
        following(&envelope).retry_action,
        Some(RetryAction::AcceptPartial)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_that_reports_cancellation_ends_the_call_as_cancelled() {
    let server = status_url_server(vec![reply("200 OK", json!({"status": "Canceled"}))]).await;
    let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;

    assert_eq!(failure(&envelope).kind, AccessFailureKind::Cancelled);
    assert_eq!(lifecycle(&envelope).state(), LifecycleState::Cancelled);
    assert_eq!(
        envelope.next_actions(),
        [candor_schema::NextAction::Escalate]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_that_never_finishes_ends_at_the_operation_deadline_with_its_last_state() {
    let server = status_url_server(vec![
        reply(
            "200 OK",
            json!({"status": "Running", "percentComplete": 10}),
        )
        .header("Retry-After", "60"),
    ])
    .await;
    let clock = FakeClock::default();
    let envelope = start_and_follow(&server, StatusUrl::default(), &clock).await;

    let failure = failure(&envelope);
    assert_eq!(failure.kind, AccessFailureKind::Deadline);
    assert!(failure.message.contains("still running"), "{failure:?}");
    assert!(
        matches!(
            lifecycle(&envelope),
            Lifecycle::Running {
                percent_complete: Some(10),
                ..
            }
        ),
        "{envelope:?}"
    );
    assert_eq!(
        following(&envelope).retry_action,
        Some(RetryAction::Exhausted)
    );
    // Reads every 60 s from 7 s on, and none after the deadline of 300 s.
    let reads = server.requests().len() - 1;
    assert_eq!(reads, 5, "{:?}", server.requests());
    assert!(
        clock.elapsed() < Duration::from_secs(300),
        "{:?}",
        clock.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_that_starts_failing_ends_the_call_with_the_last_state_known() {
    let server = status_url_server(vec![
        reply(
            "200 OK",
            json!({"status": "Running", "percentComplete": 70}),
        ),
        reply("503 Service Unavailable", Value::Null),
        reply("503 Service Unavailable", Value::Null),
        reply("503 Service Unavailable", Value::Null),
    ])
    .await;
    let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;

    let failure = failure(&envelope);
    assert_eq!(failure.kind, AccessFailureKind::ServerError);
    assert_eq!(failure.status, Some(503));
    assert!(failure.message.contains("last seen running"), "{failure:?}");
    assert_eq!(lifecycle(&envelope).state(), LifecycleState::Running);
    // Three failed reads in a row spend the policy's three attempts.
    assert_eq!(server.requests().len(), 1 + 1 + 3);
    assert_eq!(
        following(&envelope).retry_action,
        Some(RetryAction::Exhausted)
    );
    assert_eq!(following(&envelope).status, Some(503));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_url_that_no_longer_exists_is_a_permanent_failure_after_one_read() {
    let server = status_url_server(vec![reply("404 Not Found", Value::Null)]).await;
    let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;

    assert_eq!(failure(&envelope).kind, AccessFailureKind::ClientError);
    assert_eq!(lifecycle(&envelope).state(), LifecycleState::Accepted);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        following(&envelope).retry_action,
        Some(RetryAction::Permanent)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acceptance_without_a_status_url_cannot_be_followed_and_says_so() {
    let server = Server::start().await;
    server.script("/v1/exports", vec![reply("202 Accepted", Value::Null)]);
    let envelope = start_and_follow(&server, StatusUrl::default(), &FakeClock::default()).await;

    let failure = failure(&envelope);
    assert_eq!(failure.kind, AccessFailureKind::Protocol);
    assert_eq!(failure.error_type.as_deref(), Some("no_status_url"));
    assert_eq!(lifecycle(&envelope).state(), LifecycleState::Accepted);
    assert_eq!(server.requests(), ["POST /v1/exports"]);
}

/// A server whose export starts a long-running operation `operations/op-7`, which then reads as
/// `reads` in turn.
async fn long_running_server(reads: Vec<Value>) -> Server {
    let server = Server::start().await;
    server.script(
        "/v1/exports",
        vec![reply(
            "200 OK",
            json!({"name": "operations/op-7", "done": false}),
        )],
    );
    server.script(
        "/v1/operations/op-7",
        reads
            .into_iter()
            .map(|read| reply("200 OK", read))
            .collect(),
    );
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_operation_is_followed_until_done_with_its_response() {
    let server = long_running_server(vec![
        json!({"name": "operations/op-7", "done": false, "metadata": {"progressPercent": 50}}),
        json!({"name": "operations/op-7", "done": true, "response": {"name": "exports/e-7", "etag": "W/\"3\"", "rows": 10}}),
    ])
    .await;
    let envelope = start_and_follow(&server, LongRunning, &FakeClock::default()).await;

    assert_eq!(envelope.class(), OutcomeClass::Success, "{envelope:?}");
    assert_eq!(
        envelope.outcome().payload(),
        Some(&json!({"name": "exports/e-7", "etag": "W/\"3\"", "rows": 10}))
    );
    let Lifecycle::Completed {
        verified_by,
        resource,
        ..
    } = lifecycle(&envelope)
    else {
        panic!("{envelope:?}");
    };
    assert_eq!(verified_by.kind, EvidenceKind::JobId);
    assert_eq!(verified_by.value, "operations/op-7");
    // The response is the resource (AIP-122 name, AIP-154 etag).
    assert_eq!(
        resource
            .as_ref()
            .map(|r| (r.id.as_str(), r.version.as_deref())),
        Some(("exports/e-7", Some("W/\"3\"")))
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_operation_done_with_an_error_is_failed_or_cancelled_by_its_code() {
    for (error, kind, state) in [
        (
            json!({"code": 13, "message": "internal"}),
            AccessFailureKind::ToolError,
            LifecycleState::Failed,
        ),
        (
            json!({"code": 1, "message": "cancelled by the caller"}),
            AccessFailureKind::Cancelled,
            LifecycleState::Cancelled,
        ),
    ] {
        let server = long_running_server(vec![
            json!({"name": "operations/op-7", "done": true, "error": error}),
        ])
        .await;
        let envelope = start_and_follow(&server, LongRunning, &FakeClock::default()).await;
        assert_eq!(failure(&envelope).kind, kind, "{envelope:?}");
        assert_eq!(lifecycle(&envelope).state(), state);
    }
}

/// `done` with neither a response nor an error has nothing to show for the completion: the call
/// is refused as a protocol failure, never a Success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_without_evidence_is_refused() {
    let server = long_running_server(vec![
        json!({"name": "operations/op-7", "done": false}),
        json!({"name": "operations/op-7", "done": true}),
    ])
    .await;
    let envelope = start_and_follow(&server, LongRunning, &FakeClock::default()).await;

    let failure = failure(&envelope);
    assert_eq!(failure.kind, AccessFailureKind::Protocol);
    assert!(
        failure.message.contains("cannot be verified"),
        "{failure:?}"
    );
    assert_eq!(lifecycle(&envelope).state(), LifecycleState::Running);
}

/// A caller that does not wait gets the acceptance, and resumes later with its operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acceptance_returned_at_once_can_be_resumed_later() {
    let server = status_url_server(vec![reply("200 OK", json!({"status": "Succeeded"}))]).await;
    let clock = FakeClock::default();
    let adapter = adapter(StatusUrl::default(), &clock);
    let client = HttpClient::default();
    let start = server.url("/v1/exports");
    let accepted = adapter
        .call(|context| exchange(&client, context, "POST", &start))
        .await;
    assert_eq!(lifecycle(&accepted).state(), LifecycleState::Accepted);
    assert_eq!(server.requests(), ["POST /v1/exports"]);

    let operation = lifecycle(&accepted).operation().clone();
    let envelope = adapter
        .resume(operation, |operation: &Operation, context| {
            exchange(
                &client,
                context,
                "GET",
                operation.status_url.as_deref().unwrap(),
            )
        })
        .await;
    assert_eq!(lifecycle(&envelope).state(), LifecycleState::Completed);
    assert_eq!(
        envelope.attempts().len(),
        1,
        "resuming is one attempt: the following"
    );
    assert!(
        clock.slept().is_empty(),
        "the first read of a resume waits for nothing"
    );
}

/// An author's own status read, with an independent check of completion: the job says done, and
/// the adapter's evidence is the read of the exported resource's version.
#[tokio::test]
async fn an_author_status_read_can_verify_completion_by_reading_the_resource_back() {
    use candor_adapter::testing::ScriptedTool;
    use candor_schema::{Evidence, Resource};

    // What one status request of this job API returns: its state, and the export's version
    // read back once it says done.
    type JobRead = (&'static str, Option<u64>);
    let reads =
        ScriptedTool::returning([("running", None), ("done", Some(41)), ("done", Some(42))]);
    let expected_version = 42;
    let status = FnStatus::new(move |operation: &Operation, read: JobRead| match read {
        ("done", Some(version)) if version == expected_version => {
            StatusRead::status(OperationStatus::Completed {
                result: json!({"version": version}),
                verified_by: Evidence {
                    kind: EvidenceKind::Query,
                    value: format!("GET /exports/{}?version={version}", operation.id),
                },
                resource: Some(Resource {
                    id: format!("/exports/{}", operation.id),
                    version: Some(version.to_string()),
                }),
            })
        }
        // Done, but the resource read back is not the new version yet: not completed.
        _ => StatusRead::status(OperationStatus::Running {
            percent_complete: None,
        }),
    });
    let clock = FakeClock::default();
    let adapter = Adapter::builder("export", "jobs")
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .follow(status)
        .clock(clock.clone())
        .build()
        .unwrap();
    let envelope = adapter
        .resume(
            Operation {
                id: "e-9".into(),
                status_url: None,
                generated: false,
            },
            |_: &Operation, context: AttemptContext| reads.attempt(context),
        )
        .await;
    let Lifecycle::Completed {
        verified_by,
        resource,
        ..
    } = lifecycle(&envelope)
    else {
        panic!("{envelope:?}");
    };
    assert_eq!(verified_by.value, "GET /exports/e-9?version=42");
    assert_eq!(
        resource,
        &Some(Resource {
            id: "/exports/e-9".into(),
            version: Some("42".into())
        })
    );
    assert_eq!(reads.attempts(), 3);
}
