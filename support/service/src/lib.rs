//! What every Candor service repeats, written once: the collector's `ingest` and `compact` roles
//! and the dashboards take their plumbing from here, so that it cannot drift between them.
//!
//! - [`shutdown_signal`]: a future that resolves on Ctrl-C or SIGTERM, and logs when SIGTERM
//!   cannot be listened for.
//! - [`init_logs`]: `tracing` to stderr as text or JSON lines ([`LogFormat`], a `--log-format`
//!   value), filtered by `RUST_LOG` or else [`DEFAULT_LOG_FILTER`].
//! - [`config`]: the configuration files' error type, value rules and loader, so that a key is
//!   refused with the same words by every service.
//! - [`ops::router`]: the operational endpoints, with the same answers in every service:
//!
//! | path | answer |
//! |---|---|
//! | `/metrics` | 200, the exposition text the service renders, as [`ops::METRICS_CONTENT_TYPE`] |
//! | `/healthz` | 200 `ok` (the process answers) |
//! | `/readyz` | 200 `ready`, or 503 `not ready: <reason>` ([`ops::Readiness`]) |
//!
//! Each body ends with a newline; `/healthz` and `/readyz` are `text/plain; charset=utf-8`.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use candor_service::ops::{self, Readiness};
//!
//! let ready = Arc::new(AtomicBool::new(false));
//! let router: axum::Router = ops::router(
//!     || "# TYPE up gauge\nup 1\n".to_owned(),
//!     {
//!         let ready = Arc::clone(&ready);
//!         move || Readiness::of_flag(&ready, "kafka unreachable")
//!     },
//! );
//! // The service sets the flag when it can do its work; `/readyz` then answers 200.
//! ready.store(true, Ordering::Relaxed);
//! # drop(router);
//! ```
//!
//! Serving the router (alone on a metrics port, or merged into a service's own router) and
//! stopping it on [`shutdown_signal`] is the service's.

pub mod config;
mod logs;
pub mod metrics;
pub mod ops;
mod signal;

pub use logs::{DEFAULT_LOG_FILTER, LogFormat, LogsError, init_logs};
pub use signal::shutdown_signal;

#[cfg(test)]
mod tests;
