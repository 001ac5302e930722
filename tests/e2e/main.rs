//! End-to-end: real Tansu broker, real collector process, real OTLP clients, records read back
//! from Kafka.

#![allow(clippy::unwrap_used)] // a panic is the test's failure report

mod faults;
mod foreign_clients;
mod ingest;
