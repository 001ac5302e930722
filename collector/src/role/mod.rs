//! The binary's four roles, each with the same anatomy:
//!
//! | step | what it does | effects |
//! |---|---|---|
//! | `…Args` | the subcommand's flags and variables (clap) | none |
//! | `validate` | the configuration file, the flags over it → the validated configuration | reads the file |
//! | `build` | what a start does before serving: secrets, clients, listeners | I/O |
//! | `run` | serve until the shutdown signal, then drain | process |
//!
//! Each role's `main` chains them; `--check` stops after `validate` (plus the checks a start
//! would make without connecting anywhere) and exits 0 or 2 through `candor_service::config::report_check`.
//!
//! These modules only wire the library (`candor_collector::{ingest, compact, sink}`) into a
//! process, so they belong to the binary: clap and anyhow stay out of the library, whose errors
//! are `thiserror` enums.

use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub mod compact;
pub mod ingest;
pub mod maintain;
pub mod read;

/// Whether the tables could be opened under `root`, without opening or creating them: an object
/// store URL needs a store this build knows; a local directory need not exist yet.
pub fn check_table_root(root: &str) -> anyhow::Result<()> {
    let url = match url::Url::parse(root) {
        Ok(url) if url.scheme() != "file" && url.scheme().len() > 1 => url,
        // A path (a one-letter "scheme" is a Windows drive).
        _ => return Ok(()),
    };
    candor_records::stores::register();
    deltalake::DeltaTableBuilder::from_url(url)
        .and_then(deltalake::DeltaTableBuilder::build)
        .with_context(|| format!("table_root {root}: no object store for it in this build"))?;
    Ok(())
}

/// A process's id when the configuration names none: host name and process id.
pub fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    format!("{}-{}", host.trim(), std::process::id())
}

/// The multi-threaded runtime a role runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

/// Listens on `addr`, the value of the configuration key `key`.
pub async fn bind(addr: SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({key}); is the port taken?"))
}

/// Resolves once `stopped` says stop.
pub async fn wait(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}
