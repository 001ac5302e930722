//! Why input was refused: one closed set of reasons, written by name and read by name.
//!
//! Two parts of the pipeline refuse input, and both store their refusals in the `rejected`
//! table, whose `reason` column holds a [`RejectReason`]'s name ([`RejectReason::as_str`]):
//! - the collector refuses OTLP input (an event, a data point, a whole request) and sends a
//!   `Rejected` record to `candor.rejected.v1`, which the compactor stores as it is;
//! - the compactor refuses a Kafka record it cannot decode or that does not meet the contract
//!   (a reader does not trust that the writer validated), and stores it as a `rejected` row
//!   itself (module `rows`, feature `rows`).
//!
//! [`RejectedSource`] names the two, and [`RejectReason::written_by`] says which of them writes
//! a reason; some (`unknown_class`, `unknown_kind`, `unknown_action`, `missing_attribute`) are
//! written by both, for the same fault found on either side.
//!
//! The names are stored data (the Kafka records' keys, the table's column, the collector's
//! `reason` metric label and its OTLP `partial_success` messages): a name never changes and is
//! never reused. Where the two sides came to name similar faults differently
//! (`out_of_range` and `value_out_of_range`, `unspecified_temporality` and
//! `unknown_temporality`), both reasons are kept, each with its own meaning below.
//!
//! ```
//! use candor_records::rejection::{RejectReason, RejectedSource};
//!
//! let reason = RejectReason::from_name("unknown_source");
//! assert_eq!(reason, Some(RejectReason::UnknownSource));
//! assert_eq!(reason.map(RejectReason::as_str), Some("unknown_source"));
//! assert!(RejectReason::UnknownSource.is_written_by(RejectedSource::Compactor));
//! assert!(!RejectReason::UnknownSource.is_written_by(RejectedSource::Collector));
//! assert_eq!(RejectReason::from_name("maybe"), None);
//! ```

use std::fmt;

/// Who refused a row of the `rejected` table (its `source` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectedSource {
    /// The collector refused OTLP input (from `candor.rejected.v1`).
    Collector,
    /// The compactor could not decode or store a Kafka record.
    Compactor,
}

impl RejectedSource {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Collector => "collector",
            Self::Compactor => "compactor",
        }
    }
}

impl fmt::Display for RejectedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A refusal before it is tied to its input: why, and what exactly (e.g.
/// `tool.outcome.class = "maybe"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub reason: RejectReason,
    /// What exactly.
    pub detail: String,
}

/// A [`Refusal`] for `reason`, saying `detail`.
pub fn refuse(reason: RejectReason, detail: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        detail: detail.into(),
    }
}

// Declares `RejectReason`: each reason with its documentation, its stored name and who writes
// it.
macro_rules! reasons {
    ($(
        $(#[$doc:meta])*
        $variant:ident => $name:literal, by [$($by:ident),+ $(,)?];
    )+) => {
        /// Why an event, a data point, a request or a Kafka record was refused: a closed set,
        /// stored by name ([`RejectReason::as_str`]) and read by name
        /// ([`RejectReason::from_name`]).
        ///
        /// The collector's reasons come first, in the order they have always had, then those
        /// only the compactor writes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum RejectReason {
            $($(#[$doc])* $variant),+
        }

        impl RejectReason {
            /// Every reason, whoever writes it ([`RejectReason::all_written_by`] for one side's).
            pub const ALL: &'static [RejectReason] = &[$(RejectReason::$variant),+];

            /// The reason as it appears in metrics, responses, the rejected topic and the
            /// `rejected` table.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(RejectReason::$variant => $name),+
                }
            }

            /// The reason stored as `name`, or `None` for a name that is no reason.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(RejectReason::$variant),)+
                    _ => None,
                }
            }

            /// Who writes this reason: the collector, the compactor, or both.
            pub const fn written_by(self) -> &'static [RejectedSource] {
                match self {
                    $(RejectReason::$variant => &[$(RejectedSource::$by),+]),+
                }
            }
        }
    };
}

reasons! {
    /// A required attribute is absent.
    ///
    /// The compactor writes it too, for an operation event whose `resource_version` is set
    /// without its `resource_id`.
    MissingAttribute => "missing_attribute", by [Collector, Compactor];
    /// An attribute has the wrong type (e.g. a string where an int belongs).
    WrongType => "wrong_type", by [Collector];
    /// A known attribute appears twice.
    DuplicateAttribute => "duplicate_attribute", by [Collector];
    /// `tool.outcome.class` is not a member of the contract's closed set.
    ///
    /// The compactor writes it too, for an event whose class is not a member, a count whose
    /// class its source does not count, or a derived event that is not an `access_failure`.
    UnknownClass => "unknown_class", by [Collector, Compactor];
    /// A `tool.outcome` event whose class is `success` or `empty`.
    ClassNotAllowed => "class_not_allowed", by [Collector];
    /// `tool.failure.kind` is not a member of the closed set.
    ///
    /// The compactor writes it too, for a failure kind, an evidence kind or an operation's
    /// lifecycle state that is not a member of its closed set.
    UnknownKind => "unknown_kind", by [Collector, Compactor];
    /// `tool.retry.action` is not a member of the closed set.
    ///
    /// The compactor writes it too, for an event's retry action that is not a member (a
    /// derived event's may only be empty).
    UnknownAction => "unknown_action", by [Collector, Compactor];
    /// The kind or the action does not belong with the class (e.g. a Partial that was retried).
    Inconsistent => "inconsistent", by [Collector];
    /// An integer attribute is out of its range (a negative count, attempt 0).
    ///
    /// The compactor's counterpart, a stored number past what its column holds, is
    /// [`RejectReason::ValueOutOfRange`]: both names are stored data, so both are kept.
    OutOfRange => "out_of_range", by [Collector];
    /// An attribute value is longer than `max_value_bytes`.
    ValueTooLong => "value_too_long", by [Collector];
    /// More attributes than `max_attributes_per_event`.
    TooManyAttributes => "too_many_attributes", by [Collector];
    /// More `tool.outcome` events in one request than `max_events_per_request`.
    TooManyEvents => "too_many_events", by [Collector];
    /// The span's trace id is not 16 bytes, or is all zero.
    InvalidTraceId => "invalid_trace_id", by [Collector];
    /// The span's span id is not 8 bytes, or is all zero.
    InvalidSpanId => "invalid_span_id", by [Collector];
    /// The event or data point has no time.
    MissingTime => "missing_time", by [Collector];
    /// `tool.outcomes` is not a monotonic sum.
    WrongMetricType => "wrong_metric_type", by [Collector];
    /// A `tool.outcomes` sum without delta or cumulative temporality.
    ///
    /// The compactor's counterpart, a count record whose temporality is no known value, is
    /// [`RejectReason::UnknownTemporality`]: both names are stored data, so both are kept.
    UnspecifiedTemporality => "unspecified_temporality", by [Collector];
    /// The whole request could not be decoded.
    MalformedRequest => "malformed_request", by [Collector];
    /// A Kafka record without a value. Written by the compactor.
    NoPayload => "no_payload", by [Compactor];
    /// A Kafka record's value is not a protobuf record of its topic (or one of its texts is
    /// not UTF-8). Written by the compactor.
    Undecodable => "undecodable", by [Compactor];
    /// A record's `schema_version` is not the one this build reads. Written by the compactor.
    UnknownSchemaVersion => "unknown_schema_version", by [Compactor];
    /// A number of a record is past what its column holds: an unsigned count past `i64::MAX`,
    /// or an `http_status_code` past `i32::MAX`. Written by the compactor.
    ///
    /// Not the collector's [`RejectReason::OutOfRange`] (an attribute outside the contract's
    /// range): both names are stored data, so both are kept.
    ValueOutOfRange => "value_out_of_range", by [Compactor];
    /// A count record's temporality is no known value. Written by the compactor.
    ///
    /// Not the collector's [`RejectReason::UnspecifiedTemporality`] (an OTLP sum without delta
    /// or cumulative temporality): both names are stored data, so both are kept.
    UnknownTemporality => "unknown_temporality", by [Compactor];
    /// A record's id (`event_id`, `point_id` or `operation_id`) is empty. Written by the
    /// compactor.
    MissingId => "missing_id", by [Compactor];
    /// A record's `source` is not one of the outcome sources (`adapter`, `genai`, `mcp`,
    /// `http`). Written by the compactor.
    UnknownSource => "unknown_source", by [Compactor];
}

impl RejectReason {
    /// Whether `source` writes this reason.
    pub fn is_written_by(self, source: RejectedSource) -> bool {
        self.written_by().contains(&source)
    }

    /// The reasons `source` writes, in [`RejectReason::ALL`]'s order.
    pub fn all_written_by(source: RejectedSource) -> impl Iterator<Item = RejectReason> {
        Self::ALL
            .iter()
            .copied()
            .filter(move |reason| reason.is_written_by(source))
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_reason_is_read_back_by_its_name_and_names_are_unique() {
        let mut names = BTreeSet::new();
        for &reason in RejectReason::ALL {
            assert_eq!(
                RejectReason::from_name(reason.as_str()),
                Some(reason),
                "{reason:?}"
            );
            assert_eq!(reason.to_string(), reason.as_str());
            assert!(names.insert(reason.as_str()), "{reason} twice");
        }
        assert_eq!(names.len(), RejectReason::ALL.len());
    }

    #[test]
    fn a_name_that_is_no_reason_is_refused() {
        for name in [
            "",
            "maybe",
            "Unknown_Class",
            "unknown_class ",
            "MissingAttribute",
            "collector",
        ] {
            assert_eq!(RejectReason::from_name(name), None, "{name:?}");
        }
    }

    /// The names stored before the two sides shared this type, each with who wrote it: none
    /// may change.
    #[test]
    fn the_stored_names_are_those_written_before() {
        use RejectedSource::{Collector, Compactor};
        const BOTH: &[RejectedSource] = &[Collector, Compactor];
        const COLLECTOR: &[RejectedSource] = &[Collector];
        const COMPACTOR: &[RejectedSource] = &[Compactor];
        let stored: &[(&str, &[RejectedSource])] = &[
            ("missing_attribute", BOTH),
            ("wrong_type", COLLECTOR),
            ("duplicate_attribute", COLLECTOR),
            ("unknown_class", BOTH),
            ("class_not_allowed", COLLECTOR),
            ("unknown_kind", BOTH),
            ("unknown_action", BOTH),
            ("inconsistent", COLLECTOR),
            ("out_of_range", COLLECTOR),
            ("value_too_long", COLLECTOR),
            ("too_many_attributes", COLLECTOR),
            ("too_many_events", COLLECTOR),
            ("invalid_trace_id", COLLECTOR),
            ("invalid_span_id", COLLECTOR),
            ("missing_time", COLLECTOR),
            ("wrong_metric_type", COLLECTOR),
            ("unspecified_temporality", COLLECTOR),
            ("malformed_request", COLLECTOR),
            ("no_payload", COMPACTOR),
            ("undecodable", COMPACTOR),
            ("unknown_schema_version", COMPACTOR),
            ("value_out_of_range", COMPACTOR),
            ("unknown_temporality", COMPACTOR),
            ("missing_id", COMPACTOR),
            ("unknown_source", COMPACTOR),
        ];
        let names: Vec<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
        let expected: Vec<&str> = stored.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, expected);
        for (name, by) in stored {
            let reason = RejectReason::from_name(name).expect("a reason");
            assert_eq!(reason.written_by(), *by, "{name}");
        }
    }

    #[test]
    fn each_side_writes_its_own_reasons() {
        let collector: Vec<RejectReason> =
            RejectReason::all_written_by(RejectedSource::Collector).collect();
        let compactor: Vec<RejectReason> =
            RejectReason::all_written_by(RejectedSource::Compactor).collect();
        assert_eq!(collector.len(), 18);
        assert_eq!(compactor.len(), 11);
        assert!(collector.contains(&RejectReason::MalformedRequest));
        assert!(!collector.contains(&RejectReason::Undecodable));
        assert!(compactor.contains(&RejectReason::Undecodable));
        assert!(!compactor.contains(&RejectReason::MalformedRequest));
        for &reason in RejectReason::ALL {
            assert!(
                !reason.written_by().is_empty(),
                "{reason}: written by nobody"
            );
            assert_eq!(
                collector.contains(&reason),
                reason.is_written_by(RejectedSource::Collector)
            );
        }
    }

    #[test]
    fn sources_have_their_stored_spelling() {
        assert_eq!(RejectedSource::Collector.to_string(), "collector");
        assert_eq!(RejectedSource::Compactor.as_str(), "compactor");
    }
}
