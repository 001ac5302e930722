//! The Candor adapter: what tool authors wrap their calls with.
//!
//! An [`Adapter`] runs a call to a tool or API, classifies what came back into exactly one of
//! four outcomes (Success, Empty, Partial, AccessFailure), owns the retry policy, and returns a
//! typed [`Envelope`](candor_schema::Envelope). For every AccessFailure attempt and every Partial
//! it records one `tool.outcome` span event, and it counts every call on `tool.outcomes`, through
//! the OpenTelemetry API (applications install the SDK; see the `otlp` feature).
//!
//! A retry never starts work twice: after an attempt that may have been applied (no answer
//! after the request was sent, or a failure status other than 408, 429 and 503), a call is sent
//! again only when it is safe to repeat: its [`AdapterBuilder::method`] is idempotent (`GET` by
//! default), the author declares it [`AdapterBuilder::idempotent`], or it carries an
//! [`AdapterBuilder::idempotency_key`] that every attempt sends. Otherwise it ends at once as a
//! not retryable AccessFailure that says so ([`NOT_SENT_AGAIN`]).
//!
//! ```
//! use std::time::Duration;
//! use candor_adapter::classify::http::{HttpClassifier, HttpResponse, NotFound};
//! use candor_adapter::{Adapter, RetryPolicy};
//! use candor_schema::OutcomeClass;
//! use http::{HeaderMap, StatusCode};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let search = Adapter::builder("search", "http://search.internal/v1/items?token=s3cret")
//!     .classifier(HttpClassifier::new(NotFound::Unreachable).items_at("/items").total_at("/total"))
//!     .retry(RetryPolicy::default())
//!     .attempt_timeout(Duration::from_secs(2))
//!     .deadline(Duration::from_secs(10))
//!     .build()
//!     .unwrap();
//! // The operation is any async call; here a canned response that declares 10 but returns 3.
//! let envelope = search
//!     .call(|_attempt| async {
//!         Ok(HttpResponse::new(StatusCode::OK, HeaderMap::new(), r#"{"items":[1,2,3],"total":10}"#))
//!     })
//!     .await;
//! assert_eq!(envelope.class(), OutcomeClass::Partial);
//! assert_eq!(envelope.target(), "http://search.internal/v1/items?token=REDACTED");
//! # });
//! ```

mod adapter;
pub mod classify;
pub mod clock;
pub mod follow;
#[cfg(feature = "http-client")]
pub mod http_client;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod retry;
#[cfg(feature = "sdk")]
mod sampling;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

pub use adapter::{
    ADAPTER_VERSION, Adapter, AdapterBuilder, AttemptContext, BuildError, IdempotencyKey,
    NOT_SENT_AGAIN, NoClassifier,
};
pub use classify::http::{HttpClassifier, NotFound};
pub use classify::{Classification, Classify, FnClassifier};
pub use retry::{Decision, Jitter, RetryPolicy};
#[cfg(feature = "sdk")]
pub use sampling::KeepToolFailures;
