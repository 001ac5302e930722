//! The ingest role: OTLP in, typed records to Kafka.
//!
//! [`decode`], [`extract`] and [`event`] are pure and always built; the role's configuration,
//! its metrics and the receivers need the `service` feature (the Kafka side with its spool is
//! [`crate::sink`]).

#[cfg(feature = "service")]
pub mod auth;
#[cfg(feature = "service")]
pub mod config;
pub mod decode;
pub mod event;
#[cfg(feature = "service")]
pub mod export;
pub mod extract;
#[cfg(feature = "service")]
pub mod grpc;
#[cfg(feature = "service")]
pub mod http;
#[cfg(feature = "service")]
pub mod metrics;
pub mod senders;
#[cfg(feature = "service")]
pub mod service;
