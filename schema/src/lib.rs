//! The Candor outcome contract.
//!
//! A tool call ends in exactly one of four classes — [`OutcomeClass::Success`],
//! [`OutcomeClass::Empty`], [`OutcomeClass::Partial`] or [`OutcomeClass::AccessFailure`] — and
//! this crate holds everything that adapters, the collector and readers must agree on:
//! the closed vocabularies ([`vocab`]), the result [`Envelope`], the wire names of the span
//! event, counter and Kafka topics ([`names`]) with their types and requirement levels
//! ([`registry`], rendered as `spec/v1/registry.md`), credential redaction ([`redact`]), the
//! MCP rendering ([`mcp`]) and the one grammar of a duration ([`duration`]). It does no I/O.
//! The pipeline's Kafka records and table rows, which follow from this contract, are the
//! `candor-records` crate.
//!
//! ```
//! use std::{sync::Arc, time::SystemTime};
//! use candor_schema::*;
//!
//! let now = Timestamp::new(SystemTime::now());
//! let envelope: Envelope<serde_json::Value> = Envelope::new(EnvelopeParts {
//!     tool: Arc::from("search"),
//!     target: Arc::from("https://search.example/v1"),
//!     outcome: Outcome::AccessFailure {
//!         failure: Failure {
//!             kind: AccessFailureKind::Timeout,
//!             retryable: true,
//!             message: "no response within 2s".into(),
//!             status: None,
//!             error_type: Some("timeout".into()),
//!             retry_after_ms: None,
//!         },
//!     },
//!     authority: None,
//!     provenance: Provenance {
//!         source_system: Arc::from("search.example"),
//!         actor: None,
//!         adapter: "candor-adapter/0.1.0".into(),
//!         started_at: now,
//!         finished_at: now,
//!     },
//!     evidence: None,
//!     attempts: vec![],
//!     lifecycle: None,
//! });
//! // A consumer branches on all four classes; there is no fifth.
//! let verdict = match envelope.class() {
//!     OutcomeClass::Success => "use it",
//!     OutcomeClass::Empty => "report a verified absence",
//!     OutcomeClass::Partial => "use what arrived, never as the whole",
//!     OutcomeClass::AccessFailure => "conclude nothing; retry or report upward",
//! };
//! assert_eq!(verdict, "conclude nothing; retry or report upward");
//! assert!(!envelope.summary().contains("no results"));
//! assert_eq!(envelope.next_actions(), [NextAction::Retry, NextAction::Escalate]);
//! ```

pub mod duration;
pub mod envelope;
pub mod mcp;
pub mod names;
pub mod redact;
pub mod registry;
pub mod time;
pub mod vocab;

pub use envelope::{
    Attempt, Authority, ENVELOPE_SCHEMA_VERSION, Envelope, EnvelopeParts, Evidence, Extent,
    Failure, InvalidEnvelope, Lifecycle, Operation, Outcome, Provenance, Resource, Truncation,
    legal_next_actions,
};
pub use time::Timestamp;
pub use vocab::{
    AccessFailureKind, EvidenceKind, FailureKind, LifecycleState, NextAction, OutcomeClass,
    PartialKind, RetryAction, UnknownValue, action_ends_call,
};

/// The `$id` of the committed envelope schema.
pub const ENVELOPE_SCHEMA_ID: &str = "https://candor.dev/schema/envelope.v1.schema.json";

/// The JSON Schema of [`Envelope`] with a JSON payload, as committed at
/// `spec/v1/envelope.v1.schema.json`.
///
/// schemars annotates an unsigned field with its Rust width as a `format` (`uint16`, ...),
/// which is no JSON Schema format: validators warn of it (Ajv, in every MCP TypeScript client
/// that reads the schema as a tool's `outputSchema`) and otherwise ignore it. The schema states
/// the width as validation instead: `minimum` 0 (which schemars writes) and, up to 32 bits, the
/// `maximum` the Rust type holds.
pub fn envelope_json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(Envelope<serde_json::Value>).to_value();
    widths_as_bounds(&mut schema);
    if let Some(object) = schema.as_object_mut() {
        object.insert("$id".into(), ENVELOPE_SCHEMA_ID.into());
    }
    schema
}

/// Replaces every `format` that names an unsigned Rust width with the bounds it implies.
fn widths_as_bounds(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(object) => {
            let maximum = match object.get("format").and_then(serde_json::Value::as_str) {
                Some("uint8") => Some(Some(u64::from(u8::MAX))),
                Some("uint16") => Some(Some(u64::from(u16::MAX))),
                Some("uint32") => Some(Some(u64::from(u32::MAX))),
                Some("uint64" | "uint") => Some(None),
                _ => None,
            };
            if let Some(maximum) = maximum {
                object.remove("format");
                object.insert("minimum".into(), 0.into());
                if let Some(maximum) = maximum {
                    object.insert("maximum".into(), maximum.into());
                }
            }
            object.values_mut().for_each(widths_as_bounds);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(widths_as_bounds),
        _ => {}
    }
}
