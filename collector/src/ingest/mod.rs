//! The ingest role: OTLP in, typed records to Kafka.

pub mod auth;
pub mod extract;
pub mod grpc;
pub mod http;
pub mod service;
