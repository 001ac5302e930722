//! Delta Lake I/O of the compactor: open or create the tables, read the Kafka positions they hold,
//! and commit rows together with the positions they cover, in one Delta transaction.
//!
//! Each table keeps, per source topic-partition, an application transaction
//! (`app_id` = `topic/partition`, [`app_id`]) whose version is the next Kafka offset to read. A
//! commit checks those against the table's newest version first:
//! - rows below the table's position are already stored (by this process before a crash, or by
//!   another instance after a rebalance) and are left out;
//! - a home span that starts past the table's position would leave a hole, so the commit is
//!   refused ([`TableError::Gap`]) and the caller re-reads from the table's position;
//! - two commits racing with the same `app_id` are serialised by Delta's conflict check: the
//!   loser fails, keeps its rows and tries again later, when the reload leaves out what the
//!   winner stored.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use candor_records::tables::{Table, column};
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::error::ArrowError;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake::kernel::scalars::ScalarExt;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, StructType, Transaction};
use deltalake::parquet::basic::{Compression, Encoding, ZstdLevel};
use deltalake::parquet::file::properties::{EnabledStatistics, WriterProperties};
use deltalake::parquet::schema::types::ColumnPath;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter, WriteMode};
use deltalake::{DeltaTable, DeltaTableError};

use candor_records::rows::{self, Meta, Row};
use indexmap::IndexMap;

/// Why a table operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// Delta Lake or the object store failed (including a lost commit race).
    #[error("delta table {table}: {source}")]
    Delta {
        /// The table.
        table: &'static str,
        /// The cause.
        source: DeltaTableError,
    },
    /// The rows could not be made into Arrow arrays (a bug: rows are checked when decoded).
    #[error("building the arrow batch of {table}: {source}")]
    Arrow {
        /// The table.
        table: &'static str,
        /// The cause.
        source: ArrowError,
    },
    /// A span would start past what the table holds: committing it would leave a hole.
    #[error(
        "{table}: rows of {app_id} start at offset {from} but the table holds up to {held:?}; re-read from the table"
    )]
    Gap {
        /// The table.
        table: &'static str,
        /// The source topic-partition.
        app_id: String,
        /// The first offset of the span.
        from: i64,
        /// The table's position.
        held: Option<i64>,
    },
}

impl TableError {
    /// A short, stable code for metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Delta { .. } => "delta",
            Self::Arrow { .. } => "arrow",
            Self::Gap { .. } => "gap",
        }
    }
}

/// The application transaction id of a source topic-partition.
pub fn app_id(topic: Table, partition: i32) -> String {
    topic.position_app_id(partition)
}

/// Rows of one source topic-partition for one table, and the offsets they cover.
///
/// The span owns its rows so that sorting them and building their batch can run on a blocking
/// thread, off the async runtime's; [`commit`] hands them back in the span, committed or not.
#[derive(Debug, Clone, Default)]
pub struct Span {
    /// The position reading started from: rows cover `from..to` (records not in `rows` were
    /// removed as duplicates or are rows of another table).
    pub from: i64,
    /// The next offset after the last record read.
    pub to: i64,
    /// The rows, in offset order.
    pub rows: Vec<(Meta, Row)>,
}

/// What one commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    /// The new table version, when something was committed.
    pub version: Option<u64>,
    /// Rows written.
    pub rows: usize,
    /// Rows left out because the table already held them.
    pub already_stored: usize,
    /// Parquet files added.
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
    /// Newest row time committed, in microseconds.
    pub watermark_micros: Option<i64>,
    /// Where the commit's time went.
    pub stages: Stages,
}

/// Where a commit's time went, stage by stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages {
    /// Sorting the rows.
    pub sort: Duration,
    /// Building their Arrow batch.
    pub build: Duration,
    /// Writing the Parquet files.
    pub write: Duration,
    /// Reading the table's state and committing the files to its log.
    pub commit: Duration,
}

impl Stages {
    /// Each stage with its name, as the metrics label them.
    pub fn named(&self) -> [(&'static str, Duration); 4] {
        [
            ("sort", self.sort),
            ("build", self.build),
            ("write", self.write),
            ("commit", self.commit),
        ]
    }
}

/// How files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSettings {
    /// Rows per row group.
    pub row_group_rows: usize,
    /// zstd level.
    pub zstd_level: i32,
}

/// The most bytes of values a data page holds before a new one starts (Parquet's default is
/// 1 MiB). A lookup by id decompresses every page that holds a matching row, in each column it
/// returns, after the bloom filter and the page index have pruned the rest, so small pages keep
/// that work small (docs/adr/0006-parquet-writer-settings.md).
const PAGE_BYTES: usize = 64 * 1024;

/// The Parquet writer properties of a table: zstd, statistics per page, pages of at most
/// 64 KiB (`PAGE_BYTES`), dictionaries except on the table's high-cardinality columns, its rising
/// integers as deltas, bloom filters on its lookup columns.
pub fn writer_properties(table: Table, settings: FileSettings) -> WriterProperties {
    let level = ZstdLevel::try_new(settings.zstd_level).unwrap_or_default();
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(settings.row_group_rows))
        .set_data_page_size_limit(PAGE_BYTES)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(true);
    for name in table.plain_columns() {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(*name), false);
    }
    for name in table.delta_columns() {
        builder = builder
            .set_column_dictionary_enabled(ColumnPath::from(*name), false)
            .set_column_encoding(ColumnPath::from(*name), Encoding::DELTA_BINARY_PACKED);
    }
    for name in table.bloom_filter_columns() {
        builder = builder
            .set_column_bloom_filter_enabled(ColumnPath::from(*name), true)
            .set_column_bloom_filter_fpp(ColumnPath::from(*name), Table::bloom_filter_fpp(name));
    }
    builder.build()
}

/// The URL of a table under the root: a local directory (created when missing) or an object
/// store URL (S3; see `candor_records::stores`). The table name is a constant, never input, so nothing from a record reaches a path.
pub fn table_url(root: &str, table: Table) -> Result<url::Url, TableError> {
    candor_records::stores::register();
    let location = format!("{}/{}", root.trim_end_matches('/'), table.name());
    deltalake::ensure_table_uri(location).map_err(|source| TableError::Delta {
        table: table.name(),
        source,
    })
}

/// Opens a table, creating it with its schema and date partitioning when it does not exist.
pub async fn open_or_create(root: &str, table: Table) -> Result<DeltaTable, TableError> {
    let delta = |source| TableError::Delta {
        table: table.name(),
        source,
    };
    let url = table_url(root, table)?;
    let mut opened = deltalake::DeltaTableBuilder::from_url(url)
        .and_then(deltalake::DeltaTableBuilder::build)
        .map_err(delta)?;
    // Asked first, so that a table not made yet is not an error the Delta library logs.
    if opened
        .log_store()
        .is_delta_table_location()
        .await
        .map_err(delta)?
    {
        opened.load().await.map_err(delta)?;
        return add_missing_columns(opened, table).await;
    }
    let schema = kernel_schema(table)?;
    opened
        .create()
        .with_table_name(table.name())
        .with_columns(schema.fields().cloned())
        .with_partition_columns([column::DATE])
        .with_save_mode(SaveMode::Ignore)
        .await
        .map_err(delta)
}

/// Creates `table` under `root` as a compactor that knew none of [`Table::added_columns`] made
/// it, holding `rows` (cut to its columns): the shape an upgrade finds, for tests of schema
/// evolution. The table must not exist yet.
pub async fn create_before_added_columns(
    root: &str,
    table: Table,
    rows: &[&(Meta, Row)],
) -> Result<DeltaTable, TableError> {
    let delta_err = |source| TableError::Delta {
        table: table.name(),
        source,
    };
    let added = table.added_columns();
    let kept: Vec<usize> = table
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| !added.contains(&field.name().as_str()))
        .map(|(index, _)| index)
        .collect();
    let arrow_err = |source| TableError::Arrow {
        table: table.name(),
        source,
    };
    let old_schema = table.schema().project(&kept).map_err(arrow_err)?;
    let old_kernel: StructType = (&old_schema).try_into_kernel().map_err(|err| {
        delta_err(DeltaTableError::Generic(format!(
            "the arrow schema has no delta equivalent: {err}"
        )))
    })?;
    let mut delta = deltalake::DeltaTableBuilder::from_url(table_url(root, table)?)
        .and_then(deltalake::DeltaTableBuilder::build)
        .map_err(delta_err)?
        .create()
        .with_table_name(table.name())
        .with_columns(old_kernel.fields().cloned())
        .with_partition_columns([column::DATE])
        .await
        .map_err(delta_err)?;
    let batch = rows::to_batch(table, rows)
        .and_then(|batch| batch.project(&kept))
        .map_err(arrow_err)?;
    let mut writer = RecordBatchWriter::for_table(&delta).map_err(delta_err)?;
    writer.write(batch).await.map_err(delta_err)?;
    writer
        .flush_and_commit(&mut delta)
        .await
        .map_err(delta_err)?;
    Ok(delta)
}

fn kernel_schema(table: Table) -> Result<StructType, TableError> {
    table
        .schema()
        .as_ref()
        .try_into_kernel()
        .map_err(|err| TableError::Delta {
            table: table.name(),
            source: DeltaTableError::Generic(format!(
                "the arrow schema has no delta equivalent: {err}"
            )),
        })
}

/// Adds the columns of [`Table::added_columns`] that a table written by an older compactor
/// lacks, in one commit of metadata only: its files stay as they are, and every reader sees
/// those columns as null in the rows written before. Two compactors adding the same column race;
/// the loser reloads the table and finds it there.
async fn add_missing_columns(
    mut delta: DeltaTable,
    table: Table,
) -> Result<DeltaTable, TableError> {
    let err = |source| TableError::Delta {
        table: table.name(),
        source,
    };
    let wanted = kernel_schema(table)?;
    for attempt in 0..2 {
        let stored = delta.snapshot().map_err(err)?.schema();
        let missing: Vec<_> = table
            .added_columns()
            .iter()
            .filter(|name| !stored.contains(name))
            .filter_map(|name| wanted.field(name).cloned())
            .collect();
        if missing.is_empty() {
            return Ok(delta);
        }
        let names: Vec<&str> = missing.iter().map(|field| field.name().as_str()).collect();
        tracing::info!(table = table.name(), columns = ?names, "adding columns to the table");
        let log_store = delta.log_store();
        match delta.add_columns().with_fields(missing).await {
            Ok(evolved) => return Ok(evolved),
            Err(source) if attempt == 0 => {
                tracing::warn!(table = table.name(), error = %source, "adding columns failed; reloading the table to look again");
                delta = DeltaTable::new(log_store);
                delta.load().await.map_err(err)?;
            }
            Err(source) => return Err(err(source)),
        }
    }
    Ok(delta)
}

/// The position (next offset to read) a table holds for a source topic-partition.
pub async fn position(
    delta: &DeltaTable,
    table: Table,
    topic: Table,
    partition: i32,
) -> Result<Option<i64>, TableError> {
    let err = |source| TableError::Delta {
        table: table.name(),
        source,
    };
    let snapshot = delta.snapshot().map_err(err)?;
    snapshot
        .transaction_version(delta.log_store().as_ref(), app_id(topic, partition))
        .await
        .map_err(err)
}

/// Commits the spans' rows to `table` with their positions. `spans` maps a source
/// topic-partition to its span; a span is "home" when its topic is the table's own. The spans
/// keep their rows whatever the result: the caller clears them once committed.
///
/// The table state is refreshed first; rows the table already holds are left out. Nothing is
/// committed when no row and no position would change.
pub async fn commit(
    delta: &mut DeltaTable,
    table: Table,
    spans: &mut BTreeMap<(Table, i32), Span>,
    properties: &WriterProperties,
    metadata: HashMap<String, serde_json::Value>,
) -> Result<CommitReport, TableError> {
    let err = |source| TableError::Delta {
        table: table.name(),
        source,
    };
    let started = Instant::now();
    delta.update_state().await.map_err(err)?;
    let mut transactions = Vec::new();
    let mut keep_from = Vec::with_capacity(spans.len());
    for (&(topic, partition), span) in spans.iter() {
        let held = position(delta, table, topic, partition).await?;
        let home = topic == table;
        if home && held.unwrap_or(0) < span.from {
            return Err(TableError::Gap {
                table: table.name(),
                app_id: app_id(topic, partition),
                from: span.from,
                held,
            });
        }
        keep_from.push(held.unwrap_or(0));
        if held.is_none_or(|held| span.to > held) {
            transactions.push(Transaction::new(app_id(topic, partition), span.to));
        }
    }
    let mut report = CommitReport {
        stages: Stages {
            commit: started.elapsed(),
            ..Stages::default()
        },
        ..CommitReport::default()
    };
    let held_rows: Vec<Vec<(Meta, Row)>> = spans
        .values_mut()
        .map(|span| std::mem::take(&mut span.rows))
        .collect();
    // Sorting and building the batch take a CPU for as long as the rows are many; on a blocking
    // thread they leave the runtime's threads to the consumer and the metrics.
    let (held_rows, prepared) = tokio::task::spawn_blocking(move || {
        let prepared = Prepared::new(table, &held_rows, &keep_from);
        (held_rows, prepared)
    })
    .await
    // A panic while sorting is a bug; it goes on as it would have on this thread.
    .unwrap_or_else(|joined| std::panic::resume_unwind(joined.into_panic()));
    for (span, rows) in spans.values_mut().zip(held_rows) {
        span.rows = rows;
    }
    let prepared = prepared.map_err(|source| TableError::Arrow {
        table: table.name(),
        source,
    })?;
    report.already_stored = prepared.already_stored;
    if prepared.rows == 0 && transactions.is_empty() {
        return Ok(CommitReport {
            stages: Stages::default(),
            ..report
        });
    }
    report.rows = prepared.rows;
    report.watermark_micros = prepared.watermark_micros;
    report.stages.sort = prepared.sort;
    report.stages.build = prepared.build;
    let mut stage = Instant::now();
    let mut lap = || {
        let now = Instant::now();
        std::mem::replace(&mut stage, now).elapsed()
    };
    let mut actions = Vec::new();
    if let Some(batch) = prepared.batch {
        let mut writer = RecordBatchWriter::for_table(delta)
            .map_err(err)?
            .with_writer_properties(properties.clone());
        // The rows are sorted by day first: each day is one run, written to its partition as a
        // slice of the batch. (`write` would split the batch by its partition values again and
        // copy every column to do so.)
        let dates = batch
            .column_by_name(column::DATE)
            .ok_or_else(|| err(DeltaTableError::Generic("the batch has no date".into())))?;
        for run in prepared.days {
            let date = ScalarExt::from_array(dates.as_ref(), run.start)
                .ok_or_else(|| err(DeltaTableError::Generic("a date without a value".into())))?;
            let partition = IndexMap::from([(column::DATE.to_owned(), date)]);
            let slice = batch.slice(run.start, run.len());
            writer
                .write_partition(slice, &partition, WriteMode::Default)
                .await
                .map_err(err)?;
        }
        let adds = writer.flush().await.map_err(err)?;
        report.files = adds.len();
        report.bytes = adds
            .iter()
            .map(|add| u64::try_from(add.size).unwrap_or(0))
            .sum();
        actions.extend(adds.into_iter().map(Action::Add));
        report.stages.write = lap();
    }
    super::fault::reach(super::fault::Point::FilesWritten, Some(table.name()));
    let operation = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: Some(vec![column::DATE.to_owned()]),
        predicate: None,
    };
    let properties = CommitProperties::default()
        .with_application_transactions(transactions)
        .with_metadata(metadata);
    let finalized = CommitBuilder::from(properties)
        .with_actions(actions)
        .build(
            Some(delta.snapshot().map_err(err)?),
            delta.log_store(),
            operation,
        )
        .await
        .map_err(err)?;
    report.version = Some(finalized.version());
    delta.state = Some(finalized.snapshot());
    report.stages.commit += lap();
    Ok(report)
}

/// Rows of one commit, sorted and in one batch: the work [`commit`] does off the runtime.
struct Prepared {
    /// The batch of the rows to write, `None` when there are none.
    batch: Option<RecordBatch>,
    /// The rows of each day, as ranges of the batch.
    days: Vec<std::ops::Range<usize>>,
    /// How many rows the batch holds.
    rows: usize,
    /// Rows left out because the table already held them.
    already_stored: usize,
    /// Newest row time in the batch, in microseconds.
    watermark_micros: Option<i64>,
    /// Time spent sorting.
    sort: Duration,
    /// Time spent building the batch.
    build: Duration,
}

impl Prepared {
    /// The rows of every span (`held[i]`) from its table position (`keep_from[i]`) on, sorted
    /// ([`rows::sort`]) and built into one batch.
    fn new(table: Table, held: &[Vec<(Meta, Row)>], keep_from: &[i64]) -> Result<Self, ArrowError> {
        let started = Instant::now();
        let mut rows: Vec<&(Meta, Row)> = Vec::new();
        let mut already_stored = 0;
        for (span_rows, &keep_from) in held.iter().zip(keep_from) {
            for entry in span_rows {
                if entry.0.offset >= keep_from {
                    rows.push(entry);
                } else {
                    already_stored += 1;
                }
            }
        }
        rows::sort(&mut rows);
        let sort = started.elapsed();
        let watermark_micros = rows.iter().map(|(_, row)| row.time_micros()).max();
        let batch = if rows.is_empty() {
            None
        } else {
            Some(rows::to_batch(table, &rows)?)
        };
        Ok(Self {
            batch,
            days: day_runs(&rows),
            rows: rows.len(),
            already_stored,
            watermark_micros,
            sort,
            build: started.elapsed() - sort,
        })
    }
}

/// The runs of rows of one day, in order, of rows sorted by day ([`rows::sort`]).
fn day_runs(rows: &[&(Meta, Row)]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut last = None;
    for (at, (_, row)) in rows.iter().enumerate() {
        let day = rows::day(row.time_micros());
        match runs.last_mut() {
            Some(run) if last == Some(day) => run.end = at + 1,
            _ => runs.push(at..at + 1),
        }
        last = Some(day);
    }
    runs
}

/// Ids of the rows of `table` whose Kafka timestamp is at or after `since_micros`, with where
/// they came from: `(id, partition, offset, kafka_micros)`, oldest first. Empty for a table
/// without an id column.
pub async fn recent_ids(
    delta: &DeltaTable,
    table: Table,
    since_micros: i64,
) -> Result<Vec<(String, i32, i64, i64)>, TableError> {
    use deltalake::arrow::array::{Array as _, Int32Array, Int64Array, StringArray};
    use deltalake::arrow::compute::cast;
    use deltalake::arrow::datatypes::DataType;
    use deltalake::datafusion::prelude::SessionContext;

    let Some(id_column) = table.id_column() else {
        return Ok(Vec::new());
    };
    let err = |source| TableError::Delta {
        table: table.name(),
        source,
    };
    let query = |e: deltalake::datafusion::error::DataFusionError| {
        err(DeltaTableError::Generic(format!("reading recent ids: {e}")))
    };
    let context = SessionContext::new();
    delta
        .update_datafusion_session(&context.state())
        .map_err(err)?;
    let provider = delta.table_provider().await.map_err(query)?;
    context.register_table("t", provider).map_err(query)?;
    // Column names are constants; the number is formatted here. Nothing from input is in it.
    let sql = format!(
        "SELECT {id_column}, {partition}, {offset}, CAST({timestamp} AS BIGINT) AS ts FROM t \
         WHERE {timestamp} >= to_timestamp_micros({since_micros}) ORDER BY ts",
        partition = column::KAFKA_PARTITION,
        offset = column::KAFKA_OFFSET,
        timestamp = column::KAFKA_TIMESTAMP,
    );
    let batches = context
        .sql(&sql)
        .await
        .map_err(query)?
        .collect()
        .await
        .map_err(query)?;
    let mut ids = Vec::new();
    for batch in batches {
        let arrow = |e| TableError::Arrow {
            table: table.name(),
            source: e,
        };
        let id = cast(batch.column(0), &DataType::Utf8).map_err(arrow)?;
        let (Some(id), Some(partition), Some(offset), Some(ts)) = (
            id.as_any().downcast_ref::<StringArray>(),
            batch.column(1).as_any().downcast_ref::<Int32Array>(),
            batch.column(2).as_any().downcast_ref::<Int64Array>(),
            batch.column(3).as_any().downcast_ref::<Int64Array>(),
        ) else {
            return Err(err(DeltaTableError::Generic(
                "recent ids: unexpected column types".into(),
            )));
        };
        for row in 0..batch.num_rows() {
            if id.is_valid(row) {
                ids.push((
                    id.value(row).to_owned(),
                    partition.value(row),
                    offset.value(row),
                    ts.value(row),
                ));
            }
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of three days, interleaved in offset order, are committed as one file per day's
    /// partition, each holding only its day's rows, sorted by target then time.
    #[test]
    fn a_commit_writes_each_day_to_its_own_partition_sorted_by_target() {
        use candor_records::proto::OutcomeEvent;
        use candor_records::tables::Arrival;
        use deltalake::arrow::array::{Array as _, StringArray, TimestampMicrosecondArray};
        use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        let root = std::env::temp_dir().join(format!(
            "candor-day-runs-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after the epoch")
                .as_nanos()
        ));
        let day = 86_400_000_000_i64;
        let start = 20_000 * day + 3_600_000_000;
        let rows: Vec<(Meta, Row)> = (0..90_i64)
            .map(|i| {
                let time = start + (i % 3) * day + (89 - i) * 1_000_000;
                let meta = Meta {
                    partition: 0,
                    offset: i,
                    kafka_micros: start + 3 * day,
                    arrival: Arrival::OnTime,
                };
                let event = OutcomeEvent {
                    schema_version: 1,
                    event_id: format!("{i:032x}"),
                    event_time_unix_nano: u64::try_from(time).expect("positive") * 1000,
                    tool_target: format!("target-{}", (i * 7) % 5),
                    outcome_class: "access_failure".into(),
                    failure_kind: "timeout".into(),
                    retry_action: "retry".into(),
                    ..Default::default()
                };
                (meta, Row::Event(rows::Event::from_record(&event)))
            })
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let report = runtime.block_on(async {
            let root = root.to_str().expect("a UTF-8 path");
            let mut delta = open_or_create(root, Table::OutcomeEvents)
                .await
                .expect("table");
            let mut spans = BTreeMap::from([(
                (Table::OutcomeEvents, 0),
                Span {
                    from: 0,
                    to: 90,
                    rows,
                },
            )]);
            let properties = writer_properties(
                Table::OutcomeEvents,
                FileSettings {
                    row_group_rows: 1024,
                    zstd_level: 1,
                },
            );
            commit(
                &mut delta,
                Table::OutcomeEvents,
                &mut spans,
                &properties,
                HashMap::new(),
            )
            .await
            .expect("commit")
        });
        assert_eq!((report.rows, report.files), (90, 3));

        let mut days = Vec::new();
        for partition in std::fs::read_dir(root.join(Table::OutcomeEvents.name())).expect("dir") {
            let partition = partition.expect("entry").path();
            let name = partition.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let Some(date) = name.strip_prefix("date=") else {
                continue;
            };
            let files: Vec<_> = std::fs::read_dir(&partition)
                .expect("partition")
                .map(|f| f.expect("file").path())
                .collect();
            assert_eq!(files.len(), 1, "{date}: {files:?}");
            let file = std::fs::File::open(&files[0]).expect("open");
            let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                .expect("parquet")
                .build()
                .expect("reader");
            let mut keys = Vec::new();
            for batch in reader {
                let batch = batch.expect("batch");
                let column = |name: &str| batch.column_by_name(name).expect(name).clone();
                let targets = column(column::TOOL_TARGET);
                let targets = targets
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect("text");
                let times = column(column::EVENT_TIME);
                let times = times
                    .as_any()
                    .downcast_ref::<TimestampMicrosecondArray>()
                    .expect("time");
                for i in 0..batch.num_rows() {
                    keys.push((targets.value(i).to_owned(), times.value(i)));
                }
            }
            let file_days: Vec<i32> = keys.iter().map(|(_, time)| rows::day(*time)).collect();
            assert!(file_days.iter().all(|d| *d == file_days[0]), "{date}");
            let expected = chrono::DateTime::from_timestamp_micros(keys[0].1)
                .expect("a time")
                .format("%Y-%m-%d")
                .to_string();
            assert_eq!(date, expected);
            assert!(keys.is_sorted(), "{date}: not sorted by target, time");
            days.push((date.to_owned(), keys.len()));
        }
        days.sort();
        let counts: Vec<usize> = days.iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, [30, 30, 30], "{days:?}");
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn rising_integers_are_written_as_deltas_and_vocabularies_with_dictionaries() {
        use candor_records::proto::OutcomeEvent;
        use candor_records::tables::Arrival;
        use deltalake::parquet::arrow::ArrowWriter;
        use deltalake::parquet::file::reader::{FileReader as _, SerializedFileReader};

        let start = 1_700_000_000_000_000_i64;
        let rows: Vec<(Meta, Row)> = (0..1000_i64)
            .map(|i| {
                let meta = Meta {
                    partition: 0,
                    offset: i,
                    kafka_micros: start + i * 1000,
                    arrival: Arrival::OnTime,
                };
                let nanos = u64::try_from(start + i * 997).expect("positive") * 1000;
                let event = OutcomeEvent {
                    schema_version: 1,
                    event_id: format!("{i:032x}"),
                    event_time_unix_nano: nanos,
                    received_time_unix_nano: nanos + 5_000_000,
                    outcome_class: "access_failure".into(),
                    failure_kind: "timeout".into(),
                    retry_action: "retry".into(),
                    ..Default::default()
                };
                (meta, Row::Event(rows::Event::from_record(&event)))
            })
            .collect();
        let refs: Vec<&(Meta, Row)> = rows.iter().collect();
        let batch = rows::to_batch(Table::OutcomeEvents, &refs).expect("batch");
        let settings = FileSettings {
            row_group_rows: 128 * 1024,
            zstd_level: 1,
        };
        let properties = writer_properties(Table::OutcomeEvents, settings);
        let mut file = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut file, batch.schema(), Some(properties)).expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
        let reader = SerializedFileReader::new(bytes::Bytes::from(file)).expect("read back");
        let group = reader.metadata().row_group(0);
        let chunk = |name: &str| {
            (0..group.num_columns())
                .map(|i| group.column(i))
                .find(|chunk| chunk.column_path().string() == name)
                .unwrap_or_else(|| panic!("no column {name}"))
        };
        for name in Table::OutcomeEvents.delta_columns() {
            let chunk = chunk(name);
            assert!(
                chunk
                    .encodings()
                    .any(|encoding| encoding == Encoding::DELTA_BINARY_PACKED),
                "{name} is not stored as deltas"
            );
            assert_eq!(
                chunk.dictionary_page_offset(),
                None,
                "{name} has a dictionary"
            );
        }
        assert!(
            chunk(column::OUTCOME_CLASS)
                .dictionary_page_offset()
                .is_some()
        );
    }

    #[test]
    fn every_lookup_column_gets_its_bloom_filter_at_its_own_false_positive_rate() {
        let settings = FileSettings {
            row_group_rows: 128 * 1024,
            zstd_level: 1,
        };
        let properties = writer_properties(Table::OutcomeEvents, settings);
        let fpp = |name: &str| {
            properties
                .bloom_filter_properties(&ColumnPath::from(name))
                .map(|bloom| bloom.fpp())
        };
        assert_eq!(fpp(column::TRACE_ID), Some(0.005));
        assert_eq!(fpp(column::TOOL_TARGET), Some(0.05));
        assert_eq!(
            fpp(column::SPAN_ID),
            None,
            "no filter where none is asked for"
        );
    }

    /// Creates `table` as a compactor that knew none of its added columns made it, holding
    /// `old`; opens it with this build (which adds them) and commits `new`; then reads `columns`
    /// of both rows as text, ordered by the first. Returns the table's column names and the rows.
    fn evolve_and_read(
        table: Table,
        old: (Meta, Row),
        new: (Meta, Row),
        columns: &[&str],
    ) -> (Vec<String>, Vec<Vec<Option<String>>>) {
        use deltalake::arrow::array::{Array as _, StringArray};
        use deltalake::arrow::compute::cast;
        use deltalake::arrow::datatypes::DataType;
        use deltalake::datafusion::prelude::SessionContext;

        let root = std::env::temp_dir().join(format!(
            "candor-added-columns-{}-{}-{}",
            table.name(),
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after the epoch")
                .as_nanos()
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let read = runtime.block_on(async {
            let root = root.to_str().expect("a UTF-8 path");
            create_before_added_columns(root, table, &[&old])
                .await
                .expect("old table");
            // Opened by this build: the columns are added, then a row with them is committed.
            let mut delta = open_or_create(root, table).await.expect("evolved");
            let mut spans = BTreeMap::from([(
                (table, 0),
                Span {
                    from: 0,
                    to: 2,
                    rows: vec![new],
                },
            )]);
            let properties = writer_properties(
                table,
                FileSettings {
                    row_group_rows: 1024,
                    zstd_level: 1,
                },
            );
            commit(&mut delta, table, &mut spans, &properties, HashMap::new())
                .await
                .expect("commit");
            // Opening it again adds nothing.
            let version = delta.version();
            let again = open_or_create(root, table).await.expect("reopened");
            assert_eq!(again.version(), version, "no second schema change");

            let fields: Vec<String> = again
                .snapshot()
                .expect("snapshot")
                .schema()
                .fields()
                .map(|field| field.name().clone())
                .collect();
            let context = SessionContext::new();
            let provider = again.table_provider().await.expect("provider");
            context.register_table("t", provider).expect("register");
            let batches = context
                .sql(&format!(
                    "SELECT {} FROM t ORDER BY {}",
                    columns.join(", "),
                    columns[0]
                ))
                .await
                .expect("query")
                .collect()
                .await
                .expect("rows");
            let mut rows = Vec::new();
            for batch in &batches {
                let texts: Vec<_> = (0..columns.len())
                    .map(|i| cast(batch.column(i), &DataType::Utf8).expect("text"))
                    .collect();
                for i in 0..batch.num_rows() {
                    rows.push(
                        texts
                            .iter()
                            .map(|array| {
                                let text = array
                                    .as_any()
                                    .downcast_ref::<StringArray>()
                                    .expect("strings");
                                (!text.is_null(i)).then(|| text.value(i).to_owned())
                            })
                            .collect(),
                    );
                }
            }
            (fields, rows)
        });
        std::fs::remove_dir_all(&root).expect("clean up");
        read
    }

    fn text(value: &str) -> Option<String> {
        Some(value.to_owned())
    }

    /// A table written before a column was added gains it when opened: old rows read as null,
    /// new rows carry their value, and the table's schema ends with the added column.
    #[test]
    fn a_table_without_an_added_column_gains_it_and_its_old_rows_read_as_null() {
        use candor_records::proto::OutcomeCount;
        use candor_records::tables::Arrival;

        let row = |offset: i64, point_id: &str, interval: Option<u64>| {
            let meta = Meta {
                partition: 0,
                offset,
                kafka_micros: 1_700_000_000_000_000,
                arrival: Arrival::OnTime,
            };
            let count = OutcomeCount {
                schema_version: 1,
                point_id: point_id.into(),
                service_name: "shop".into(),
                tool_target: "https://search.example".into(),
                outcome_class: "success".into(),
                time_unix_nano: 1_700_000_000_000_000_000,
                temporality: 2,
                export_interval_ms: interval,
                source: interval.map(|_| "genai".to_owned()),
                convention: interval.map(|_| "openinference".to_owned()),
                sampling: interval.map(|_| "weighted".to_owned()),
                ..Default::default()
            };
            (meta, Row::Count(Box::new(count)))
        };
        let (fields, values) = evolve_and_read(
            Table::OutcomeCounts,
            row(0, "old", None),
            row(1, "new", Some(10_000)),
            &[
                column::POINT_ID,
                column::EXPORT_INTERVAL_MS,
                column::SOURCE,
                column::CONVENTION,
                column::SAMPLING,
            ],
        );
        assert_eq!(
            fields[fields.len() - 4..],
            [
                column::EXPORT_INTERVAL_MS,
                column::SOURCE,
                column::CONVENTION,
                column::SAMPLING
            ],
            "{fields:?}"
        );
        assert_eq!(
            values,
            [
                vec![
                    text("new"),
                    text("10000"),
                    text("genai"),
                    text("openinference"),
                    text("weighted")
                ],
                vec![text("old"), None, None, None, None]
            ]
        );
    }

    /// `operation_events` written before the resource columns gains them when opened: the old
    /// row reads as null, an operation that named its resource carries it.
    #[test]
    fn operation_events_gain_the_resource_columns_and_old_rows_read_as_null() {
        use candor_records::proto::OperationEvent;
        use candor_records::tables::Arrival;

        let row = |offset: i64, id: &str, resource: Option<(&str, &str)>| {
            let meta = Meta {
                partition: 0,
                offset,
                kafka_micros: 1_700_000_000_000_000,
                arrival: Arrival::OnTime,
            };
            let event = OperationEvent {
                schema_version: 1,
                event_id: format!("{id}-completed"),
                event_time_unix_nano: 1_700_000_000_000_000_000,
                service_name: "reporting".into(),
                tool_name: "export".into(),
                tool_target: "https://exports.example".into(),
                operation_id: id.into(),
                lifecycle_state: "completed".into(),
                evidence_kind: Some("query".into()),
                evidence_value: Some(format!("GET /operations/{id}")),
                resource_id: resource.map(|(id, _)| id.to_owned()),
                resource_version: resource.map(|(_, version)| version.to_owned()),
                source_system: "exports.example".into(),
                adapter: "candor-adapter/0.1.0".into(),
                ..Default::default()
            };
            (meta, Row::Operation(Box::new(event)))
        };
        let (fields, values) = evolve_and_read(
            Table::OperationEvents,
            row(0, "old", None),
            row(1, "new", Some(("/exports/e-7", "\"v7\""))),
            &[
                column::OPERATION_ID,
                column::RESOURCE_ID,
                column::RESOURCE_VERSION,
            ],
        );
        assert_eq!(
            fields[fields.len() - 2..],
            [column::RESOURCE_ID, column::RESOURCE_VERSION],
            "{fields:?}"
        );
        assert_eq!(
            values,
            [
                vec![text("new"), text("/exports/e-7"), text("\"v7\"")],
                vec![text("old"), None, None]
            ]
        );
    }
}
