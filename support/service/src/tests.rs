use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use clap::ValueEnum as _;
use tower::ServiceExt as _;

use super::ops::{self, METRICS_CONTENT_TYPE, Readiness};
use super::*;

/// Status, content type and body of `GET path`.
async fn get(router: &axum::Router, path: &str) -> (StatusCode, String, String) {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

fn flagged() -> (Arc<AtomicBool>, axum::Router) {
    let ready = Arc::new(AtomicBool::new(false));
    let router = ops::router(|| "up 1\n".to_owned(), {
        let ready = Arc::clone(&ready);
        move || Readiness::of_flag(&ready, "kafka unreachable")
    });
    (ready, router)
}

#[tokio::test]
async fn the_endpoints_answer_as_documented() {
    let (ready, router) = flagged();
    assert_eq!(
        get(&router, "/metrics").await,
        (
            StatusCode::OK,
            METRICS_CONTENT_TYPE.to_owned(),
            "up 1\n".to_owned()
        )
    );
    let text = "text/plain; charset=utf-8".to_owned();
    assert_eq!(
        get(&router, "/healthz").await,
        (StatusCode::OK, text.clone(), "ok\n".to_owned())
    );
    assert_eq!(
        get(&router, "/readyz").await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            text.clone(),
            "not ready: kafka unreachable\n".to_owned()
        )
    );
    ready.store(true, Ordering::Relaxed);
    assert_eq!(
        get(&router, "/readyz").await,
        (StatusCode::OK, text, "ready\n".to_owned())
    );
    assert_eq!(get(&router, "/other").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn readiness_is_asked_on_every_request_with_its_own_reason() {
    let router = ops::router(String::new, || {
        Readiness::NotReady(format!("{} partitions lagging", 3).into())
    });
    let (status, _, body) = get(&router, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "not ready: 3 partitions lagging\n");
}

#[tokio::test]
async fn the_routes_merge_into_a_service_router() {
    let (_, probes) = flagged();
    let router = axum::Router::new()
        .route("/", axum::routing::get(|| async { "page" }))
        .merge(probes);
    assert_eq!(get(&router, "/").await.2, "page");
    assert_eq!(get(&router, "/healthz").await.2, "ok\n");
}

#[test]
fn the_default_filter_is_valid() {
    assert!(tracing_subscriber::EnvFilter::try_new(DEFAULT_LOG_FILTER).is_ok());
    assert!(!DEFAULT_LOG_FILTER.contains(char::is_whitespace));
}

#[test]
fn log_formats_are_the_flag_values() {
    assert_eq!(LogFormat::from_str("text", false), Ok(LogFormat::Text));
    assert_eq!(LogFormat::from_str("json", false), Ok(LogFormat::Json));
    assert!(LogFormat::from_str("yaml", false).is_err());
    assert_eq!(LogFormat::default(), LogFormat::Text);
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_resolves_the_shutdown_signal() {
    // Listening starts at the call, so the signal sent right after is not lost (and does not
    // end the test process).
    let stop = shutdown_signal();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .is_ok(),
        "SIGTERM did not resolve the shutdown signal"
    );
}
