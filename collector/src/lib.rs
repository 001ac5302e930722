//! Candor's collector: receives OTLP from adapters, validates the `tool.outcome` span events and
//! `tool.outcomes` counter points against the contract, and produces typed records to Kafka.
//!
//! It also writes those records into Delta Lake tables ([`compact`]).
//!
//! The binary `candor-collector` runs the `ingest` role (see `deploy/collector.example.toml`) and
//! the `compact` role (see `deploy/compactor.example.toml`).
//!
//! All but the decoding of OTLP input is behind the default feature `service`. Without it the
//! library holds only [`ingest::decode`] and [`ingest::extract`] (pure), and none of the service's
//! dependencies (Kafka, Delta Lake, the HTTP and gRPC servers); the fuzz targets in
//! `collector/fuzz/` build it that way.

#[cfg(feature = "service")]
pub mod compact;
#[cfg(feature = "service")]
pub mod error;
pub mod ingest;
#[cfg(feature = "service")]
pub mod inspect;
#[cfg(feature = "service")]
pub mod sink;
