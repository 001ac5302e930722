//! The Tansu broker (a Kafka API broker) on a free loopback port.

use std::path::PathBuf;
use std::time::Duration;

use crate::process::Running;
use crate::{free_port, wait_for};

/// A running broker.
pub struct Tansu {
    /// `127.0.0.1:port`.
    pub bootstrap: String,
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

impl Tansu {
    /// Starts a broker with the in-memory storage engine and waits until it accepts connections.
    pub async fn start() -> Self {
        let port = free_port();
        let bootstrap = format!("127.0.0.1:{port}");
        let url = format!("tcp://{bootstrap}");
        let process = Running::spawn(
            "tansu",
            &binary(),
            &[
                "broker".into(),
                "--listener-url".into(),
                url.clone(),
                "--advertised-listener-url".into(),
                url,
                "--storage-engine".into(),
                "memory://tansu/".into(),
            ],
            &[],
        );
        let tansu = Self { bootstrap, process };
        let address = tansu.bootstrap.clone();
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
        tansu
    }

    /// What the broker has logged.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// Stops the broker.
    pub async fn stop(&mut self) {
        self.process.kill().await;
    }
}
