//! Events recorded at the moment they happen (contract rule `TELEMETRY-MOMENT`): an adapter
//! process killed while its call still runs (during its third attempt, and while it follows an
//! operation) has already reported what it saw, and the tables hold it. The Rust adapter runs
//! as `candor probe`, the Python adapter as `tests/e2e/clients/killed_python.py`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::process::Running;
use candor_e2e::query::candor;
use candor_e2e::tansu::Tansu;
use candor_e2e::{python, rfc3339, target_dir, tempdir, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the source does with one request.
#[derive(Clone)]
enum Reply {
    /// Writes this response and closes the connection.
    Raw(String),
    /// Never answers.
    Hang,
}

fn reply(status: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    Reply::Raw(format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    ))
}

/// A source on loopback that answers each request by its path: the next reply scripted for the
/// first path prefix it starts with, the last one repeating.
struct Source {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
}

/// The replies of a source by path prefix.
type Routes = Vec<(&'static str, Vec<Reply>)>;

/// The replies still to give, by path prefix, shared by the connections.
type Script = Arc<Mutex<Vec<(&'static str, VecDeque<Reply>)>>>;

impl Source {
    /// Starts a source whose routes `routes` makes from its base URL (`http://host:port`).
    async fn start(routes: impl FnOnce(&str) -> Routes) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let routes = routes(&format!("http://{addr}"));
        let requests = Arc::new(AtomicUsize::new(0));
        let routes: Script = Arc::new(Mutex::new(
            routes
                .into_iter()
                .map(|(prefix, replies)| (prefix, VecDeque::from(replies)))
                .collect(),
        ));
        let counter = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, routes.clone(), counter.clone()));
            }
        });
        Self { addr, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn serve(mut stream: TcpStream, routes: Script, requests: Arc<AtomicUsize>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let next = {
        let mut routes = routes.lock().unwrap();
        routes
            .iter_mut()
            .find(|(prefix, _)| path.starts_with(prefix))
            .and_then(|(_, replies)| {
                if replies.len() > 1 {
                    replies.pop_front()
                } else {
                    replies.front().cloned()
                }
            })
    };
    requests.fetch_add(1, Ordering::SeqCst);
    match next {
        Some(Reply::Raw(bytes)) => {
            let _ = stream.write_all(bytes.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        Some(Reply::Hang) => while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {},
        None => panic!("no reply scripted for {path}"),
    }
}

/// The adapter whose process is killed.
#[derive(Clone, Copy)]
enum Client {
    /// `candor probe`.
    Rust,
    /// `tests/e2e/clients/killed_python.py`.
    Python,
}

impl Client {
    /// Starts a call of `url` (three attempts of up to 600 s, or following the operation it
    /// accepts) that reports to `collector` as `service`, its metric interval 300 ms.
    fn start(self, collector: &Collector, service: &str, url: &str, follow: bool) -> Running {
        let endpoint = collector.grpc_endpoint.as_str();
        let owned = |args: &[&str]| args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
        match self {
            Self::Rust => {
                let mut args = owned(&[
                    "probe",
                    url,
                    "--otlp-endpoint",
                    endpoint,
                    "--service-name",
                    service,
                    "--timeout-ms",
                    "600000",
                    "--max-attempts",
                    "3",
                ]);
                if follow {
                    args.push("--follow".to_owned());
                }
                Running::spawn(
                    service,
                    &target_dir().join("candor"),
                    &args,
                    &[("OTEL_METRIC_EXPORT_INTERVAL", "300")],
                )
            }
            Self::Python => {
                let script = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/clients/killed_python.py");
                let mut args = owned(&[script, endpoint, service, url]);
                if follow {
                    args.push("--follow".to_owned());
                }
                // This checkout's Python adapter, whatever the venv holds.
                let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/src");
                Running::spawn(service, &python(), &args, &[("PYTHONPATH", source)])
            }
        }
    }

    /// Whether `adapter` (the `adapter` column) names this client's adapter.
    fn wrote(self, adapter: &str) -> bool {
        match self {
            Self::Rust => adapter == candor_adapter::ADAPTER_VERSION,
            Self::Python => adapter.starts_with("candor-adapter-python/"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_killed_during_its_third_attempt_has_reported_its_first_two() {
    killed_during_the_third_attempt(Client::Rust).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_adapter_killed_during_its_third_attempt_has_reported_its_first_two() {
    killed_during_the_third_attempt(Client::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_killed_while_it_follows_an_operation_leaves_it_unknown() {
    killed_while_following(Client::Rust).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_adapter_killed_while_it_follows_an_operation_leaves_it_unknown() {
    killed_while_following(Client::Python).await;
}

async fn killed_during_the_third_attempt(client: Client) {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("moment-retries");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);
    let source = Source::start(|_| {
        vec![(
            "/v1/search",
            vec![
                reply("503 Service Unavailable", &[], ""),
                reply("503 Service Unavailable", &[], ""),
                Reply::Hang,
            ],
        )]
    })
    .await;
    let url = source.url("/v1/search");
    let mut running = client.start(&collector, "killed-caller", &url, false);
    wait_for(
        "the probe's third attempt",
        Duration::from_secs(30),
        || async { (source.requests() >= 3).then_some(()) },
    )
    .await;
    // The two failed attempts reach the collector while the third still runs.
    wait_for(
        "the first two attempts' events at the collector",
        Duration::from_secs(30),
        || async {
            let accepted = collector
                .sample("candor_collector_events_accepted_total")
                .await?;
            (accepted >= 2.0).then_some(())
        },
    )
    .await;
    running.kill().await;

    let rows = wait_for(
        "the killed probe's two events in the tables",
        Duration::from_secs(90),
        || async {
            let answer = candor(
                &root,
                &["incident", "--target", &url, "--since", &since, "--no-live"],
            );
            let rows = answer.rows();
            (rows.len() == 2).then_some(rows)
        },
    )
    .await;
    for (row, attempt) in rows.iter().zip(1..) {
        assert_eq!(row["retry_action"], "retry", "{row}");
        assert_eq!(row["retry_attempt"], attempt, "{row}");
        assert_eq!(row["http_status_code"], 503, "{row}");
        assert_eq!(row["service_name"], "killed-caller", "{row}");
        assert!(
            row["adapter"].as_str().is_some_and(|a| client.wrote(a)),
            "{row}"
        );
    }
}

async fn killed_while_following(client: Client) {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("moment-follow");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = rfc3339(collector.covered_since().await);
    let source = Source::start(|base| {
        let status = format!("{base}/v1/status/op-killed");
        vec![
            (
                "/v1/reports",
                vec![reply("202 Accepted", &[("location", &status)], "")],
            ),
            (
                "/v1/status/",
                vec![reply("200 OK", &[], r#"{"status":"running"}"#)],
            ),
        ]
    })
    .await;
    let url = source.url("/v1/reports");
    let mut running = client.start(&collector, "killed-follower", &url, true);
    // The acceptance and the first state read reach the collector while following goes on.
    wait_for(
        "the acceptance and the running state at the collector",
        Duration::from_secs(30),
        || async {
            let accepted = collector
                .sample("candor_collector_operation_events_accepted_total")
                .await?;
            (accepted >= 2.0).then_some(())
        },
    )
    .await;
    running.kill().await;

    let row = wait_for(
        "the killed follower's operation, unknown, in `candor operations`",
        Duration::from_secs(90),
        || async {
            let answer = candor(
                &root,
                &[
                    "operations",
                    "--since",
                    &since,
                    "--stuck-after",
                    "1h",
                    "--no-live",
                ],
            );
            answer
                .rows()
                .into_iter()
                .find(|row| row["status"] == "unknown")
        },
    )
    .await;
    assert_eq!(row["service"], "killed-follower", "{row}");
    assert_eq!(row["state"], "running", "{row}");
    assert!(
        row["operation_id"]
            .as_str()
            .is_some_and(|id| id.contains("op-killed")),
        "{row}"
    );
}
