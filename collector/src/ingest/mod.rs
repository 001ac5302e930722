//! The ingest role: OTLP in, typed records to Kafka.
//!
//! [`decode`], [`extract`] and [`event`] are pure and always built; the receivers and the Kafka side need the
//! `service` feature.

#[cfg(feature = "service")]
pub mod auth;
pub mod decode;
pub mod event;
pub mod extract;
#[cfg(feature = "service")]
pub mod grpc;
#[cfg(feature = "service")]
pub mod http;
pub mod senders;
#[cfg(feature = "service")]
pub mod service;
