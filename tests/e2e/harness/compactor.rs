//! The compactor (`candor-collector compact`) writing Delta tables under a directory, and an
//! independent reader of those tables (the Python `deltalake` package).

use std::path::{Path, PathBuf};

use crate::collector::{PORT_ATTEMPTS, ready_or_port_taken};
use crate::process::Running;
use crate::{free_port, python, target_dir};

/// A running compactor.
pub struct Compactor {
    /// `127.0.0.1:port` of `/metrics`, `/healthz`, `/readyz`.
    pub metrics_endpoint: String,
    process: Running,
}

/// How to start a compactor.
#[derive(Debug, Clone)]
pub struct Options {
    /// The consumer group (a fresh one per start joins in about 3 s with Tansu).
    pub group_id: String,
    /// `files.max_age`.
    pub max_age: String,
    /// Environment variables (e.g. `CANDOR_COMPACT_CRASH_AT`).
    pub env: Vec<(String, String)>,
    /// A configuration file's contents, written to a temp file (the flags above win over it).
    pub config: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            group_id: "candor-compactor-e2e".into(),
            max_age: "500ms".into(),
            env: Vec::new(),
            config: None,
        }
    }
}

impl Compactor {
    /// Starts a compactor reading `bootstrap` into tables under `root`; waits for `/readyz`.
    pub async fn start(bootstrap: &str, root: &Path, options: Options) -> Self {
        Self::start_at(bootstrap, &root.display().to_string(), options).await
    }

    /// [`Compactor::start`] with the root as a URL or path string (e.g. `s3://bucket/prefix`).
    pub async fn start_at(bootstrap: &str, root: &str, options: Options) -> Self {
        let binary = target_dir().join("candor-collector");
        assert!(binary.exists(), "{} is missing", binary.display());
        for _ in 0..PORT_ATTEMPTS {
            let metrics = free_port();
            let mut args = vec![
                "compact".to_owned(),
                "--table-root".into(),
                root.to_owned(),
                "--kafka".into(),
                bootstrap.to_owned(),
                "--metrics-addr".into(),
                format!("127.0.0.1:{metrics}"),
                "--group-id".into(),
                options.group_id.clone(),
                "--max-age".into(),
                options.max_age.clone(),
                "--compactor-id".into(),
                format!("e2e-{metrics}"),
            ];
            if let Some(config) = &options.config {
                args.extend(crate::config_args(&format!("compactor-{metrics}"), config));
            }
            let env: Vec<(&str, &str)> = options
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let process = Running::spawn(&format!("compactor-{metrics}"), &binary, &args, &env);
            let mut compactor = Self {
                metrics_endpoint: format!("127.0.0.1:{metrics}"),
                process,
            };
            let address = compactor.metrics_endpoint.clone();
            if ready_or_port_taken(&mut compactor.process, &address, "/readyz", "compactor").await {
                return compactor;
            }
        }
        panic!("the compactor found no free port in {PORT_ATTEMPTS} attempts")
    }

    /// One sample of `/metrics`, e.g. `candor_compactor_rows_written_total{table="outcome_events"}`.
    pub async fn sample(&self, series: &str) -> Option<f64> {
        crate::collector::sample(&self.metrics_endpoint, series).await
    }

    /// What the compactor has logged.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// The process.
    pub fn process(&mut self) -> &mut Running {
        &mut self.process
    }
}

fn reader_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/clients/read_delta.py")
}

/// Runs the independent reader with `args` and returns its output lines; fails on an error.
fn run_reader(args: &[&std::ffi::OsStr]) -> Vec<String> {
    run_reader_with(args, &[])
}

/// [`run_reader`] with environment variables set (an object store's `AWS_*`).
fn run_reader_with(args: &[&std::ffi::OsStr], env: &[(String, String)]) -> Vec<String> {
    let output = crate::process::succeeded(
        std::process::Command::new(python())
            .arg(reader_script())
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v))),
        "the Delta reader",
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every row of a table, read by the Python `deltalake` package from the files its Delta log
/// lists, one JSON object per row (timestamps as microseconds, binary as hex).
pub fn read_table(root: &Path, table: &str) -> Vec<serde_json::Value> {
    rows_of(&run_reader(&[root.join(table).as_os_str()]))
}

/// [`read_table`] of a table at a URL (`s3://bucket/prefix/outcome_events`), with the
/// environment that reaches its store.
pub fn read_table_at(uri: &str, env: &[(String, String)]) -> Vec<serde_json::Value> {
    rows_of(&run_reader_with(&[uri.as_ref()], env))
}

/// The reader's JSON lines as rows.
fn rows_of(lines: &[String]) -> Vec<serde_json::Value> {
    lines
        .iter()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("reader line {line:?}: {err}"))
        })
        .collect()
}

/// The data files of a table's current version, as listed by the independent reader.
pub fn table_files(root: &Path, table: &str) -> Vec<String> {
    run_reader(&["--files".as_ref(), root.join(table).as_os_str()])
}

/// Starts the independent reader reading `table` again and again for `seconds`; its output is
/// one `version rows distinct_ids` line per read.
pub fn start_reader_loop(root: &Path, table: &str, seconds: u32) -> std::process::Child {
    std::process::Command::new(python())
        .arg(reader_script())
        .arg("--loop")
        .arg(seconds.to_string())
        .arg(root.join(table))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("starting the Delta reader: {err}"))
}

/// Runs `candor-collector maintain` with a configuration file's contents and flags; returns
/// whether it succeeded and what it printed.
pub fn maintain(root: &Path, config: &str, flags: &[&str]) -> (bool, String) {
    let path = root.with_extension("maintain.toml");
    std::fs::write(&path, config).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    let output = std::process::Command::new(target_dir().join("candor-collector"))
        .arg("maintain")
        .arg("--config")
        .arg(&path)
        .arg("--table-root")
        .arg(root)
        .args(flags)
        .output()
        .unwrap_or_else(|err| panic!("running maintain: {err}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}
