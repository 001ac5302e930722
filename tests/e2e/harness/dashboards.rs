//! The dashboards binary (`candor-dashboards`) on a free loopback port, and a webhook receiver
//! that records the notifications it is sent.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::collector::{PORT_ATTEMPTS, get_status, ready_or_port_taken};
use crate::process::Running;
use crate::{free_port, target_dir};

/// The failure kinds `candor demo` makes: timeouts (`/slow`), rate limits and 5xx (`/lookup`),
/// an expired credential (`/expired`) and truncated pages (`/search`).
pub const DEMO_FAILURE_KINDS: [&str; 5] = [
    "timeout",
    "rate_limited",
    "server_error",
    "auth",
    "declared_total",
];

/// Whether an `/api/overview` answer shows failure events of every kind in `kinds`.
pub fn shows_failure_kinds(overview: &Value, kinds: &[&str]) -> bool {
    kinds
        .iter()
        .all(|kind| overview["failures"]["by_kind"][*kind].as_u64() > Some(0))
}

/// A running `candor-dashboards`.
pub struct Dashboards {
    /// `127.0.0.1:port` of the UI, the API and `/metrics`.
    pub address: String,
    process: Running,
}

/// How to start the dashboards.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A rules file's text; the shipped rules without it.
    pub rules: Option<String>,
    /// Webhook URLs.
    pub webhooks: Vec<String>,
    /// More arguments (thresholds, intervals).
    pub args: Vec<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// The state directory (`--state-dir`); a fresh one of its own without it.
    pub state_dir: Option<std::path::PathBuf>,
    /// The port to listen on, for a restart where a scraper expects it; a free one without it.
    pub port: Option<u16>,
}

impl Dashboards {
    /// Starts the dashboards over `bootstrap` and the tables under `root`; waits for `/healthz`
    /// (not `/readyz`: a test may start them while Kafka is down).
    pub async fn start(bootstrap: &str, root: &Path, options: Options) -> Self {
        let binary = target_dir().join("candor-dashboards");
        assert!(binary.exists(), "{} is missing", binary.display());
        for _ in 0..PORT_ATTEMPTS {
            let port = options.port.unwrap_or_else(free_port);
            let mut args = vec![
                "--listen".to_owned(),
                format!("127.0.0.1:{port}"),
                "--kafka".into(),
                bootstrap.to_owned(),
                "--tables".into(),
                root.display().to_string(),
                "--group".into(),
                format!("candor-dashboards-e2e-{port}"),
            ];
            if let Some(rules) = &options.rules {
                let path = std::env::temp_dir().join(format!(
                    "candor-e2e-rules-{}-{port}.toml",
                    std::process::id()
                ));
                std::fs::write(&path, rules)
                    .unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
                args.extend(["--rules".to_owned(), path.display().to_string()]);
            }
            for hook in &options.webhooks {
                args.extend(["--webhook".to_owned(), hook.clone()]);
            }
            let state_dir = options
                .state_dir
                .clone()
                .unwrap_or_else(|| crate::tempdir(&format!("dashboards-state-{port}")));
            args.extend(["--state-dir".to_owned(), state_dir.display().to_string()]);
            args.extend(options.args.iter().cloned());
            let env: Vec<(&str, &str)> = options
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let process = Running::spawn(&format!("dashboards-{port}"), &binary, &args, &env);
            let mut dashboards = Self {
                address: format!("127.0.0.1:{port}"),
                process,
            };
            let address = dashboards.address.clone();
            if ready_or_port_taken(&mut dashboards.process, &address, "/healthz", "dashboards")
                .await
            {
                return dashboards;
            }
        }
        panic!("the dashboards found no free port in {PORT_ATTEMPTS} attempts")
    }

    /// The status and body of a GET of `path`.
    pub async fn get(&self, path: &str) -> (Option<u16>, String) {
        get_status(&self.address, path).await
    }

    /// A JSON API answer; `Value::Null` when there was none.
    pub async fn json(&self, path: &str) -> Value {
        let (_, body) = self.get(path).await;
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    /// Waits up to 30 s for an alert instance of `/api/alerts` that `matches`; returns it.
    pub async fn wait_alert(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let matches = &matches;
        crate::wait_for(what, std::time::Duration::from_secs(30), || async move {
            let alerts = self.json("/api/alerts").await;
            alerts
                .as_array()?
                .iter()
                .find(|alert| matches(alert))
                .cloned()
        })
        .await
    }

    /// One sample of `/metrics`.
    pub async fn sample(&self, series: &str) -> Option<f64> {
        crate::collector::sample(&self.address, series).await
    }

    /// What the process has printed.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// Kills the process (SIGKILL: nothing is flushed or saved on the way out).
    pub async fn kill(&mut self) {
        self.process.kill().await;
    }
}

/// A webhook receiver on a loopback port: answers every POST with 200 and keeps its JSON body.
pub struct Receiver {
    /// The URL to configure.
    pub url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver on `port` (a free one when `None`).
    pub async fn start(port: Option<u16>) -> Self {
        Self::start_with(port, None).await
    }

    /// Starts a receiver over HTTPS with the server certificate of `pki`, at
    /// `https://localhost:PORT/api/v2/alerts`.
    pub async fn start_tls(pki: &crate::pki::Pki) -> Self {
        let certs: Vec<rustls_pki_types::CertificateDer<'static>> =
            rustls_pki_types::pem::PemObject::pem_file_iter(&pki.cert)
                .and_then(Iterator::collect)
                .unwrap_or_else(|err| panic!("reading {}: {err}", pki.cert.display()));
        let key: rustls_pki_types::PrivateKeyDer<'static> =
            rustls_pki_types::pem::PemObject::from_pem_file(&pki.key)
                .unwrap_or_else(|err| panic!("reading {}: {err}", pki.key.display()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(certs, key))
        .unwrap_or_else(|err| panic!("the receiver's TLS configuration: {err}"));
        Self::start_with(
            None,
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
        )
        .await
    }

    async fn start_with(port: Option<u16>, tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let port = port.unwrap_or_else(free_port);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|err| panic!("webhook receiver on port {port}: {err}"));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let (kept, seen) = (Arc::clone(&bodies), Arc::clone(&authorizations));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let host = if tls.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (kept, seen, tls) = (Arc::clone(&kept), Arc::clone(&seen), tls.clone());
                tokio::spawn(async move {
                    let request = match tls {
                        None => read_request(stream).await,
                        // A client that does not trust the certificate ends here.
                        Some(tls) => match tls.accept(stream).await {
                            Ok(stream) => read_request(stream).await,
                            Err(_) => None,
                        },
                    };
                    if let Some((authorization, body)) = request {
                        seen.lock().expect("receiver lock").push(authorization);
                        kept.lock().expect("receiver lock").push(body);
                    }
                });
            }
        });
        Self {
            url: format!("{scheme}://{host}:{port}/api/v2/alerts"),
            bodies,
            authorizations,
            task,
        }
    }

    /// The `Authorization` header of every request received, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.authorizations.lock().expect("receiver lock").clone()
    }

    /// Every alert received, flattened from the posted lists.
    pub fn alerts(&self) -> Vec<Value> {
        self.bodies
            .lock()
            .expect("receiver lock")
            .iter()
            .flat_map(|body| body.as_array().cloned().unwrap_or_default())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP/1.1 request, answers 200, and returns its `Authorization` header and its body
/// as JSON.
async fn read_request<S>(mut stream: S) -> Option<(Option<String>, Value)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length, authorization) = loop {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let value_of = |name: &str| {
                head.lines().find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    key.trim()
                        .eq_ignore_ascii_case(name)
                        .then(|| value.trim().to_owned())
                })
            };
            let length = value_of("content-length")
                .and_then(|value| value.parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length, value_of("authorization"));
        }
    };
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await
        .ok()?;
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).ok()?;
    // A TLS stream sends its close_notify; a plain one has nothing more to say.
    let _ = stream.shutdown().await;
    Some((authorization, body))
}

/// What `clients/browser.py` found: whether every expectation held, and its report line.
#[derive(Debug)]
pub struct BrowserCheck {
    /// Exit code 0.
    pub ok: bool,
    /// Its JSON report (or its error output).
    pub report: String,
}

/// Where the suite keeps its artifacts (screenshots): `target/debug/artifacts`.
pub fn artifacts() -> std::path::PathBuf {
    let dir = target_dir().join("artifacts");
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("creating {}: {err}", dir.display()));
    dir
}

/// Loads the dashboards' overview over the last 15 minutes in the browser, checks `expect`,
/// keeps the screenshot as `artifacts/<name>.png`, and fails the test with the client's report
/// when an expectation did not hold.
pub async fn assert_in_browser(dashboards: &Dashboards, expect: Value, name: &str) {
    let url = format!("http://{}/?range=15m", dashboards.address);
    let screenshot = artifacts().join(format!("{name}.png"));
    let check = tokio::task::spawn_blocking(move || browser(&url, &expect, &screenshot))
        .await
        .expect("the browser check panicked");
    assert!(check.ok, "{}", check.report);
}

/// Loads `url` in headless Chromium through WebDriver (`clients/browser.py`), checks
/// `expect` (see that script) and writes a full-page screenshot to `screenshot`.
pub fn browser(url: &str, expect: &Value, screenshot: &Path) -> BrowserCheck {
    browser_with(url, expect, screenshot, &[])
}

/// [`browser`] with more of `browser.py`'s arguments (`--ca-cert`, `--authorization-file`).
pub fn browser_with(
    url: &str,
    expect: &Value,
    screenshot: &Path,
    more: &[std::ffi::OsString],
) -> BrowserCheck {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/clients/browser.py");
    let expect_file = std::env::temp_dir().join(format!(
        "candor-e2e-browser-{}-{}.json",
        std::process::id(),
        free_port()
    ));
    std::fs::write(&expect_file, expect.to_string())
        .unwrap_or_else(|err| panic!("writing {}: {err}", expect_file.display()));
    let output = std::process::Command::new(crate::python())
        .arg(&script)
        .args(["--url", url, "--timeout", "60", "--expect"])
        .arg(&expect_file)
        .arg("--screenshot")
        .arg(screenshot)
        .args(more)
        .output()
        .unwrap_or_else(|err| panic!("running {}: {err}", script.display()));
    let _ = std::fs::remove_file(&expect_file);
    let code = output.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "browser.py could not run (exit {code:?}):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    BrowserCheck {
        ok: code == Some(0),
        report: String::from_utf8_lossy(&output.stdout).into_owned(),
    }
}
