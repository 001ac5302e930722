//! End-to-end: real Tansu broker, real collector and compactor processes, real OTLP clients,
//! records read back from Kafka and from the Delta tables by an independent reader.

#![allow(clippy::unwrap_used)] // a panic is the test's failure report

mod adapters;
mod alertmanager;
mod compact;
mod dashboards;
mod derived;
mod evolution;
mod faults;
mod first_hop;
mod foreign_clients;
mod ingest;
mod kafka_security;
mod moment;
mod monitor_history;
mod monitor_restart;
mod operations;
mod query;
mod reconcile;
mod s3;
mod secrets;
mod spool;
mod stack;
mod stages;
mod traffic;
mod web_access;
