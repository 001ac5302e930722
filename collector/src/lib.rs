//! Candor's collector: receives OTLP from adapters, validates the `tool.outcome` span events and
//! `tool.outcomes` counter points against the contract, and produces typed records to Kafka.
//!
//! It also writes those records into Delta Lake tables ([`compact`]).
//!
//! The binary `candor-collector` runs the `ingest` role (see `deploy/collector.example.toml`) and
//! the `compact` role (see `deploy/compactor.example.toml`).

pub mod compact;
pub mod config;
pub mod error;
pub mod ingest;
pub mod inspect;
pub mod metrics;
pub mod sink;
