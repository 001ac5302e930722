//! The Delta Lake tables of the pipeline: one per Kafka topic, typed columns, partitioned by date.
//!
//! The compactor writes with these schemas and the query side reads with them. The columns of
//! `outcome_events`, `outcome_counts` and `heartbeats` are those of their records' declarations
//! ([`crate::proto`]), followed by the Kafka columns every table has; `rejected` holds both the
//! collector's and the compactor's refusals and is declared here. Column names are the
//! constants of [`column`](mod@column).
//!
//! - Times are UTC timestamps in microseconds (the records carry nanoseconds; Delta Lake's
//!   `timestamp` type holds microseconds, so the last three digits are cut).
//! - Trace and span ids are lower-case hex strings, as in the records.
//! - Closed vocabularies (class, kind, action, temporality) are strings. The writer stores them
//!   dictionary-encoded in Parquet ([`Table::plain_columns`] and [`Table::delta_columns`] list
//!   the few columns that are not).
//! - Unsigned counts of the records become signed 64-bit columns, since Delta Lake has no unsigned
//!   type; a value past `i64::MAX` is not stored as a wrong number, the record is rejected.
//! - Every row carries the Kafka partition and offset it came from and the record's schema version.
//!
//! ```
//! use candor_schema::names::topic;
//! use candor_records::tables::{column, Table};
//! let events = Table::OutcomeEvents.schema();
//! assert!(events.field_with_name(column::EVENT_ID).is_ok());
//! assert_eq!(Table::from_topic(topic::OUTCOME_EVENTS), Some(Table::OutcomeEvents));
//! assert_eq!(Table::OutcomeEvents.partition_column(), column::DATE);
//! ```

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::proto::{CountColumns, EventColumns, HeartbeatColumns, OperationColumns};
use candor_schema::names;

/// Who refused a row of the `rejected` table, declared with the reasons each side writes.
pub use crate::rejection::RejectedSource;

/// Column names of the tables.
pub mod column {
    /// The UTC date of the row's time column; the partition column of every table.
    pub const DATE: &str = "date";
    /// `schema_version` of the record the row came from.
    pub const SCHEMA_VERSION: &str = "schema_version";
    /// Kafka partition of the record.
    pub const KAFKA_PARTITION: &str = "kafka_partition";
    /// Kafka offset of the record.
    pub const KAFKA_OFFSET: &str = "kafka_offset";
    /// Kafka's timestamp of the record (when the collector produced it).
    pub const KAFKA_TIMESTAMP: &str = "kafka_timestamp";
    /// `on_time`, `late` or `future`: the row's time against its Kafka timestamp ([`super::Arrival`]).
    pub const ARRIVAL: &str = "arrival";
    /// When the collector received the data.
    pub const RECEIVED_TIME: &str = "received_time";
    /// The collector that received it.
    pub const COLLECTOR_ID: &str = "collector_id";
    /// Deterministic id of an outcome event (same for a client's retried export).
    pub const EVENT_ID: &str = "event_id";
    /// Trace id, hex.
    pub const TRACE_ID: &str = "trace_id";
    /// Span id, hex.
    pub const SPAN_ID: &str = "span_id";
    /// When the event happened.
    pub const EVENT_TIME: &str = "event_time";
    /// `service.name` of the sender.
    pub const SERVICE_NAME: &str = "service_name";
    /// `service.instance.id` of the sender.
    pub const SERVICE_INSTANCE_ID: &str = "service_instance_id";
    /// Outcome class, wire spelling.
    pub const OUTCOME_CLASS: &str = "outcome_class";
    /// Tool name.
    pub const TOOL_NAME: &str = "tool_name";
    /// Tool target (verbatim; a string, never a path).
    pub const TOOL_TARGET: &str = "tool_target";
    /// Failure kind, wire spelling.
    pub const FAILURE_KIND: &str = "failure_kind";
    /// Retry action, wire spelling.
    pub const RETRY_ACTION: &str = "retry_action";
    /// Attempt number, from 1.
    pub const RETRY_ATTEMPT: &str = "retry_attempt";
    /// Attempts the policy allows.
    pub const RETRY_MAX_ATTEMPTS: &str = "retry_max_attempts";
    /// Backoff before the next attempt, when one follows.
    pub const RETRY_BACKOFF_MS: &str = "retry_backoff_ms";
    /// HTTP status code, when there was a response.
    pub const HTTP_STATUS_CODE: &str = "http_status_code";
    /// `error.type`.
    pub const ERROR_TYPE: &str = "error_type";
    /// Items a Partial returned.
    pub const PARTIAL_RETURNED: &str = "partial_returned";
    /// Items a Partial should have returned, when known.
    pub const PARTIAL_EXPECTED: &str = "partial_expected";
    /// What a Partial covered.
    pub const COVERAGE: &str = "coverage";
    /// What a Partial dropped.
    pub const DROPPED: &str = "dropped";
    /// The authority the call acted under.
    pub const AUTHORITY: &str = "authority";
    /// Deterministic id of a counter point.
    pub const POINT_ID: &str = "point_id";
    /// Start of a counter point's interval.
    pub const START_TIME: &str = "start_time";
    /// Time of a counter point or a heartbeat.
    pub const TIME: &str = "time";
    /// Counter value, as sent.
    pub const VALUE: &str = "value";
    /// `delta`, `cumulative` or `unspecified`, as sent.
    pub const TEMPORALITY: &str = "temporality";
    /// In `rejected`, who refused the input: `collector` or `compactor`
    /// ([`super::RejectedSource`]). In `outcome_events` and `outcome_counts`, where the outcome
    /// came from ([`crate::proto::OutcomeSource`]); null in rows written before sources were told
    /// apart, all of which are an adapter's.
    pub const SOURCE: &str = "source";
    /// What the failure said, credentials removed ([`crate::proto::OutcomeEvent::error_message`]).
    pub const ERROR_MESSAGE: &str = "error_message";
    /// A derived call's `exception.type`.
    pub const EXCEPTION_TYPE: &str = "exception_type";
    /// A derived call's `rpc.response.status_code`, as sent.
    pub const RPC_STATUS_CODE: &str = "rpc_status_code";
    /// The GenAI tool call's id.
    pub const TOOL_CALL_ID: &str = "tool_call_id";
    /// The kind of the evidence of the outcome.
    pub const EVIDENCE_KIND: &str = "evidence_kind";
    /// The evidence of the outcome, e.g. a request id.
    pub const EVIDENCE_VALUE: &str = "evidence_value";
    /// The convention a derived call was recognised by.
    pub const CONVENTION: &str = "convention";
    /// What a derived count knows of its spans' sampling ([`crate::proto::Sampling`]).
    pub const SAMPLING: &str = "sampling";
    /// The resource an operation produced or changed.
    pub const RESOURCE_ID: &str = "resource_id";
    /// That resource's version, when its source said.
    pub const RESOURCE_VERSION: &str = "resource_version";
    /// The rejection reason.
    pub const REASON: &str = "reason";
    /// What exactly was wrong.
    pub const DETAIL: &str = "detail";
    /// `traces`, `metrics` or `logs` for the collector's rejections; empty for the compactor's.
    pub const SIGNAL: &str = "signal";
    /// A bounded copy of the refused input.
    pub const INPUT: &str = "input";
    /// Whether `input` was cut to its bound.
    pub const INPUT_TRUNCATED: &str = "input_truncated";
    /// How many events or points the rejection stands for.
    pub const COUNT: &str = "count";
    /// The Kafka topic the refused record was read from.
    pub const TOPIC: &str = "topic";
    /// When the heartbeat's collector started.
    pub const STARTED_TIME: &str = "started_time";
    /// The heartbeat interval.
    pub const INTERVAL_MS: &str = "interval_ms";
    /// A counter point's sender's export interval, 0 at its final export ([`candor_schema::names::EXPORT_INTERVAL_GAUGE`]).
    pub const EXPORT_INTERVAL_MS: &str = "export_interval_ms";
    /// Events accepted since the previous heartbeat.
    pub const ACCEPTED_EVENTS: &str = "accepted_events";
    /// Counter points accepted since the previous heartbeat.
    pub const ACCEPTED_COUNTS: &str = "accepted_counts";
    /// Events and points refused since the previous heartbeat.
    pub const REJECTED_RECORDS: &str = "rejected_records";
    /// On a sender's heartbeat, the spans, log records and metrics it sent in the interval.
    pub const SENDER_ITEMS: &str = "sender_items";
    /// An asynchronous operation's id.
    pub const OPERATION_ID: &str = "operation_id";
    /// An operation's state, wire spelling.
    pub const LIFECYCLE_STATE: &str = "lifecycle_state";
    /// Why a failed operation failed.
    pub const LIFECYCLE_REASON: &str = "lifecycle_reason";
    /// The system that runs the operation (`provenance.source_system`).
    pub const SOURCE_SYSTEM: &str = "source_system";
    /// Who made the call (`provenance.actor`).
    pub const ACTOR: &str = "actor";
    /// The adapter and its version (`provenance.adapter`).
    pub const ADAPTER: &str = "adapter";
}

/// One of the pipeline's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// `outcome_events`.
    OutcomeEvents,
    /// `outcome_counts`.
    OutcomeCounts,
    /// `rejected`.
    Rejected,
    /// `heartbeats`.
    Heartbeats,
    /// `operation_events`.
    OperationEvents,
}

/// The pipeline's topics, one per table, in the order of [`Table::ALL`].
pub const TOPICS: [&str; Table::ALL.len()] = {
    let mut topics = [""; Table::ALL.len()];
    let mut index = 0;
    while index < topics.len() {
        topics[index] = Table::ALL[index].topic();
        index += 1;
    }
    topics
};

impl Table {
    /// Every table. The collector's spool stores a record's topic as its index in this order
    /// ([`TOPICS`]): a new table is appended, never inserted.
    pub const ALL: [Table; 5] = [
        Table::OutcomeEvents,
        Table::OutcomeCounts,
        Table::Rejected,
        Table::Heartbeats,
        Table::OperationEvents,
    ];

    /// The table's name, which is also its directory under the table root.
    pub fn name(self) -> &'static str {
        match self {
            Self::OutcomeEvents => names::table::OUTCOME_EVENTS,
            Self::OutcomeCounts => names::table::OUTCOME_COUNTS,
            Self::Rejected => names::table::REJECTED,
            Self::Heartbeats => names::table::HEARTBEATS,
            Self::OperationEvents => names::table::OPERATION_EVENTS,
        }
    }

    /// The Kafka topic the table is written from.
    pub const fn topic(self) -> &'static str {
        match self {
            Self::OutcomeEvents => names::topic::OUTCOME_EVENTS,
            Self::OutcomeCounts => names::topic::OUTCOME_COUNTS,
            Self::Rejected => names::topic::REJECTED,
            Self::Heartbeats => names::topic::HEARTBEATS,
            Self::OperationEvents => names::topic::OPERATION_EVENTS,
        }
    }

    /// The table written from `topic`, if it is one of the pipeline's.
    ///
    /// [`TOPICS`] lists them all.
    pub fn from_topic(topic: &str) -> Option<Table> {
        Self::ALL.into_iter().find(|table| table.topic() == topic)
    }

    /// The table called `name`.
    pub fn from_name(name: &str) -> Option<Table> {
        Self::ALL.into_iter().find(|table| table.name() == name)
    }

    /// The partition column (the UTC date of [`Table::time_column`]).
    pub fn partition_column(self) -> &'static str {
        column::DATE
    }

    /// The time a row is about: its date partition and the table's watermark come from it.
    pub fn time_column(self) -> &'static str {
        match self {
            Self::OutcomeEvents | Self::OperationEvents => column::EVENT_TIME,
            Self::OutcomeCounts | Self::Heartbeats => column::TIME,
            Self::Rejected => column::RECEIVED_TIME,
        }
    }

    /// Rows are sorted by these columns within a file.
    pub fn sort_columns(self) -> &'static [&'static str] {
        match self {
            Self::OutcomeEvents => &[column::TOOL_TARGET, column::EVENT_TIME],
            Self::OutcomeCounts => &[column::TOOL_TARGET, column::TIME],
            Self::Rejected => &[column::REASON, column::RECEIVED_TIME],
            Self::Heartbeats => &[column::COLLECTOR_ID, column::TIME],
            Self::OperationEvents => &[column::OPERATION_ID, column::EVENT_TIME],
        }
    }

    /// Columns with a Parquet bloom filter, for point lookups.
    pub fn bloom_filter_columns(self) -> &'static [&'static str] {
        match self {
            Self::OutcomeEvents => &[column::TRACE_ID, column::TOOL_TARGET],
            Self::OutcomeCounts => &[column::TOOL_TARGET],
            Self::OperationEvents => &[column::OPERATION_ID],
            Self::Rejected | Self::Heartbeats => &[],
        }
    }

    /// The false-positive probability a column's bloom filter is written for.
    ///
    /// A trace lookup reads every row group whose filter on `trace_id` says "maybe", and
    /// decompresses and compares that row group's whole `trace_id` column chunk, so that filter
    /// is written for fewer false positives than the writer's default of 5 %
    /// (docs/adr/0006-parquet-writer-settings.md). The writer folds each filter down to the size
    /// its probability needs, so the other columns (a target takes few distinct values per row
    /// group) keep the default.
    pub fn bloom_filter_fpp(name: &str) -> f64 {
        if name == column::TRACE_ID {
            0.005
        } else {
            0.05
        }
    }

    /// High-cardinality columns stored without a Parquet dictionary, as they are; every column
    /// not listed here or in [`Table::delta_columns`] has one.
    pub fn plain_columns(self) -> &'static [&'static str] {
        match self {
            Self::OutcomeEvents => &[
                column::EVENT_ID,
                column::TRACE_ID,
                column::SPAN_ID,
                column::TOOL_CALL_ID,
                column::EVIDENCE_VALUE,
            ],
            Self::OutcomeCounts => &[column::POINT_ID],
            Self::Rejected => &[column::INPUT, column::DETAIL],
            Self::Heartbeats => &[],
            Self::OperationEvents => &[
                column::EVENT_ID,
                column::TRACE_ID,
                column::SPAN_ID,
                column::EVIDENCE_VALUE,
                column::RESOURCE_ID,
                column::RESOURCE_VERSION,
            ],
        }
    }

    /// Integer columns that rise almost in step with the sort order (times, and the Kafka offset,
    /// since a target's records share a partition): stored without a dictionary, as the
    /// differences between neighbours (Parquet's `DELTA_BINARY_PACKED`), which take a few bits
    /// each where the values take eight bytes (docs/adr/0006-parquet-writer-settings.md).
    pub fn delta_columns(self) -> &'static [&'static str] {
        match self {
            Self::OutcomeEvents => &[
                column::EVENT_TIME,
                column::RECEIVED_TIME,
                column::KAFKA_OFFSET,
                column::KAFKA_TIMESTAMP,
            ],
            Self::OutcomeCounts => &[
                column::TIME,
                column::RECEIVED_TIME,
                column::KAFKA_OFFSET,
                column::KAFKA_TIMESTAMP,
            ],
            Self::Rejected => &[
                column::RECEIVED_TIME,
                column::KAFKA_OFFSET,
                column::KAFKA_TIMESTAMP,
            ],
            Self::Heartbeats => &[column::TIME, column::KAFKA_OFFSET, column::KAFKA_TIMESTAMP],
            Self::OperationEvents => &[
                column::EVENT_TIME,
                column::RECEIVED_TIME,
                column::KAFKA_OFFSET,
                column::KAFKA_TIMESTAMP,
            ],
        }
    }

    /// The column that identifies a record across a client's retries, when the table has one;
    /// duplicates of it are removed.
    pub fn id_column(self) -> Option<&'static str> {
        match self {
            Self::OutcomeEvents | Self::OperationEvents => Some(column::EVENT_ID),
            Self::OutcomeCounts => Some(column::POINT_ID),
            Self::Rejected | Self::Heartbeats => None,
        }
    }

    /// The id of the Delta application transaction in which a table stores its position (the next
    /// offset to read) for a partition of this table's topic: `topic/partition`.
    pub fn position_app_id(self, partition: i32) -> String {
        format!("{}/{partition}", self.topic())
    }

    /// Columns added to the table after its first version, in the order they were added. Delta
    /// Lake adds a column at the end of a table's schema, so they come last in
    /// [`Table::schema`], after the Kafka columns and the date, in a table created now as in one
    /// the compactor evolved. Each is nullable: the rows written before it was added have none.
    pub fn added_columns(self) -> &'static [&'static str] {
        match self {
            Self::OutcomeEvents => &[
                column::SOURCE,
                column::ERROR_MESSAGE,
                column::EXCEPTION_TYPE,
                column::RPC_STATUS_CODE,
                column::TOOL_CALL_ID,
                column::EVIDENCE_KIND,
                column::EVIDENCE_VALUE,
                column::CONVENTION,
                column::SOURCE_SYSTEM,
                column::ACTOR,
                column::ADAPTER,
            ],
            Self::OutcomeCounts => &[
                column::EXPORT_INTERVAL_MS,
                column::SOURCE,
                column::CONVENTION,
                column::SAMPLING,
            ],
            Self::OperationEvents => &[column::RESOURCE_ID, column::RESOURCE_VERSION],
            Self::Rejected | Self::Heartbeats => &[],
        }
    }

    /// The table's Arrow schema: its record's columns, the Kafka columns and the date, then
    /// [`Table::added_columns`].
    pub fn schema(self) -> SchemaRef {
        let declared = self.declared_fields();
        let order = self.stored_order();
        Arc::new(Schema::new(
            order
                .into_iter()
                .map(|index| declared[index].clone())
                .collect::<Vec<_>>(),
        ))
    }

    /// For each column of [`Table::schema`], its position among the columns as declared (the
    /// record's columns in declaration order, then the Kafka columns and the date), which is
    /// the order rows are built in.
    pub fn stored_order(self) -> Vec<usize> {
        let declared = self.declared_fields();
        let added = self.added_columns();
        let position = |name: &str| added.iter().position(|added| *added == name);
        let mut order: Vec<usize> = (0..declared.len())
            .filter(|&index| position(declared[index].name()).is_none())
            .collect();
        let mut tail: Vec<usize> = (0..declared.len())
            .filter(|&index| position(declared[index].name()).is_some())
            .collect();
        tail.sort_by_key(|&index| position(declared[index].name()));
        order.extend(tail);
        order
    }

    fn declared_fields(self) -> Vec<Field> {
        let mut fields = match self {
            Self::OutcomeEvents => EventColumns::fields(),
            Self::OutcomeCounts => CountColumns::fields(),
            Self::Rejected => vec![
                text(column::SOURCE),
                text(column::REASON),
                text(column::DETAIL),
                text(column::SIGNAL),
                text(column::SERVICE_NAME),
                Field::new(column::INPUT, DataType::Binary, false),
                Field::new(column::INPUT_TRUNCATED, DataType::Boolean, false),
                long(column::COUNT),
                time(column::RECEIVED_TIME),
                text(column::COLLECTOR_ID),
                text(column::TOPIC),
            ],
            Self::Heartbeats => HeartbeatColumns::fields(),
            Self::OperationEvents => OperationColumns::fields(),
        };
        // A record the compactor could not decode has no schema version.
        let version_nullable = self == Self::Rejected;
        fields.extend([
            Field::new(column::SCHEMA_VERSION, DataType::Int32, version_nullable),
            Field::new(column::KAFKA_PARTITION, DataType::Int32, false),
            long(column::KAFKA_OFFSET),
            time(column::KAFKA_TIMESTAMP),
            text(column::ARRIVAL),
            Field::new(column::DATE, DataType::Date32, false),
        ]);
        fields
    }
}

fn text(name: &str) -> Field {
    Field::new(name, DataType::Utf8, false)
}

fn long(name: &str) -> Field {
    Field::new(name, DataType::Int64, false)
}

fn time(name: &str) -> Field {
    Field::new(
        name,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        false,
    )
}

/// A row's time against the Kafka timestamp of its record: far in the past or the future is
/// still stored, flagged and counted, never dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arrival {
    /// Within the configured bounds.
    OnTime,
    /// Older than the record's Kafka timestamp by more than the late bound.
    Late,
    /// Newer than the record's Kafka timestamp by more than the future bound.
    Future,
}

impl Arrival {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnTime => "on_time",
            Self::Late => "late",
            Self::Future => "future",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_column_exists_in_its_table() {
        for table in Table::ALL {
            let schema = table.schema();
            let mut listed: Vec<&str> =
                [table.sort_columns(), table.bloom_filter_columns()].concat();
            listed.extend(table.plain_columns());
            listed.extend(table.delta_columns());
            listed.extend(table.id_column());
            listed.extend(table.added_columns());
            listed.extend([table.time_column(), table.partition_column()]);
            for name in listed {
                assert!(
                    schema.field_with_name(name).is_ok(),
                    "{} lists {name}, which it does not have",
                    table.name()
                );
            }
        }
    }

    #[test]
    fn added_columns_come_last_and_may_be_null() {
        for table in Table::ALL {
            let schema = table.schema();
            let added = table.added_columns();
            let last: Vec<&str> = schema.fields()[schema.fields().len() - added.len()..]
                .iter()
                .map(|field| field.name().as_str())
                .collect();
            assert_eq!(last, added, "{}", table.name());
            for name in added {
                let field = schema.field_with_name(name).expect("listed");
                assert!(field.is_nullable(), "{}.{name}", table.name());
            }
        }
    }

    #[test]
    fn names_and_topics_round_trip() {
        for table in Table::ALL {
            assert_eq!(Table::from_topic(table.topic()), Some(table));
            assert_eq!(Table::from_name(table.name()), Some(table));
        }
        assert_eq!(Table::from_topic("candor.other.v1"), None);
    }
}
