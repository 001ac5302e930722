//! The operational endpoints: `/metrics`, `/healthz` and `/readyz`.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The content type of `/metrics`: the Prometheus text exposition format, version 0.0.4.
pub use crate::metrics::CONTENT_TYPE as METRICS_CONTENT_TYPE;

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// 200 `ready`: the service can do its work.
    Ready,
    /// 503 `not ready: <reason>`.
    NotReady(Cow<'static, str>),
}

impl Readiness {
    /// [`Readiness::Ready`] when `flag` is set, else not ready for `reason`.
    #[must_use]
    pub fn of_flag(flag: &AtomicBool, reason: &'static str) -> Self {
        if flag.load(Ordering::Relaxed) {
            Self::Ready
        } else {
            Self::NotReady(Cow::Borrowed(reason))
        }
    }

    /// The status code and body `/readyz` answers.
    #[must_use]
    pub fn answer(&self) -> (StatusCode, Cow<'static, str>) {
        match self {
            Self::Ready => (StatusCode::OK, Cow::Borrowed("ready\n")),
            Self::NotReady(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Cow::Owned(format!("not ready: {reason}\n")),
            ),
        }
    }
}

/// What the endpoints ask the service.
struct Probes {
    metrics: Box<dyn Fn() -> String + Send + Sync>,
    readiness: Box<dyn Fn() -> Readiness + Send + Sync>,
}

/// The routes `/metrics` (the text `metrics` renders), `/healthz` and `/readyz` (what
/// `readiness` says, asked on every request). Merge it into a service's router, or serve it
/// alone on a metrics port.
pub fn router<M, R>(metrics: M, readiness: R) -> Router
where
    M: Fn() -> String + Send + Sync + 'static,
    R: Fn() -> Readiness + Send + Sync + 'static,
{
    let probes = Arc::new(Probes {
        metrics: Box::new(metrics),
        readiness: Box::new(readiness),
    });
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(probes)
}

async fn render_metrics(State(probes): State<Arc<Probes>>) -> Response {
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        (probes.metrics)(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(probes): State<Arc<Probes>>) -> Response {
    let (status, body) = (probes.readiness)().answer();
    (status, body).into_response()
}
