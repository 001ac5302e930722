//! The collector binary (`candor-collector ingest`) on free loopback ports.

use std::time::{Duration, SystemTime};

use crate::process::Running;
use crate::{free_port, target_dir};

/// A running collector.
pub struct Collector {
    /// `http://127.0.0.1:port` of the OTLP/gRPC receiver.
    pub grpc_endpoint: String,
    /// `http://127.0.0.1:port` of the OTLP/HTTP receiver.
    pub http_endpoint: String,
    /// `http://127.0.0.1:port` of `/metrics`, `/healthz`, `/readyz`.
    pub metrics_endpoint: String,
    process: Running,
}

/// How to start a collector.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A configuration file's contents, written to a temp file.
    pub config: Option<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Whether to wait for `/readyz` (false when the broker is meant to be unreachable).
    pub skip_ready: bool,
    /// The OTLP/gRPC port, for a collector started again where its clients send (default: a
    /// free port).
    pub grpc_port: Option<u16>,
}

impl Collector {
    /// Starts a collector producing to `bootstrap` and waits until it is ready.
    pub async fn start(bootstrap: &str, options: Options) -> Self {
        let binary = target_dir().join("candor-collector");
        assert!(
            binary.exists(),
            "{} is missing: run the suite with the workspace (tests/run.sh does), or \
             `cargo build -p candor-collector` first: testing only candor-e2e does not rebuild it",
            binary.display()
        );
        // A free port is found by binding and releasing it, so another process may take it
        // before the collector binds it; that start is retried with new ports.
        for _ in 0..PORT_ATTEMPTS {
            let grpc = options.grpc_port.unwrap_or_else(free_port);
            let (http, metrics) = (free_port(), free_port());
            let mut args = vec![
                "ingest".to_owned(),
                "--grpc-addr".into(),
                format!("127.0.0.1:{grpc}"),
                "--http-addr".into(),
                format!("127.0.0.1:{http}"),
                "--metrics-addr".into(),
                format!("127.0.0.1:{metrics}"),
                "--kafka".into(),
                bootstrap.to_owned(),
                "--heartbeat-interval".into(),
                "1s".into(),
            ];
            if let Some(config) = &options.config {
                args.extend(crate::config_args(&format!("collector-{grpc}"), config));
            }
            let env: Vec<(&str, &str)> = options
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let process = Running::spawn(&format!("collector-{grpc}"), &binary, &args, &env);
            let mut collector = Self {
                grpc_endpoint: format!("http://127.0.0.1:{grpc}"),
                http_endpoint: format!("http://127.0.0.1:{http}"),
                metrics_endpoint: format!("127.0.0.1:{metrics}"),
                process,
            };
            let probe = if options.skip_ready {
                "/healthz"
            } else {
                "/readyz"
            };
            let address = collector.metrics_endpoint.clone();
            if ready_or_port_taken(&mut collector.process, &address, probe, "collector").await {
                return collector;
            }
        }
        panic!("the collector found no free ports in {PORT_ATTEMPTS} attempts")
    }

    /// The collector's `/metrics` text.
    pub async fn metrics(&self) -> String {
        get(&self.metrics_endpoint, "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// One sample of `/metrics`, e.g. `candor_collector_rejected_total{reason="unknown_class"}`.
    pub async fn sample(&self, series: &str) -> Option<f64> {
        sample(&self.metrics_endpoint, series).await
    }

    /// Waits until a heartbeat stamped after this call has reached Kafka, so that an answer
    /// read from the tail covers everything up to now. Heartbeats are sent one after another,
    /// each stamped once the one before it was delivered: of the two deliveries counted after
    /// this call began, the second was stamped after the first, so after the call began.
    pub async fn heartbeat_after_now(&self) {
        let series = "candor_collector_heartbeats_sent_total";
        // A missing counter fails here rather than counting from zero, which could pass at once.
        let sent = self
            .sample(series)
            .await
            .expect("the collector exposes its heartbeat counter");
        crate::wait_for(
            "a collector heartbeat sent after now",
            Duration::from_secs(30),
            || async { (self.sample(series).await? >= sent + 2.0).then_some(()) },
        )
        .await;
    }

    /// A time a question's window may start at and be covered: it waits for a heartbeat sent
    /// after this call began, so a heartbeat at or before the time returned reaches the tables
    /// and the tail. A window that starts earlier starts before the pipeline ran, which `candor`
    /// answers as partial.
    pub async fn covered_since(&self) -> SystemTime {
        self.heartbeat_after_now().await;
        SystemTime::now()
    }

    /// What the collector has logged.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// The process.
    pub fn process(&mut self) -> &mut Running {
        &mut self.process
    }
}

/// Starts tried before giving up on finding free ports.
pub(crate) const PORT_ATTEMPTS: usize = 5;

/// Waits up to 60 s for `probe` at `address` to answer 200: true when it does, false when the
/// process exited because a port was taken (the caller tries other ports). Any other exit, or
/// the deadline, fails the test with the process's output.
pub(crate) async fn ready_or_port_taken(
    process: &mut Running,
    address: &str,
    probe: &str,
    name: &str,
) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if get(address, probe).await.map(|(status, _)| status) == Some(200) {
            return true;
        }
        if process.exited() {
            let output = process.output();
            assert!(
                output.contains("is the port taken?"),
                "the {name} exited before {probe} answered:\n{output}"
            );
            return false;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after 60s waiting for the {name}'s {probe}:\n{}",
            process.output()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One sample of the `/metrics` served at `address`, e.g. `name{label="value"}`.
pub(crate) async fn sample(address: &str, series: &str) -> Option<f64> {
    let (_, text) = get(address, "/metrics").await?;
    text.lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// The status code and body of a GET, `None` parts when nothing answered.
pub async fn get_status(address: &str, path: &str) -> (Option<u16>, String) {
    match get(address, path).await {
        Some((status, body)) => (Some(status), body),
        None => (None, String::new()),
    }
}

/// A bare HTTP/1.0 POST of a JSON `body` over a fresh connection: the status code (`None` when
/// nothing answered) and the response's body.
pub async fn post_json(address: &str, path: &str, body: &str) -> (Option<u16>, String) {
    post_with(address, path, "Content-Type: application/json\r\n", body).await
}

/// A bare HTTP/1.0 POST without a body over a fresh connection: the status code (`None` when
/// nothing answered) and the body.
pub async fn post(address: &str, path: &str) -> (Option<u16>, String) {
    post_with(address, path, "", "").await
}

/// A POST with the header lines `headers` (each ending in CRLF) and `body`.
pub(crate) async fn post_with(
    address: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (Option<u16>, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return (None, String::new());
    };
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {address}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (None, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok());
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A bare HTTP/1.0 GET over a fresh connection: the status code and the body.
pub(crate) async fn get(address: &str, path: &str) -> Option<(u16, String)> {
    get_with(address, path, None).await
}

/// The status code and body of a GET with an `Authorization` header, `None` parts when nothing
/// answered.
pub async fn get_status_with(
    address: &str,
    path: &str,
    authorization: &str,
) -> (Option<u16>, String) {
    match get_with(address, path, Some(authorization)).await {
        Some((status, body)) => (Some(status), body),
        None => (None, String::new()),
    }
}

async fn get_with(address: &str, path: &str, authorization: Option<&str>) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let header = authorization
        .map(|value| format!("Authorization: {value}\r\n"))
        .unwrap_or_default();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n{header}\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Some((status, body))
}
