//! The Tansu broker (a Kafka API broker) on a free loopback port.

use std::path::PathBuf;
use std::time::Duration;

use crate::process::Running;
use crate::{free_port, wait_for};

/// A running broker.
pub struct Tansu {
    /// `127.0.0.1:port`.
    pub bootstrap: String,
    storage: String,
    dir: Option<std::path::PathBuf>,
    process: Running,
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

fn spawn(bootstrap: &str, storage: &str, dir: Option<&std::path::Path>) -> Running {
    let url = format!("tcp://{bootstrap}");
    Running::spawn_in(
        dir,
        "tansu",
        &binary(),
        &[
            "broker".into(),
            "--listener-url".into(),
            url.clone(),
            "--advertised-listener-url".into(),
            url,
            "--storage-engine".into(),
            storage.to_owned(),
        ],
        &[],
    )
}

impl Tansu {
    /// Starts a broker with the in-memory storage engine and waits until it accepts connections.
    pub async fn start() -> Self {
        Self::start_with("memory://tansu/".into(), None).await
    }

    /// Starts a broker whose data survives a restart: SQLite in `dir` (Tansu reads the path of a
    /// `sqlite://` URL relative to its working directory).
    pub async fn start_durable(dir: &std::path::Path) -> Self {
        Self::start_with("sqlite://tansu.db".into(), Some(dir.to_path_buf())).await
    }

    async fn start_with(storage: String, dir: Option<std::path::PathBuf>) -> Self {
        let bootstrap = format!("127.0.0.1:{}", free_port());
        let process = spawn(&bootstrap, &storage, dir.as_deref());
        let tansu = Self {
            bootstrap,
            storage,
            dir,
            process,
        };
        tansu.wait_ready().await;
        tansu
    }

    async fn wait_ready(&self) {
        let address = self.bootstrap.clone();
        wait_for(
            "tansu to accept connections",
            Duration::from_secs(20),
            || {
                let address = address.clone();
                async move {
                    tokio::net::TcpStream::connect(&address)
                        .await
                        .ok()
                        .map(|_| ())
                }
            },
        )
        .await;
    }

    /// Stops the broker with SIGTERM and starts it again on the same address and storage.
    pub async fn restart(&mut self) {
        self.process.terminate().await;
        self.process = spawn(&self.bootstrap, &self.storage, self.dir.as_deref());
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

    /// Stops the broker with SIGTERM.
    pub async fn stop(&mut self) {
        self.process.terminate().await;
    }
}
