//! The end-to-end harness: starts real processes (the Tansu broker, the collector) on free
//! loopback ports, waits for them to be ready, reads Kafka topics back, and stops everything
//! when dropped.

pub mod alertmanager;
pub mod collector;
pub mod compactor;
pub mod dashboards;
pub mod kafka;
pub mod load;
pub mod pki;
pub mod process;
pub mod prometheus;
pub mod query;
pub mod records;
pub mod s3;
pub mod tansu;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|err| panic!("no free loopback port: {err}"))
}

/// A fresh directory under the system's temporary directory, unique to this process and call.
pub fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "candor-e2e-tables-{name}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("creating {}: {err}", dir.display()));
    dir
}

/// The directory cargo builds binaries into (`target/debug`), found from this test binary
/// (`target/debug/deps/e2e-…`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|err| panic!("current_exe: {err}"));
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("unexpected test binary location {}", exe.display()))
}

/// `at` as RFC 3339, as `candor --since` and `--until` take it.
pub fn rfc3339(at: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339()
}

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `address` accepts a TCP connection, or panics after `timeout` naming `what`.
pub async fn wait_for_port(what: &str, address: &str, timeout: Duration) {
    wait_for(what, timeout, || async move {
        tokio::net::TcpStream::connect(address)
            .await
            .ok()
            .map(|_| ())
    })
    .await;
}

/// Writes a configuration file's text under the temp directory as `candor-e2e-{name}-{pid}.toml`
/// and returns `["--config", path]`.
pub fn config_args(name: &str, text: &str) -> [String; 2] {
    let path = std::env::temp_dir().join(format!("candor-e2e-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    ["--config".to_owned(), path.display().to_string()]
}

/// The Python of the venv `tests/run.sh` makes (OpenTelemetry SDK, deltalake), or `CANDOR_PYTHON`.
pub fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("CANDOR_PYTHON") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let venv = home.join(".cache/candor-venv/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: tests/run.sh installs tests/e2e/clients/requirements.txt into it",
        venv.display()
    );
    venv
}

/// Runs the Python client `tests/e2e/clients/{script}` with `spec` as JSON on its stdin and
/// returns the JSON it printed, or panics with its stderr when it fails or outlasts `timeout`.
/// It imports this checkout's Python adapter (`adapters/python/src`), whatever the venv holds.
pub async fn run_python_client(
    script: &str,
    spec: &serde_json::Value,
    timeout: Duration,
) -> serde_json::Value {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = tokio::process::Command::new(python());
    command
        .arg(tests.join("e2e/clients").join(script))
        .env("PYTHONPATH", tests.join("../adapters/python/src"));
    run_json_client(command, script, spec, timeout).await
}

/// Runs the Node client `tests/e2e/clients/{script}` as [`run_python_client`] runs a Python one.
/// Its folder's `node_modules` is installed by `tests/run.sh` (`npm ci`).
pub async fn run_node_client(
    script: &str,
    spec: &serde_json::Value,
    timeout: Duration,
) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("e2e/clients")
        .join(script);
    let modules = path.with_file_name("node_modules");
    assert!(
        modules.is_dir(),
        "{} is missing: tests/run.sh installs it with `npm ci`",
        modules.display()
    );
    let mut command = tokio::process::Command::new("node");
    command.arg(&path);
    run_json_client(command, script, spec, timeout).await
}

/// Runs `command` with `spec` as JSON on its stdin, and returns the JSON it printed.
async fn run_json_client(
    mut command: tokio::process::Command,
    script: &str,
    spec: &serde_json::Value,
    timeout: Duration,
) -> serde_json::Value {
    use tokio::io::AsyncWriteExt as _;

    let mut child = command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("starting {script}: {err}"));
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(spec.to_string().as_bytes())
        .await
        .unwrap_or_else(|err| panic!("writing {script}'s spec: {err}"));
    drop(stdin);
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within {timeout:?}"))
        .unwrap_or_else(|err| panic!("waiting for {script}: {err}"));
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{script} printed no JSON ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
