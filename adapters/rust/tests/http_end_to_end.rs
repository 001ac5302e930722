//! End to end over real TCP: a scripted HTTP server on loopback, the adapter's HTTP client, and
//! the probe example run as a process.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use candor_adapter::http_client::HttpClient;
use candor_adapter::{
    Adapter, AttemptContext, HttpClassifier, KeepToolFailures, NOT_SENT_AGAIN, NotFound,
    RetryPolicy,
};
use candor_schema::names;
use candor_schema::{AccessFailureKind, Envelope, Outcome, OutcomeClass, PartialKind, RetryAction};
use http::HeaderMap;
use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with one request.
#[derive(Clone)]
enum Reply {
    /// Writes these bytes and closes the connection.
    Raw(String),
    /// Never answers; holds the connection until the client gives up.
    Hang,
    /// Writes these bytes (a head and part of its body), then holds the connection until the
    /// client gives up.
    Stall(String),
}

fn reply(status: &str, body: &str) -> Reply {
    Reply::Raw(format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ))
}

struct Server {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    /// Each request's head (request line and headers), in arrival order.
    heads: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(script: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let (counter, seen) = (requests.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let next = script.lock().unwrap().pop_front();
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, next, seen.clone()));
            }
        });
        Self {
            addr,
            requests,
            heads,
        }
    }

    /// The values of the header `name` (lower case) each request carried, in arrival order.
    fn header_values(&self, name: &str) -> Vec<Option<String>> {
        self.heads
            .lock()
            .unwrap()
            .iter()
            .map(|head| {
                head.lines().find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    (key.trim().eq_ignore_ascii_case(name)).then(|| value.trim().to_owned())
                })
            })
            .collect()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn serve(mut stream: TcpStream, reply: Option<Reply>, heads: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    heads
        .lock()
        .unwrap()
        .push(String::from_utf8_lossy(&head).into_owned());
    match reply {
        Some(Reply::Raw(bytes)) => {
            let _ = stream.write_all(bytes.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        // Waits for the client to close; never writes.
        Some(Reply::Hang) => while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {},
        Some(Reply::Stall(bytes)) => {
            let _ = stream.write_all(bytes.as_bytes()).await;
            while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {}
        }
        None => panic!("the scripted server got more requests than scripted"),
    }
}

fn adapter(url: &str, max_attempts: u32, spans: &SdkTracerProvider) -> Adapter<HttpClassifier> {
    Adapter::builder("search", url)
        .classifier(
            HttpClassifier::new(NotFound::Unreachable)
                .items_at("/items")
                .total_at("/total"),
        )
        .retry(
            RetryPolicy::default()
                .with_max_attempts(max_attempts)
                .unwrap()
                .with_backoff(Duration::from_millis(5), Duration::from_millis(20))
                .unwrap(),
        )
        .attempt_timeout(Duration::from_millis(300))
        .deadline(Duration::from_secs(10))
        .tracer_provider(spans)
        .build()
        .unwrap()
}

struct Spans {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
}

fn spans() -> Spans {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .with_sampler(KeepToolFailures::new(Sampler::AlwaysOn))
        .build();
    Spans { exporter, provider }
}

impl Spans {
    fn outcome_events(&self) -> usize {
        self.exporter
            .get_finished_spans()
            .unwrap()
            .iter()
            .flat_map(|s| s.events.iter())
            .filter(|e| e.name == names::OUTCOME_EVENT)
            .count()
    }
}

async fn call(server_url: &str, max_attempts: u32, spans: &Spans) -> Envelope<Value> {
    let adapter = adapter(server_url, max_attempts, &spans.provider);
    let client = HttpClient::new(1 << 20);
    let headers = HeaderMap::new();
    adapter
        .call(|context| client.get(context, server_url, &headers))
        .await
}

#[tokio::test]
async fn two_server_errors_then_success_is_a_success_after_three_attempts_with_two_events() {
    let server = Server::start(vec![
        reply("500 Internal Server Error", ""),
        reply("500 Internal Server Error", ""),
        reply("200 OK", r#"{"items":[1,2]}"#),
    ])
    .await;
    let spans = spans();
    let envelope = call(&server.url("/search"), 3, &spans).await;
    assert_eq!(envelope.class(), OutcomeClass::Success);
    assert_eq!(envelope.attempts().len(), 3);
    assert_eq!(server.requests(), 3);
    assert_eq!(spans.outcome_events(), 2);
}

#[tokio::test]
async fn a_response_slower_than_the_timeout_is_an_access_failure() {
    let server = Server::start(vec![Reply::Hang]).await;
    let spans = spans();
    let envelope = call(&server.url("/slow"), 1, &spans).await;
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Timeout);
    assert_eq!(failure.status, None);
    assert_eq!(spans.outcome_events(), 1);
}

#[tokio::test]
async fn a_post_taken_and_answered_late_is_sent_once_a_get_is_retried_and_a_keyed_post_repeats_its_key()
 {
    const ITEMS: &str = r#"{"items":[1,2]}"#;
    let client = HttpClient::new(1 << 20);
    let spans = spans();
    // Each request is read whole (so a POST may have been applied), then answered after the
    // attempt timeout, or never.
    let server = Server::start(vec![Reply::Hang, Reply::Hang, Reply::Hang]).await;
    let url = server.url("/orders");
    let post = Adapter::builder("place_order", &url)
        .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items"))
        .attempt_timeout(Duration::from_millis(300))
        .method(http::Method::POST)
        .tracer_provider(&spans.provider)
        .build()
        .unwrap();
    let body = Bytes::from_static(b"{\"sku\":\"a-1\"}");
    let no_headers = HeaderMap::new();
    let envelope = post
        .call(|context| client.post(context, &url, &no_headers, body.clone()))
        .await;
    assert_eq!(
        server.requests(),
        1,
        "a POST that may have been applied is sent once"
    );
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Timeout);
    assert!(!failure.retryable);
    assert!(
        failure.message.starts_with(NOT_SENT_AGAIN),
        "{}",
        failure.message
    );
    assert_eq!(
        envelope.attempts()[0].retry_action,
        Some(RetryAction::Permanent)
    );

    // A GET in the same situation is retried until the budget runs out.
    let server = Server::start(vec![Reply::Hang, Reply::Hang, Reply::Hang]).await;
    let envelope = call(&server.url("/orders"), 3, &spans).await;
    assert_eq!(server.requests(), 3);
    assert_eq!(
        envelope.attempts().last().and_then(|a| a.retry_action),
        Some(RetryAction::Exhausted)
    );

    // A POST that carries an idempotency key is sent again, every copy with the same key, and a
    // second call with a key of its own.
    let server = Server::start(vec![
        Reply::Hang,
        reply("200 OK", ITEMS),
        reply("200 OK", ITEMS),
    ])
    .await;
    let url = server.url("/orders");
    let keyed = Adapter::builder("place_order", &url)
        .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items"))
        .attempt_timeout(Duration::from_millis(300))
        .method(http::Method::POST)
        .idempotency_key(true)
        .build()
        .unwrap();
    // The client sends the attempt's key in the `Idempotency-Key` header.
    let send = |context: AttemptContext| {
        let (client, url, headers, body) = (&client, &url, &no_headers, body.clone());
        async move { client.post(context, url, headers, body).await }
    };
    assert_eq!(keyed.call(send).await.class(), OutcomeClass::Success);
    assert_eq!(keyed.call(send).await.class(), OutcomeClass::Success);
    let keys = server.header_values("idempotency-key");
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.iter().all(Option::is_some), "{keys:?}");
    assert_eq!(keys[0], keys[1], "the retry carries the call's key");
    assert_ne!(keys[1], keys[2], "another call has another key");
}

#[tokio::test]
async fn a_timeout_mid_body_is_partial_with_the_bytes_that_arrived_and_before_the_status_a_failure()
{
    const ARRIVED: &str = r#"{"items":[1,2,"#;
    let spans = spans();
    let server = Server::start(vec![
        Reply::Stall(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 64\r\n\r\n{ARRIVED}"
        )),
        Reply::Hang,
    ])
    .await;
    let url = server.url("/search");
    let envelope = call(&url, 1, &spans).await;
    let Outcome::Partial {
        payload,
        truncation,
    } = envelope.outcome()
    else {
        panic!("a timeout mid-body cut an answer off: {envelope:?}");
    };
    assert_eq!(truncation.kind, PartialKind::MidStream);
    assert_eq!(
        truncation.covered,
        format!("the first {} bytes of the body", ARRIVED.len())
    );
    assert!(
        truncation.dropped.contains("ran out"),
        "{}",
        truncation.dropped
    );
    assert_eq!(payload, &Value::String(ARRIVED.to_owned()));
    assert_eq!(
        envelope.attempts()[0].retry_action,
        Some(RetryAction::AcceptPartial)
    );
    // No status within the attempt timeout: nothing arrived, an AccessFailure.
    let envelope = call(&url, 1, &spans).await;
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Timeout);
}

#[tokio::test]
async fn a_declared_total_above_the_items_returned_is_partial() {
    let server = Server::start(vec![reply("200 OK", r#"{"items":[1,2,3],"total":10}"#)]).await;
    let spans = spans();
    let envelope = call(&server.url("/search"), 3, &spans).await;
    let Outcome::Partial { truncation, .. } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(truncation.kind, PartialKind::DeclaredTotal);
    assert_eq!(
        (truncation.returned, truncation.expected),
        (Some(3), Some(10))
    );
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn an_empty_list_is_empty() {
    let server = Server::start(vec![reply("200 OK", r#"{"items":[]}"#)]).await;
    let spans = spans();
    let envelope = call(&server.url("/search"), 3, &spans).await;
    assert_eq!(envelope.class(), OutcomeClass::Empty);
    assert_eq!(server.requests(), 1);
    assert_eq!(spans.outcome_events(), 0);
}

#[tokio::test]
async fn a_refused_connection_is_an_access_failure() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/search", closed.local_addr().unwrap());
    drop(closed);
    let spans = spans();
    let envelope = call(&url, 2, &spans).await;
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Connect);
    assert_eq!(failure.final_action(), RetryAction::Exhausted);
    assert_eq!(envelope.attempts().len(), 2);
}

#[tokio::test]
async fn unauthorized_is_one_permanent_attempt() {
    let server = Server::start(vec![reply("401 Unauthorized", r#"{"error":"expired"}"#)]).await;
    let spans = spans();
    let envelope = call(&server.url("/search"), 3, &spans).await;
    let Outcome::AccessFailure { failure } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(failure.kind, AccessFailureKind::Auth);
    assert_eq!(failure.final_action(), RetryAction::Permanent);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn a_body_shorter_than_its_content_length_is_partial() {
    let cut = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\n{\"items\":[1,2";
    let server = Server::start(vec![Reply::Raw(cut.into())]).await;
    let spans = spans();
    let envelope = call(&server.url("/search"), 1, &spans).await;
    let Outcome::Partial { truncation, .. } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(truncation.kind, PartialKind::MidStream);
}

#[tokio::test]
async fn a_body_over_the_size_cap_is_partial() {
    let body = format!(r#"{{"items":[{}]}}"#, vec!["1"; 2000].join(","));
    let server = Server::start(vec![reply("200 OK", &body)]).await;
    let adapter = adapter(&server.url("/big"), 1, &spans().provider);
    let client = HttpClient::new(1024);
    let url = server.url("/big");
    let headers = HeaderMap::new();
    let envelope = adapter
        .call(|context| client.get(context, &url, &headers))
        .await;
    let Outcome::Partial { truncation, .. } = envelope.outcome() else {
        panic!("{envelope:?}");
    };
    assert_eq!(truncation.kind, PartialKind::SizeCap);
}

/// The probe example, built by `cargo test` next to this test binary.
/// The adapter's probe ships as `candor probe` (crate `candor-query`); `tests/run.sh` builds the
/// workspace's binaries before the tests.
fn candor_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().and_then(|p| p.parent()).unwrap();
    let candor = profile.join("candor");
    assert!(
        candor.exists(),
        "{} is missing: build the binaries first (cargo build --workspace --bins)",
        candor.display()
    );
    candor
}

async fn probe(args: &[&str]) -> (i32, Value) {
    let output = tokio::process::Command::new(candor_binary())
        .arg("probe")
        .args(args)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let envelope = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap(), envelope)
}

#[tokio::test]
async fn the_probe_prints_the_envelope_and_exits_by_class() {
    let server = Server::start(vec![
        reply("200 OK", r#"{"items":[1]}"#),
        reply("200 OK", r#"{"items":[]}"#),
        reply("200 OK", r#"{"items":[1,2,3],"total":10}"#),
        reply("503 Service Unavailable", ""),
        reply("503 Service Unavailable", ""),
    ])
    .await;
    let url = server.url("/search");
    let common = [
        "--items-field",
        "items",
        "--total-field",
        "total",
        "--timeout-ms",
        "2000",
    ];
    let cases = [
        (0, "success", 1),
        (1, "empty", 1),
        (3, "partial", 1),
        (4, "access_failure", 2),
    ];
    for (want_code, want_class, attempts) in cases {
        let attempts_arg = attempts.to_string();
        let mut args = vec![url.as_str()];
        args.extend(common);
        args.extend(["--max-attempts", attempts_arg.as_str()]);
        let (code, envelope) = probe(&args).await;
        assert_eq!(code, want_code, "{want_class}: {envelope}");
        assert_eq!(envelope["outcome"]["class"], want_class, "{envelope}");
        assert_eq!(
            envelope["attempts"].as_array().unwrap().len(),
            attempts,
            "{envelope}"
        );
        // What the probe prints is a valid envelope.
        serde_json::from_value::<Envelope<Value>>(envelope).unwrap();
    }
    assert_eq!(server.requests(), 5);

    // A body that stalls past the attempt timeout: what arrived, a Partial.
    let server = Server::start(vec![Reply::Stall(
        "HTTP/1.1 200 OK\r\ncontent-length: 64\r\n\r\n{\"items\":[1,".to_owned(),
    )])
    .await;
    let url = server.url("/search");
    let (code, envelope) = probe(&[url.as_str(), "--timeout-ms", "300"]).await;
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(
        envelope["outcome"]["truncation"]["kind"], "mid_stream",
        "{envelope}"
    );
}

#[tokio::test]
async fn the_probe_refuses_bad_usage_with_exit_code_two() {
    for args in [
        &[][..],
        &["http://127.0.0.1:9/x", "--timeout-ms", "soon"][..],
        &["--bogus"][..],
    ] {
        let (code, envelope) = probe(args).await;
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(envelope, Value::Null);
    }
}
