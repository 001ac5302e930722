//! The Tansu broker (a Kafka API broker) on a free loopback port.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::Running;
use crate::{free_port, wait_for_port};

/// A running broker.
pub struct Tansu {
    /// `127.0.0.1:port`.
    pub bootstrap: String,
    launch: Launch,
    process: Running,
}

/// How the broker is started, kept for a restart.
#[derive(Clone)]
struct Launch {
    bootstrap: String,
    storage: String,
    dir: Option<PathBuf>,
    /// What the broker tells clients to connect to, when not `bootstrap`.
    advertised: Option<String>,
    /// `--authentication`: clients must log in with SASL.
    authentication: bool,
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CANDOR_TANSU") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let installed = home.join(".cargo/bin/tansu");
    if installed.exists() {
        return installed;
    }
    PathBuf::from("tansu")
}

fn spawn(launch: &Launch) -> Running {
    let url = format!("tcp://{}", launch.bootstrap);
    let advertised = launch
        .advertised
        .as_ref()
        .map_or_else(|| url.clone(), |address| format!("tcp://{address}"));
    let mut args = vec![
        "broker".into(),
        "--listener-url".into(),
        url,
        "--advertised-listener-url".into(),
        advertised,
        "--storage-engine".into(),
        launch.storage.clone(),
    ];
    if launch.authentication {
        args.push("--authentication".into());
    }
    Running::spawn_in(launch.dir.as_deref(), "tansu", &binary(), &args, &[])
}

impl Tansu {
    /// Starts a broker with the in-memory storage engine and waits until it accepts connections.
    pub async fn start() -> Self {
        Self::start_with("memory://tansu/".into(), None).await
    }

    /// Starts a broker whose data survives a restart: SQLite in `dir` (Tansu reads the path of a
    /// `sqlite://` URL relative to its working directory).
    pub async fn start_durable(dir: &Path) -> Self {
        Self::start_with("sqlite://tansu.db".into(), Some(dir.to_path_buf())).await
    }

    async fn start_with(storage: String, dir: Option<PathBuf>) -> Self {
        Self::launch(Launch {
            bootstrap: format!("127.0.0.1:{}", free_port()),
            storage,
            dir,
            advertised: None,
            authentication: false,
        })
        .await
    }

    async fn launch(launch: Launch) -> Self {
        let tansu = Self {
            bootstrap: launch.bootstrap.clone(),
            process: spawn(&launch),
            launch,
        };
        tansu.wait_ready().await;
        tansu
    }

    /// Starts a durable broker (SQLite in `dir`) that requires SASL/SCRAM-SHA-512 of its clients
    /// and knows the user `user`, and that tells clients to connect to `advertised`: a TLS proxy
    /// in front of it, since Tansu itself speaks plain TCP. The user is created on a first start
    /// without authentication (Tansu keeps users in its storage), which is then restarted.
    pub async fn start_secured(dir: &Path, user: &str, password: &str, advertised: &str) -> Self {
        let mut open = Self::start_durable(dir).await;
        crate::process::succeeded(
            std::process::Command::new(binary())
                .args(["user", "create", "--mechanism", "scram512", "--broker"])
                .arg(format!("tcp://{}", open.bootstrap))
                .args([user, password]),
            "tansu user create",
        );
        open.stop().await;
        Self::launch(Launch {
            advertised: Some(advertised.to_owned()),
            authentication: true,
            ..open.launch.clone()
        })
        .await
    }

    async fn wait_ready(&self) {
        let what = "tansu to accept connections";
        wait_for_port(what, &self.bootstrap, Duration::from_secs(20)).await;
    }

    /// Stops the broker with SIGTERM and starts it again on the same address and storage.
    pub async fn restart(&mut self) {
        self.process.terminate().await;
        self.process = spawn(&self.launch);
        self.wait_ready().await;
    }

    /// Starts the broker again on the same address and storage, after [`stop`](Self::stop) or
    /// [`kill`](Self::kill).
    pub async fn start_again(&mut self) {
        self.process = spawn(&self.launch);
        self.wait_ready().await;
    }

    /// What the broker has logged.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// Kills the broker (SIGKILL), as a crash would.
    pub async fn kill(&mut self) {
        self.process.kill().await;
    }

    /// Freezes the broker (SIGSTOP): it holds its connections and answers nothing.
    pub async fn freeze(&self) {
        self.process.signal("STOP").await;
    }

    /// Lets a frozen broker go on (SIGCONT).
    pub async fn thaw(&self) {
        self.process.signal("CONT").await;
    }

    /// Stops the broker with SIGTERM.
    pub async fn stop(&mut self) {
        self.process.terminate().await;
    }
}
