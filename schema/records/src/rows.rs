//! Pure: a Kafka record becomes one typed row of one table, and rows become Arrow record batches
//! in the tables' schemas ([`crate::tables`]). The compactor writes these rows; the query side
//! decodes the not-yet-compacted Kafka tail with the same code, so both read a record alike.
//!
//! A record that cannot be decoded or does not meet the contract is never dropped: it becomes a
//! row of the `rejected` table with the reason, a bounded copy of its bytes, and the topic,
//! partition and offset it came from.

use std::collections::HashMap;
use std::sync::Arc;

use crate::proto::{
    CountClass, CountColumns, CountFields, EventColumns, Heartbeat, HeartbeatColumns,
    HeartbeatFields, OperationColumns, OperationEvent, OperationFields, OutcomeCount,
    OutcomeSource, Rejected, Temporality,
};
use crate::record::columns::{micros, timestamps};
use crate::rejection::{Refusal, RejectReason, RejectedSource, refuse};
use crate::tables::{Arrival, Table};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow_schema::ArrowError;
use candor_schema::vocab::{EvidenceKind, LifecycleState, UnknownValue};
use prost::Message as _;

mod event;

pub use event::{Event, EventBytes, EventFields, EventView};

/// Bytes of an undecodable record copied into the `rejected` table.
pub const MAX_REJECTED_COPY_BYTES: usize = 4096;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// A Kafka record, owned, as it enters the compactor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// The table of the topic it was read from.
    pub topic: Table,
    /// Kafka partition.
    pub partition: i32,
    /// Kafka offset.
    pub offset: i64,
    /// Kafka's timestamp in milliseconds, when the record has one.
    pub timestamp_ms: Option<i64>,
    /// The value; `None` for a record without one.
    pub payload: Option<Vec<u8>>,
    /// Which assignment or seek of its partition it was read under: the compactor drops a record
    /// read before the partition's latest one as stale. Readers that do not seek use 0.
    pub generation: u64,
}

/// Where a row came from and how its time relates to its arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Kafka partition of the record.
    pub partition: i32,
    /// Kafka offset of the record.
    pub offset: i64,
    /// Kafka timestamp of the record, in microseconds.
    pub kafka_micros: i64,
    /// The row's time against `kafka_micros`.
    pub arrival: Arrival,
}

/// A row of the `rejected` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRow {
    /// Who refused it.
    pub source: RejectedSource,
    /// The reason's stored name ([`RejectReason::as_str`]; [`RejectReason::from_name`] reads
    /// it back).
    pub reason: String,
    /// What exactly was wrong.
    pub detail: String,
    /// `traces`, `metrics`, or empty.
    pub signal: String,
    /// The sender's service, when known.
    pub service_name: String,
    /// A bounded copy of the input.
    pub input: Vec<u8>,
    /// Whether `input` was cut.
    pub input_truncated: bool,
    /// Events or points it stands for.
    pub count: i64,
    /// When it was received, in microseconds.
    pub received_micros: i64,
    /// The collector (or compactor) that refused it.
    pub collector_id: String,
    /// The topic it was read from.
    pub topic: &'static str,
    /// The record's schema version, when it could be read.
    pub schema_version: Option<i32>,
}

/// One decoded row.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// For `outcome_events`.
    Event(Event),
    /// For `outcome_counts`. (The other rows are boxed: the compactor buffers up to a million
    /// rows, each as large as the largest variant.)
    Count(Box<OutcomeCount>),
    /// For `heartbeats`.
    Heartbeat(Box<Heartbeat>),
    /// For `rejected`.
    Rejected(Box<RejectedRow>),
    /// For `operation_events`.
    Operation(Box<OperationEvent>),
}

impl Row {
    /// The table the row belongs to.
    pub fn table(&self) -> Table {
        match self {
            Self::Event(_) => Table::OutcomeEvents,
            Self::Count(_) => Table::OutcomeCounts,
            Self::Heartbeat(_) => Table::Heartbeats,
            Self::Rejected(_) => Table::Rejected,
            Self::Operation(_) => Table::OperationEvents,
        }
    }

    /// The id that is the same for a client's retried copy, when the table has one.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::Event(event) => Some(event.id()),
            Self::Count(count) => Some(&count.point_id),
            Self::Operation(operation) => Some(&operation.event_id),
            Self::Heartbeat(_) | Self::Rejected(_) => None,
        }
    }

    /// The row's time ([`Table::time_column`]) in microseconds.
    pub fn time_micros(&self) -> i64 {
        match self {
            Self::Event(event) => event.time_micros(),
            Self::Count(count) => micros(count.time_unix_nano),
            Self::Heartbeat(beat) => micros(beat.time_unix_nano),
            Self::Rejected(row) => row.received_micros,
            Self::Operation(operation) => micros(operation.event_time_unix_nano),
        }
    }

    /// The first sort key within a file ([`Table::sort_columns`]), as bytes: UTF-8 texts
    /// order as their bytes do.
    fn sort_key(&self) -> &[u8] {
        match self {
            Self::Event(event) => event.target_bytes(),
            Self::Count(count) => count.tool_target.as_bytes(),
            Self::Heartbeat(beat) => beat.collector_id.as_bytes(),
            Self::Rejected(row) => row.reason.as_bytes(),
            Self::Operation(operation) => operation.operation_id.as_bytes(),
        }
    }
}

/// Reads where each row of a table's batch came from, its Kafka columns, back into a [`Meta`]:
/// the inverse of what [`to_batch`] adds to the record's own columns.
pub fn meta_reader<'a>(batch: &'a RecordBatch) -> Result<impl Fn(usize) -> Meta + 'a, ArrowError> {
    use crate::record::columns::{Long, Read, Texts, Time};
    use crate::tables::column;
    let partitions = batch
        .column_by_name(column::KAFKA_PARTITION)
        .and_then(|array| array.as_any().downcast_ref::<Int32Array>())
        .ok_or_else(|| {
            ArrowError::SchemaError(format!("no Int32 column {}", column::KAFKA_PARTITION))
        })?;
    let offsets = <Long as Read<'a, u64>>::reader(batch, column::KAFKA_OFFSET)?;
    let times = <Time as Read<'a, u64>>::reader(batch, column::KAFKA_TIMESTAMP)?;
    let arrivals = Texts::of(batch, column::ARRIVAL)?;
    Ok(move |row: usize| Meta {
        partition: partitions.value(row),
        offset: offsets.value(row),
        kafka_micros: times.value(row),
        arrival: match arrivals.get(row) {
            Some("late") => Arrival::Late,
            Some("future") => Arrival::Future,
            _ => Arrival::OnTime,
        },
    })
}

/// Bounds past which a row's time is flagged rather than on time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBounds {
    /// Older than the Kafka timestamp by more than this: `late`.
    pub late_after_micros: i64,
    /// Newer than the Kafka timestamp by more than this: `future`.
    pub future_after_micros: i64,
}

impl TimeBounds {
    /// Classifies a row time against the record's Kafka time.
    pub fn arrival(&self, time_micros: i64, kafka_micros: i64) -> Arrival {
        if time_micros < kafka_micros.saturating_sub(self.late_after_micros) {
            Arrival::Late
        } else if time_micros > kafka_micros.saturating_add(self.future_after_micros) {
            Arrival::Future
        } else {
            Arrival::OnTime
        }
    }
}

/// Decodes one record into its row; anything wrong makes it a `rejected` row instead.
/// `compactor_id` names the refuser in such a row. [`decode_owned`] takes the record and keeps
/// an event's bytes without copying them.
pub fn decode(record: &SourceRecord, bounds: &TimeBounds, compactor_id: &str) -> (Meta, Row) {
    decode_owned(record.clone(), bounds, compactor_id)
}

/// [`decode`], taking the record.
pub fn decode_owned(record: SourceRecord, bounds: &TimeBounds, compactor_id: &str) -> (Meta, Row) {
    let kafka_micros = record.timestamp_ms.map(|ms| ms.saturating_mul(1000));
    let row = match record.payload {
        Some(payload) => decode_payload(record.topic, payload),
        None => Err((
            refuse(RejectReason::NoPayload, "the record has no value"),
            Vec::new(),
        )),
    };
    let row = match row {
        Ok(row) => row,
        Err((refusal, payload)) => {
            let kept = payload.len().min(MAX_REJECTED_COPY_BYTES);
            Row::Rejected(Box::new(RejectedRow {
                source: RejectedSource::Compactor,
                reason: refusal.reason.as_str().to_owned(),
                detail: refusal.detail,
                signal: String::new(),
                service_name: String::new(),
                input: payload[..kept].to_vec(),
                input_truncated: kept < payload.len(),
                count: 1,
                received_micros: kafka_micros.unwrap_or(0),
                collector_id: compactor_id.to_owned(),
                topic: record.topic.topic(),
                schema_version: None,
            }))
        }
    };
    let time = row.time_micros();
    // A record without a Kafka timestamp is measured against its own time: on time.
    let kafka_micros = kafka_micros.unwrap_or(time);
    let meta = Meta {
        partition: record.partition,
        offset: record.offset,
        kafka_micros,
        arrival: bounds.arrival(time, kafka_micros),
    };
    (meta, row)
}

/// The row of a record's value; a refusal comes with the value, for the `rejected` row's copy.
fn decode_payload(topic: Table, payload: Vec<u8>) -> Result<Row, (Refusal, Vec<u8>)> {
    let undecodable = |err: prost::DecodeError| refuse(RejectReason::Undecodable, err.to_string());
    let bytes = payload.as_slice();
    let row = match topic {
        Table::OutcomeEvents => return Event::decode(payload).map(Row::Event),
        Table::OutcomeCounts => OutcomeCount::decode(bytes)
            .map(|count| Row::Count(Box::new(count)))
            .map_err(undecodable),
        Table::Heartbeats => Heartbeat::decode(bytes)
            .map(|beat| Row::Heartbeat(Box::new(beat)))
            .map_err(undecodable),
        Table::Rejected => Rejected::decode(bytes)
            .map_err(undecodable)
            .and_then(from_collector)
            .map(|rejected| Row::Rejected(Box::new(rejected))),
        Table::OperationEvents => OperationEvent::decode(bytes)
            .map(|operation| Row::Operation(Box::new(operation)))
            .map_err(undecodable),
    };
    match row.and_then(|row| check(&row).map(|()| row)) {
        Ok(row) => Ok(row),
        Err(refusal) => Err((refusal, payload)),
    }
}

fn from_collector(rejected: Rejected) -> Result<RejectedRow, Refusal> {
    Ok(RejectedRow {
        source: RejectedSource::Collector,
        reason: rejected.reason,
        detail: rejected.detail,
        signal: rejected.signal,
        service_name: rejected.service_name,
        input: rejected.input,
        input_truncated: rejected.input_truncated,
        count: long("count", rejected.count)?,
        received_micros: micros(rejected.received_time_unix_nano),
        collector_id: rejected.collector_id,
        topic: Table::Rejected.topic(),
        schema_version: Some(version(rejected.schema_version)?),
    })
}

/// The record's schema version as stored; only version 1 is known to this build.
fn version(schema_version: u32) -> Result<i32, Refusal> {
    if schema_version != crate::proto::RECORD_SCHEMA_VERSION {
        return Err(refuse(
            RejectReason::UnknownSchemaVersion,
            format!("schema_version {schema_version}; this build reads 1"),
        ));
    }
    Ok(1)
}

fn long(field: &str, value: u64) -> Result<i64, Refusal> {
    i64::try_from(value).map_err(|_| {
        refuse(
            RejectReason::ValueOutOfRange,
            format!("{field} = {value} is past i64"),
        )
    })
}

/// The contract's checks, again: a reader does not trust that the writer validated. (An
/// event's are [`EventView`]'s.)
fn check(row: &Row) -> Result<(), Refusal> {
    match row {
        Row::Count(count) => {
            version(count.schema_version)?;
            let source = count
                .source
                .as_ref()
                .map(|source| source_of(source.as_bytes()))
                .transpose()?;
            CountClass::parse(&count.outcome_class, source)
                .map_err(|detail| refuse(RejectReason::UnknownClass, detail))?;
            long("value", count.value)?;
            if Temporality::try_from(count.temporality).is_err() {
                let detail = format!("temporality {}", count.temporality);
                return Err(refuse(RejectReason::UnknownTemporality, detail));
            }
            if count.point_id.is_empty() {
                return Err(refuse(RejectReason::MissingId, "point_id is empty"));
            }
        }
        Row::Heartbeat(beat) => {
            version(beat.schema_version)?;
            for (field, value) in [
                ("interval_ms", beat.interval_ms),
                ("accepted_events", beat.accepted_events),
                ("accepted_counts", beat.accepted_counts),
                ("heartbeat.rejected", beat.rejected),
            ] {
                long(field, value)?;
            }
        }
        Row::Operation(operation) => {
            version(operation.schema_version)?;
            let unknown = |reason| move |err: UnknownValue| refuse(reason, err.to_string());
            LifecycleState::from_bytes(operation.lifecycle_state.as_bytes())
                .map_err(unknown(RejectReason::UnknownKind))?;
            if let Some(kind) = &operation.evidence_kind {
                EvidenceKind::from_bytes(kind.as_bytes())
                    .map_err(unknown(RejectReason::UnknownKind))?;
            }
            if operation.event_id.is_empty() {
                return Err(refuse(RejectReason::MissingId, "event_id is empty"));
            }
            if operation.operation_id.is_empty() {
                return Err(refuse(RejectReason::MissingId, "operation_id is empty"));
            }
            if operation.resource_version.is_some() && operation.resource_id.is_none() {
                return Err(refuse(
                    RejectReason::MissingAttribute,
                    "resource_version is set without resource_id",
                ));
            }
        }
        // Checked by `Event::decode`.
        Row::Event(_) | Row::Rejected(_) => {}
    }
    Ok(())
}

/// A row's `source`, which must be one of [`OutcomeSource`]'s.
fn source_of(bytes: &[u8]) -> Result<OutcomeSource, Refusal> {
    OutcomeSource::from_bytes(bytes).ok_or_else(|| {
        refuse(
            RejectReason::UnknownSource,
            format!("source {:?}", String::from_utf8_lossy(bytes)),
        )
    })
}

/// The UTC day of a time in microseconds, as days since the epoch (the `date` column).
pub fn day(micros: i64) -> i32 {
    // i64 micros / a day's micros is within ±1.1e8, which fits in an i32.
    i32::try_from(micros.div_euclid(MICROS_PER_DAY)).unwrap_or(i32::MAX)
}

/// Sorts rows by their day (the `date` partition), then by the table's sort columns: the first
/// key, then time. The rows of a day are thus one run, which is written as one partition's
/// file, in the order of the sort columns.
///
/// Comparing the keys in place follows pointers to each side's memory (the row, then its text)
/// at every comparison, so each distinct first key is ranked once, and plain
/// `(day, rank, time, position)` tuples are sorted instead.
pub fn sort(rows: &mut [&(Meta, Row)]) {
    let mut ids: HashMap<&[u8], u32, foldhash::fast::RandomState> = HashMap::default();
    let row_ids: Vec<u32> = rows
        .iter()
        .map(|(_, row)| {
            let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
            *ids.entry(row.sort_key()).or_insert(next)
        })
        .collect();
    let mut distinct: Vec<(&[u8], u32)> = ids.into_iter().collect();
    distinct.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut rank_of = vec![0_u32; distinct.len()];
    for (rank, (_, id)) in distinct.iter().enumerate() {
        // Fewer distinct keys than rows, and rows fit in memory: the rank fits in a u32.
        rank_of[*id as usize] = u32::try_from(rank).unwrap_or(u32::MAX);
    }
    let mut keyed: Vec<(i32, u32, i64, usize)> = rows
        .iter()
        .zip(&row_ids)
        .enumerate()
        .map(|(at, ((_, row), id))| {
            let time = row.time_micros();
            (day(time), rank_of[*id as usize], time, at)
        })
        .collect();
    keyed.sort_unstable();
    let original = rows.to_vec();
    for (slot, (_, _, _, at)) in rows.iter_mut().zip(keyed) {
        *slot = original[at];
    }
}

/// Builds the record batch of `table` from rows that all belong to it (rows of another table
/// are skipped: the caller groups by table).
pub fn to_batch(table: Table, rows: &[&(Meta, Row)]) -> Result<RecordBatch, ArrowError> {
    let mut columns: Vec<ArrayRef> = match table {
        Table::OutcomeEvents => event_columns(rows)?,
        Table::OutcomeCounts => count_columns(rows)?,
        Table::Rejected => rejected_columns(rows),
        Table::Heartbeats => heartbeat_columns(rows)?,
        Table::OperationEvents => operation_columns(rows)?,
    };
    let metas: Vec<(&Meta, &Row)> = rows
        .iter()
        .filter(|(_, row)| row.table() == table)
        .map(|(meta, row)| (meta, row))
        .collect();
    let version = |row: &Row| match row {
        Row::Event(event) => Some(checked_i32(event.schema_version())),
        Row::Count(count) => Some(checked_i32(count.schema_version)),
        Row::Heartbeat(beat) => Some(checked_i32(beat.schema_version)),
        Row::Rejected(rejected) => rejected.schema_version,
        Row::Operation(operation) => Some(checked_i32(operation.schema_version)),
    };
    columns.extend([
        Arc::new(Int32Array::from_iter(
            metas.iter().map(|(_, row)| version(row)),
        )) as ArrayRef,
        Arc::new(Int32Array::from_iter_values(
            metas.iter().map(|(meta, _)| meta.partition),
        )),
        Arc::new(Int64Array::from_iter_values(
            metas.iter().map(|(meta, _)| meta.offset),
        )),
        timestamps(metas.iter().map(|(meta, _)| meta.kafka_micros).collect()),
        Arc::new(StringArray::from_iter_values(
            metas.iter().map(|(meta, _)| meta.arrival.as_str()),
        )),
        Arc::new(Date32Array::from_iter_values(
            metas.iter().map(|(_, row)| day(row.time_micros())),
        )),
    ]);
    // Built in declaration order; stored with the added columns last.
    let columns = table
        .stored_order()
        .into_iter()
        .map(|index| columns[index].clone())
        .collect();
    RecordBatch::try_new(table.schema(), columns)
}

fn checked_i32(version: u32) -> i32 {
    i32::try_from(version).unwrap_or(i32::MAX)
}

fn strings<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn longs(values: impl Iterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values))
}

/// The event columns, built in one pass over the rows: a column at a time would visit every
/// event once per column, each visit following the row's box to memory of its own.
fn event_columns(rows: &[&(Meta, Row)]) -> Result<Vec<ArrayRef>, ArrowError> {
    let first = rows.iter().find_map(|(_, row)| match row {
        Row::Event(event) => Some(event.fields()),
        _ => None,
    });
    let mut columns = EventColumns::with_capacity(rows.len(), first.as_ref());
    for (at, (_, row)) in rows.iter().enumerate() {
        if at % WARM_AHEAD == 0 {
            warm(rows.get(at + WARM_AHEAD..).unwrap_or_default());
        }
        if let Row::Event(event) = row {
            columns.push(&event.fields());
        }
    }
    columns.finish()
}

/// Rows read ahead of the one being built, in one go.
const WARM_AHEAD: usize = 32;

/// Reads one byte of every cache line of the next rows' records, all at once. Sorted, the rows
/// are read in an order far from the one their records were stored in, and each record's first
/// read waited for memory; reads that do not wait on each other wait together instead.
fn warm(rows: &[&(Meta, Row)]) {
    let mut sum = 0_u8;
    for (_, row) in rows.iter().take(WARM_AHEAD) {
        if let Row::Event(event) = row {
            for byte in event.bytes().iter().step_by(64) {
                sum = sum.wrapping_add(*byte);
            }
        }
    }
    std::hint::black_box(sum);
}

fn count_columns(rows: &[&(Meta, Row)]) -> Result<Vec<ArrayRef>, ArrowError> {
    let mut columns = CountColumns::with_capacity(rows.len(), None::<&CountFields<&str>>);
    for (_, row) in rows {
        if let Row::Count(count) = row {
            columns.push(&CountFields::of(count));
        }
    }
    columns.finish()
}

fn rejected_columns(rows: &[&(Meta, Row)]) -> Vec<ArrayRef> {
    let rejected: Vec<&RejectedRow> = rows
        .iter()
        .filter_map(|(_, row)| match row {
            Row::Rejected(rejected) => Some(&**rejected),
            _ => None,
        })
        .collect();
    let r = || rejected.iter().copied();
    vec![
        strings(r().map(|r| r.source.as_str())),
        strings(r().map(|r| r.reason.as_str())),
        strings(r().map(|r| r.detail.as_str())),
        strings(r().map(|r| r.signal.as_str())),
        strings(r().map(|r| r.service_name.as_str())),
        Arc::new(BinaryArray::from_iter_values(
            r().map(|r| r.input.as_slice()),
        )),
        Arc::new(BooleanArray::from_iter(
            r().map(|r| Some(r.input_truncated)),
        )),
        longs(r().map(|r| r.count)),
        timestamps(r().map(|r| r.received_micros).collect()),
        strings(r().map(|r| r.collector_id.as_str())),
        strings(r().map(|r| r.topic)),
    ]
}

fn heartbeat_columns(rows: &[&(Meta, Row)]) -> Result<Vec<ArrayRef>, ArrowError> {
    let mut columns = HeartbeatColumns::with_capacity(rows.len(), None::<&HeartbeatFields<&str>>);
    for (_, row) in rows {
        if let Row::Heartbeat(beat) = row {
            columns.push(&HeartbeatFields::of(beat));
        }
    }
    columns.finish()
}

fn operation_columns(rows: &[&(Meta, Row)]) -> Result<Vec<ArrayRef>, ArrowError> {
    let mut columns = OperationColumns::with_capacity(rows.len(), None::<&OperationFields<&str>>);
    for (_, row) in rows {
        if let Row::Operation(operation) = row {
            columns.push(&OperationFields::of(operation));
        }
    }
    columns.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::OutcomeEvent;
    use candor_schema::names::topic;

    const BOUNDS: TimeBounds = TimeBounds {
        late_after_micros: 86_400_000_000,
        future_after_micros: 300_000_000,
    };
    const NOW_MS: i64 = 1_780_000_000_000;

    fn event(target: &str, class: &str) -> OutcomeEvent {
        OutcomeEvent {
            schema_version: 1,
            event_id: format!("id-{target}"),
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            event_time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000 - 5_000_000,
            service_name: "checkout".into(),
            service_instance_id: "i-1".into(),
            outcome_class: class.into(),
            tool_name: "search".into(),
            tool_target: target.into(),
            failure_kind: "timeout".into(),
            retry_action: "exhausted".into(),
            retry_attempt: 3,
            retry_max_attempts: 3,
            http_status_code: Some(504),
            received_time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000,
            collector_id: "c-1".into(),
            ..Default::default()
        }
    }

    fn record(topic: Table, payload: Vec<u8>) -> SourceRecord {
        SourceRecord {
            topic,
            partition: 2,
            offset: 41,
            timestamp_ms: Some(NOW_MS),
            payload: Some(payload),
            generation: 0,
        }
    }

    #[test]
    fn a_valid_event_becomes_an_event_row_on_time() {
        let payload = event("https://a.example", "access_failure").encode_to_vec();
        let (meta, row) = decode(&record(Table::OutcomeEvents, payload), &BOUNDS, "k");
        assert!(matches!(row, Row::Event(_)), "{row:?}");
        assert_eq!(meta.arrival, Arrival::OnTime);
        assert_eq!((meta.partition, meta.offset), (2, 41));
    }

    #[test]
    fn garbage_and_unknown_vocabulary_become_rejected_rows_with_a_reason() {
        let cases = [
            (vec![0xff, 0xff, 0xff], "undecodable"),
            (event("t", "maybe").encode_to_vec(), "unknown_class"),
            (
                OutcomeEvent {
                    schema_version: 9,
                    ..event("t", "partial")
                }
                .encode_to_vec(),
                "unknown_schema_version",
            ),
        ];
        for (payload, reason) in cases {
            let (_, row) = decode(&record(Table::OutcomeEvents, payload.clone()), &BOUNDS, "k");
            let Row::Rejected(rejected) = row else {
                panic!("{reason}: not rejected");
            };
            assert_eq!(rejected.reason, reason);
            assert_eq!(rejected.topic, topic::OUTCOME_EVENTS);
            assert_eq!(rejected.input, payload);
            assert_eq!(rejected.source, RejectedSource::Compactor);
        }
        // A source outside the closed set, on an event and on a count.
        let unknown_source = OutcomeEvent {
            source: Some("rumour".into()),
            ..event("t", "partial")
        };
        let (_, row) = decode(
            &record(Table::OutcomeEvents, unknown_source.encode_to_vec()),
            &BOUNDS,
            "k",
        );
        assert!(
            matches!(&row, Row::Rejected(r) if r.reason == "unknown_source"),
            "{row:?}"
        );
        // An evidence kind outside the closed set.
        let unknown_evidence = OutcomeEvent {
            evidence_kind: Some("hunch".into()),
            evidence_value: Some("x".into()),
            ..event("t", "partial")
        };
        let (_, row) = decode(
            &record(Table::OutcomeEvents, unknown_evidence.encode_to_vec()),
            &BOUNDS,
            "k",
        );
        assert!(
            matches!(&row, Row::Rejected(r) if r.reason == "unknown_kind" && r.detail.contains("hunch")),
            "{row:?}"
        );
        let count = OutcomeCount {
            point_id: "p".into(),
            outcome_class: "success".into(),
            temporality: Temporality::Cumulative as i32,
            time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000,
            source: Some("rumour".into()),
            schema_version: 1,
            ..Default::default()
        };
        let (_, row) = decode(
            &record(Table::OutcomeCounts, count.encode_to_vec()),
            &BOUNDS,
            "k",
        );
        assert!(
            matches!(&row, Row::Rejected(r) if r.reason == "unknown_source"),
            "{row:?}"
        );
        // An operation's resource version without the resource.
        let operation = |resource_id: Option<&str>| crate::proto::OperationEvent {
            schema_version: 1,
            event_id: "e".into(),
            operation_id: "op".into(),
            lifecycle_state: "completed".into(),
            evidence_kind: Some("query".into()),
            evidence_value: Some("GET /op".into()),
            event_time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000,
            resource_id: resource_id.map(str::to_owned),
            resource_version: Some("7".into()),
            ..Default::default()
        };
        let (_, row) = decode(
            &record(Table::OperationEvents, operation(None).encode_to_vec()),
            &BOUNDS,
            "k",
        );
        assert!(
            matches!(&row, Row::Rejected(r) if r.reason == "missing_attribute"),
            "{row:?}"
        );
        let (_, row) = decode(
            &record(
                Table::OperationEvents,
                operation(Some("/exports/7")).encode_to_vec(),
            ),
            &BOUNDS,
            "k",
        );
        assert!(
            matches!(&row, Row::Operation(o) if o.resource_version.as_deref() == Some("7")),
            "{row:?}"
        );
        let no_value = SourceRecord {
            payload: None,
            ..record(Table::Heartbeats, vec![])
        };
        let (_, row) = decode(&no_value, &BOUNDS, "k");
        assert!(matches!(row, Row::Rejected(r) if r.reason == "no_payload"));
    }

    /// A derived source counts `access_failure`, `unverified` and `cancelled`, and never a
    /// class its span cannot tell (`success`, `empty`, `partial`); an adapter counts the
    /// contract's four classes and its acceptances (`accepted`), and nothing else. A derived event is an `access_failure`, whose
    /// retry action may be empty.
    #[test]
    fn derived_rows_hold_only_what_a_span_can_tell() {
        let count = |class: &str, source: Option<&str>| {
            let count = OutcomeCount {
                point_id: "p".into(),
                outcome_class: class.into(),
                temporality: Temporality::Delta as i32,
                time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000,
                source: source.map(str::to_owned),
                schema_version: 1,
                ..Default::default()
            };
            let (_, row) = decode(
                &record(Table::OutcomeCounts, count.encode_to_vec()),
                &BOUNDS,
                "k",
            );
            match row {
                Row::Count(_) => None,
                Row::Rejected(rejected) => Some(rejected.reason),
                other => panic!("{other:?}"),
            }
        };
        for class in ["access_failure", "unverified", "cancelled"] {
            for source in ["genai", "mcp", "http"] {
                assert_eq!(count(class, Some(source)), None, "{class} {source}");
            }
        }
        for class in ["success", "empty", "partial", "accepted", "maybe"] {
            assert_eq!(
                count(class, Some("http")).as_deref(),
                Some("unknown_class"),
                "{class}"
            );
        }
        for source in [None, Some("adapter")] {
            assert_eq!(count("success", source), None);
            // An adapter's acceptances, counted apart from its classes.
            assert_eq!(count("accepted", source), None);
            assert_eq!(
                count("unverified", source).as_deref(),
                Some("unknown_class")
            );
            assert_eq!(count("cancelled", source).as_deref(), Some("unknown_class"));
        }
        let event = |class: &str, action: &str, source: &str| {
            let event = OutcomeEvent {
                retry_action: action.into(),
                failure_kind: "timeout".into(),
                source: Some(source.into()),
                ..event("t", class)
            };
            let (_, row) = decode(
                &record(Table::OutcomeEvents, event.encode_to_vec()),
                &BOUNDS,
                "k",
            );
            match row {
                Row::Event(_) => None,
                Row::Rejected(rejected) => Some(rejected.reason),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(event("access_failure", "", "genai"), None);
        assert_eq!(event("access_failure", "exhausted", "http"), None);
        assert_eq!(
            event("partial", "", "mcp").as_deref(),
            Some("unknown_class")
        );
        assert_eq!(
            event("access_failure", "", "adapter").as_deref(),
            Some("unknown_action")
        );
        assert_eq!(
            event("access_failure", "maybe", "http").as_deref(),
            Some("unknown_action")
        );
    }

    #[test]
    fn a_huge_undecodable_record_keeps_a_bounded_copy() {
        let payload = vec![0xffu8; MAX_REJECTED_COPY_BYTES * 3];
        let (_, row) = decode(&record(Table::OutcomeCounts, payload), &BOUNDS, "k");
        let Row::Rejected(rejected) = row else {
            panic!("not rejected")
        };
        assert_eq!(rejected.input.len(), MAX_REJECTED_COPY_BYTES);
        assert!(rejected.input_truncated);
    }

    #[test]
    fn old_and_future_times_are_flagged_not_dropped() {
        let hour_ns = 3_600_000_000_000u64;
        let mut old = event("t", "partial");
        old.event_time_unix_nano -= 48 * hour_ns;
        let mut ahead = event("t", "partial");
        ahead.event_time_unix_nano += hour_ns;
        let (meta, _) = decode(
            &record(Table::OutcomeEvents, old.encode_to_vec()),
            &BOUNDS,
            "k",
        );
        assert_eq!(meta.arrival, Arrival::Late);
        let (meta, _) = decode(
            &record(Table::OutcomeEvents, ahead.encode_to_vec()),
            &BOUNDS,
            "k",
        );
        assert_eq!(meta.arrival, Arrival::Future);
    }

    #[test]
    fn a_batch_has_the_table_schema_and_sorted_rows() {
        let rows: Vec<(Meta, Row)> = ["b", "a", "c"]
            .into_iter()
            .map(|target| {
                let payload = event(target, "partial").encode_to_vec();
                decode(&record(Table::OutcomeEvents, payload), &BOUNDS, "k")
            })
            .collect();
        let mut rows: Vec<&(Meta, Row)> = rows.iter().collect();
        sort(&mut rows);
        let batch = to_batch(Table::OutcomeEvents, &rows).unwrap();
        assert_eq!(batch.schema(), Table::OutcomeEvents.schema());
        assert_eq!(batch.num_rows(), 3);
        let targets = batch
            .column_by_name(crate::tables::column::TOOL_TARGET)
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let targets: Vec<&str> = targets.iter().map(Option::unwrap).collect();
        assert_eq!(targets, ["a", "b", "c"]);
    }

    #[test]
    fn a_batch_reads_back_as_the_rows_it_was_built_from() {
        let events: Vec<(Meta, Row)> = ["b", "a"]
            .into_iter()
            .map(|target| {
                let mut event = event(target, "partial");
                event.coverage = Some("0.5".into());
                decode(
                    &record(Table::OutcomeEvents, event.encode_to_vec()),
                    &BOUNDS,
                    "k",
                )
            })
            .collect();
        let rows: Vec<&(Meta, Row)> = events.iter().collect();
        let batch = to_batch(Table::OutcomeEvents, &rows).unwrap();
        let fields = EventColumns::reader(&batch).unwrap();
        let metas = meta_reader(&batch).unwrap();
        for (at, (meta, row)) in events.iter().enumerate() {
            let Row::Event(event) = row else {
                panic!("{row:?}")
            };
            assert_eq!(fields(at), event.view());
            assert_eq!(metas(at), *meta);
        }
        let count = OutcomeCount {
            schema_version: 1,
            point_id: "p-1".into(),
            service_name: "checkout".into(),
            service_instance_id: "i-1".into(),
            tool_name: "search".into(),
            tool_target: "https://a.example".into(),
            outcome_class: "success".into(),
            start_time_unix_nano: 1_000_000,
            time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000,
            value: 7,
            temporality: Temporality::Cumulative as i32,
            received_time_unix_nano: u64::try_from(NOW_MS).unwrap() * 1_000_000,
            collector_id: "c-1".into(),
            ..Default::default()
        };
        let counts = [decode(
            &record(Table::OutcomeCounts, count.encode_to_vec()),
            &BOUNDS,
            "k",
        )];
        assert!(matches!(counts[0].1, Row::Count(_)), "{:?}", counts[0].1);
        let batch = to_batch(Table::OutcomeCounts, &[&counts[0]]).unwrap();
        assert_eq!(
            CountColumns::reader(&batch).unwrap()(0).into_record(),
            count
        );
        // A batch without a column the record fills is refused, naming the column.
        let without = batch.project(&[0]).unwrap();
        let err = CountColumns::reader(&without).err().unwrap().to_string();
        assert!(err.contains("no column"), "{err}");
    }

    proptest::proptest! {
        /// Every text of an event reaches its column as it was, absent ones as nulls: the
        /// columns are built from bytes and checked as UTF-8 as a whole.
        #[test]
        fn every_event_text_reaches_its_column(
            texts in proptest::collection::vec(
                (".{0,12}", proptest::option::of(".{0,6}"), proptest::option::of(".{0,6}")),
                1..40,
            )
        ) {
            use arrow_array::Array as _;
            let records: Vec<OutcomeEvent> = texts
                .iter()
                .map(|(target, error_type, coverage)| OutcomeEvent {
                    service_name: format!("s{target}"),
                    error_type: error_type.clone(),
                    coverage: coverage.clone(),
                    ..event(target, "partial")
                })
                .collect();
            let rows: Vec<(Meta, Row)> = records
                .iter()
                .map(|event| decode(&record(Table::OutcomeEvents, event.encode_to_vec()), &BOUNDS, "k"))
                .collect();
            let rows: Vec<&(Meta, Row)> = rows.iter().collect();
            let batch = to_batch(Table::OutcomeEvents, &rows).unwrap();
            let column = |name: &str| -> Vec<Option<String>> {
                let array = batch.column_by_name(name).unwrap();
                let array = array.as_any().downcast_ref::<StringArray>().unwrap();
                (0..array.len())
                    .map(|i| array.is_valid(i).then(|| array.value(i).to_owned()))
                    .collect()
            };
            use crate::tables::column;
            let expected = |field: fn(&OutcomeEvent) -> Option<String>| -> Vec<Option<String>> {
                records.iter().map(field).collect()
            };
            proptest::prop_assert_eq!(column(column::TOOL_TARGET), expected(|e| Some(e.tool_target.clone())));
            proptest::prop_assert_eq!(column(column::SERVICE_NAME), expected(|e| Some(e.service_name.clone())));
            proptest::prop_assert_eq!(column(column::ERROR_TYPE), expected(|e| e.error_type.clone()));
            proptest::prop_assert_eq!(column(column::COVERAGE), expected(|e| e.coverage.clone()));
            proptest::prop_assert_eq!(column(column::EVENT_ID), expected(|e| Some(e.event_id.clone())));
            proptest::prop_assert_eq!(column(column::DROPPED), expected(|e| e.dropped.clone()));
        }

        #[test]
        fn the_ranked_sort_orders_as_comparing_the_keys_would(
            rows in proptest::collection::vec((0_usize..6, 0_u64..40), 0..60)
        ) {
            let targets = ["b", "a", "ab", "", "é", "a\u{0}"];
            let rows: Vec<(Meta, Row)> = rows
                .iter()
                .map(|&(target, hours)| {
                    // Three hours apart: the rows span five days, several rows to a day.
                    let mut event = event(targets[target], "partial");
                    event.event_time_unix_nano -= hours * 3 * 3_600_000_000_000;
                    decode(&record(Table::OutcomeEvents, event.encode_to_vec()), &BOUNDS, "k")
                })
                .collect();
            let mut ranked: Vec<&(Meta, Row)> = rows.iter().collect();
            sort(&mut ranked);
            let mut compared: Vec<&(Meta, Row)> = rows.iter().collect();
            compared.sort_by(|(_, a), (_, b)| {
                day(a.time_micros())
                    .cmp(&day(b.time_micros()))
                    .then(a.sort_key().cmp(b.sort_key()))
                    .then(a.time_micros().cmp(&b.time_micros()))
            });
            let keys = |rows: &[&(Meta, Row)]| -> Vec<(i32, Vec<u8>, i64)> {
                rows.iter()
                    .map(|(_, row)| {
                        (day(row.time_micros()), row.sort_key().to_owned(), row.time_micros())
                    })
                    .collect()
            };
            proptest::prop_assert_eq!(keys(&ranked), keys(&compared));
        }
    }

    #[test]
    fn day_is_the_utc_date_also_before_the_epoch() {
        assert_eq!(day(0), 0);
        assert_eq!(day(MICROS_PER_DAY - 1), 0);
        assert_eq!(day(-1), -1);
    }
}
