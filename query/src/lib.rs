//! The read path of Candor: SQL and ready-made answers over the Delta tables the compactor writes,
//! plus the Kafka tail it has not written yet, each answer stating its own coverage.
//!
//! - [`reader`] opens the tables read-only ([`store`]) and reads the tail ([`tail`]) into one
//!   DataFusion session, with a report for every source.
//! - [`commands`] asks the questions: `sql`, `rates`, `spikes`, `incident`, `trace`,
//!   `reconcile`, `operations`.
//! - [`rates`] turns counter points into per-bucket increases and rates (pure).
//! - [`reconcile`] checks the adapter's two records of failed calls against each other (pure).
//! - [`coverage`] decides what an answer may claim: success, empty, partial or access failure,
//!   the four classes of the contract (pure).
//! - [`answer`] shows it: a table, CSV, or the contract's envelope as JSON.
//! - [`kafka_client`] loads the TLS / SASL settings of the Kafka consumers.
//! - [`window`] parses `--since` / `--until` (pure).
//!
//! An answer that could not look everywhere says so: "no failures" is only ever printed for a
//! window every source covered.

pub mod answer;
pub mod commands;
pub mod coverage;
pub mod files;
pub mod kafka_client;
pub mod rates;
pub mod reader;
pub mod reconcile;
pub mod store;
pub mod tail;
pub mod window;

/// The process exit code of an answer's class: 0 success, 1 empty, 3 partial, 4 access failure
/// (2 is a usage error).
pub fn exit_code(class: candor_schema::OutcomeClass) -> u8 {
    match class {
        candor_schema::OutcomeClass::Success => 0,
        candor_schema::OutcomeClass::Empty => 1,
        candor_schema::OutcomeClass::Partial => 3,
        candor_schema::OutcomeClass::AccessFailure => 4,
    }
}
