//! The history from the tables: at start, the model is built from what the compactor committed,
//! and the stream then reads Kafka from where each table's records end ([`Starts`]), so that a
//! restart loses nothing that is stored anywhere, also what the brokers no longer hold.
//!
//! Each table is opened at its newest version; its files that may hold a row of the history
//! window (with a margin before it, so that each counter series has its point before the window
//! as a baseline) are scanned, and every row is applied as the stream applies its record. The
//! counter points are applied in time order (a sort that spills to disk past
//! [`SORT_MEMORY`]): a file holds the rows of one commit, or of many after an optimize, and
//! neither the files' order nor their spans follow a series' points, while each point's increase
//! is counted from the one before it. The same table version then
//! tells the stream where to start each partition: its stored position, before which every
//! record is in the table. While this runs the panels say the history is loading (the model
//! holds nothing yet), the rules wait and `/metrics` leaves the outcome counters out
//! ([`crate::state::Shared::history_ready`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use candor_query::store::{OpenTable, Provider, StoreError, TableRoot};
use candor_query::window::{Micros, now};
use candor_records::proto::{CountColumns, EventColumns, HeartbeatColumns, OperationColumns};
use candor_records::record::columns::Texts;
use candor_records::rows::{Meta, RejectedRow, Row, meta_reader};
use candor_records::tables::{RejectedSource, Table, column};
use deltalake::arrow::array::{Array as _, Int64Array};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::execution::runtime_env::RuntimeEnvBuilder;
use deltalake::datafusion::prelude::{SessionConfig, SessionContext, col};
use futures_util::StreamExt as _;

use crate::model::MINUTE;
use crate::state::Shared;
use crate::sync::lock;

/// How far before the history window counter points are read: each series' newest point
/// before the window is the baseline of its first increase within it.
pub const SERIES_MARGIN: Micros = 15 * MINUTE;

/// The memory the sort of the counter points may take before it spills to disk.
pub const SORT_MEMORY: usize = 256 << 20;

/// The tables in the order they are read: heartbeats and operations first, then the calls and
/// their failures, then the refusals.
const ORDER: [Table; 5] = [
    Table::Heartbeats,
    Table::OperationEvents,
    Table::OutcomeCounts,
    Table::OutcomeEvents,
    Table::Rejected,
];

/// Where the stream starts each partition: the position of the table version the history was
/// read from, or the oldest offset the brokers keep where no table holds the topic.
#[derive(Debug, Default)]
pub struct Starts {
    opened: BTreeMap<Table, OpenTable>,
    runtime: Option<tokio::runtime::Handle>,
}

impl Starts {
    /// Every partition from the oldest offset the brokers keep: no table was read.
    pub fn from_the_beginning() -> Self {
        Self::default()
    }

    /// The offset to start `partition` of `table`'s topic at: everything before it was read
    /// from the table. `None` to start at the oldest the brokers keep. Blocking: called from
    /// the stream's thread.
    pub fn of(&self, table: Table, partition: i32) -> Result<Option<i64>, String> {
        let (Some(open), Some(runtime)) = (self.opened.get(&table), &self.runtime) else {
            return Ok(None);
        };
        runtime
            .block_on(open.position(partition))
            .map_err(|err| format!("the {} table's position: {err}", table.name()))
    }
}

/// What reading the tables found.
#[derive(Debug, Default)]
pub struct Read {
    /// Rows applied, per table.
    pub rows: BTreeMap<Table, u64>,
    /// The oldest row time the outcome and heartbeat tables hold: the model holds every record
    /// from then on.
    pub holds_from: Option<Micros>,
}

/// Why the history could not be read from the tables.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A table could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A table's files could not be read.
    #[error("reading the {table} table: {reason}")]
    Read {
        /// The table.
        table: &'static str,
        /// What went wrong.
        reason: String,
    },
}

/// Reads the history window from the tables under `root` into the shared model, and says so
/// to the shared state when done (also when it failed: the stream then reads Kafka from the
/// beginning the brokers keep, as it would without tables). `counted_since` is when the stored
/// counters were saved: the files are read from then too, so that records past the stored
/// offsets are counted even when they fell out of the window while the dashboards were down.
pub async fn load(root: &TableRoot, shared: &Shared, counted_since: Option<Micros>) -> Starts {
    let started = std::time::Instant::now();
    lock(&shared.model).set_loading(true);
    let result = read(root, shared, counted_since).await;
    let at = now();
    lock(&shared.model).set_loading(false);
    let starts = match result {
        Ok((read, starts)) => {
            lock(&shared.model).prune(at);
            let rows: u64 = read.rows.values().sum();
            tracing::info!(
                rows,
                per_table = ?read.rows,
                seconds = started.elapsed().as_secs_f64(),
                "history read from the tables"
            );
            starts
        }
        Err(err) => {
            tracing::warn!(
                error = %err,
                "the history could not be read from the tables: the stream replays what the \
                 brokers keep"
            );
            lock(&shared.pipeline).table_error = Some(err.to_string());
            Starts::from_the_beginning()
        }
    };
    lock(&shared.pipeline).history_read = Some(at);
    starts
}

async fn read(
    root: &TableRoot,
    shared: &Shared,
    counted_since: Option<Micros>,
) -> Result<(Read, Starts), HistoryError> {
    match root.check() {
        Ok(()) => {}
        // No tables yet (the compactor has not run): nothing to read.
        Err(StoreError::RootMissing(_)) => return Ok((Read::default(), Starts::default())),
        Err(err) => return Err(err.into()),
    }
    let at = now();
    let settings = lock(&shared.model).settings();
    let window_start = at.saturating_sub(settings.history);
    let from = counted_since
        .map_or(window_start, |since| since.min(window_start))
        .saturating_sub(SERIES_MARGIN);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(SORT_MEMORY, 1.0)
        .build_arc()
        .map_err(|e| HistoryError::Read {
            table: "(none)",
            reason: format!("the reader's runtime: {e}"),
        })?;
    // One partition: the rows come as one stream, a file at a time.
    let context = SessionContext::new_with_config_rt(
        SessionConfig::new()
            .with_target_partitions(1)
            .with_repartition_file_scans(false),
        runtime,
    );
    let mut read = Read::default();
    let mut starts = Starts {
        opened: BTreeMap::new(),
        runtime: Some(tokio::runtime::Handle::current()),
    };
    for table in ORDER {
        match OpenTable::open(root, table).await {
            Ok(open) => {
                starts.opened.insert(table, open);
            }
            // The compactor creates each table at its first commit.
            Err(StoreError::NoTable { .. }) => {}
            Err(err) => return Err(err.into()),
        }
    }
    // The tables hold every record from their oldest row, a collector's first heartbeat at the
    // latest: from then on whatever an adapter exported reached a collector, and was stored or
    // counted as refused or lost. Said before the rows are applied, so that a counter series
    // that started since counts from zero, as the calls before its first export were made then.
    for table in [
        Table::OutcomeCounts,
        Table::OutcomeEvents,
        Table::Heartbeats,
    ] {
        if let Some(Some((oldest, _))) = starts
            .opened
            .get(&table)
            .and_then(|open| open.span_from_log(table.time_column()))
        {
            read.holds_from = Some(read.holds_from.map_or(oldest, |known| known.min(oldest)));
        }
    }
    if let Some(from) = read.holds_from {
        lock(&shared.model).hold_from(from.min(at));
    }
    for table in ORDER {
        let Some(open) = starts.opened.get(&table) else {
            continue;
        };
        let err = |reason: String| HistoryError::Read {
            table: table.name(),
            reason,
        };
        let provider: Arc<dyn TableProvider> = match open.provider(&context).await? {
            Provider::Files(files) => Arc::new(files.overlapping(from, Micros::MAX)),
            Provider::Delta(_) => {
                // A table whose protocol asks a reader for more is read through Delta.
                let mut spans = open.file_spans(table.time_column()).unwrap_or_default();
                spans.retain(|file| file.may_overlap(from, Micros::MAX));
                open.provider_over(spans.into_iter().map(|file| file.path).collect())
                    .await?
            }
        };
        let mut frame = context
            .read_table(provider)
            .map_err(|e| err(e.to_string()))?;
        if table == Table::OutcomeCounts {
            frame = frame
                .sort(vec![col(table.time_column()).sort(true, false)])
                .map_err(|e| err(e.to_string()))?;
        }
        let mut batches = frame
            .execute_stream()
            .await
            .map_err(|e| err(e.to_string()))?;
        let mut rows = 0u64;
        while let Some(batch) = batches.next().await {
            let batch = batch.map_err(|e| err(e.to_string()))?;
            rows += apply(shared, table, &batch).map_err(|e| err(e.to_string()))?;
        }
        read.rows.insert(table, rows);
    }
    Ok((read, starts))
}

/// Applies a batch of `table`'s rows to the model, under one lock; the rows applied.
fn apply(shared: &Shared, table: Table, batch: &RecordBatch) -> Result<u64, ArrowError> {
    let at = now();
    let metas = meta_reader(batch)?;
    let rows = batch.num_rows();
    let mut model = lock(&shared.model);
    match table {
        Table::OutcomeEvents => {
            let fields = EventColumns::reader(batch)?;
            for row in 0..rows {
                model.apply_event_fields(&metas(row), &fields(row), at);
            }
        }
        Table::OutcomeCounts => {
            let fields = CountColumns::reader(batch)?;
            for row in 0..rows {
                let count = Row::Count(Box::new(fields(row).into_record()));
                model.apply(&metas(row), &count, at);
            }
        }
        Table::Heartbeats => {
            let fields = HeartbeatColumns::reader(batch)?;
            for row in 0..rows {
                let beat = Row::Heartbeat(Box::new(fields(row).into_record()));
                model.apply(&metas(row), &beat, at);
            }
        }
        Table::OperationEvents => {
            let fields = OperationColumns::reader(batch)?;
            for row in 0..rows {
                let operation = Row::Operation(Box::new(fields(row).into_record()));
                model.apply(&metas(row), &operation, at);
            }
        }
        Table::Rejected => {
            let refused = rejected_reader(batch)?;
            for row in 0..rows {
                let meta: Meta = metas(row);
                model.apply(&meta, &Row::Rejected(Box::new(refused(row))), at);
            }
        }
    }
    Ok(u64::try_from(rows).unwrap_or(u64::MAX))
}

/// A `rejected` row with what the model counts of it: its reason, what it stands for and the
/// topic it was read from. (The copy of its input stays in the table.)
fn rejected_reader(batch: &RecordBatch) -> Result<impl Fn(usize) -> RejectedRow + '_, ArrowError> {
    let reasons = Texts::of(batch, column::REASON)?;
    let topics = Texts::of(batch, column::TOPIC)?;
    let counts = batch
        .column_by_name(column::COUNT)
        .and_then(|array| array.as_any().downcast_ref::<Int64Array>())
        .ok_or_else(|| ArrowError::SchemaError(format!("no Int64 column {}", column::COUNT)))?;
    Ok(move |row: usize| RejectedRow {
        source: RejectedSource::Compactor,
        reason: reasons.get(row).unwrap_or_default().to_owned(),
        detail: String::new(),
        signal: String::new(),
        service_name: String::new(),
        input: Vec::new(),
        input_truncated: false,
        count: if counts.is_valid(row) {
            counts.value(row)
        } else {
            1
        },
        received_micros: 0,
        collector_id: String::new(),
        topic: topics
            .get(row)
            .and_then(Table::from_topic)
            .map_or(Table::Rejected.topic(), Table::topic),
        schema_version: None,
    })
}
