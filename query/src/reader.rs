//! The read path: every table, plus its Kafka tail, registered in one DataFusion session under the
//! table's name, with a [`SourceReport`] for each source.
//!
//! Opening never fails as a whole: a source that cannot be read is recorded as such, and the
//! answer's [`Coverage`] says so. The tail starts at each table's stored position, so it holds
//! only records the table does not; a client's retried copy that reached both is removed from the
//! tail by its id, as the compactor would have removed it.

use std::collections::BTreeMap;
use std::sync::Arc;

use candor_records::proto::OutcomeSource;
use candor_records::rows::{self, Meta, Row};
use candor_records::tables::{Table, column};
use deltalake::arrow::array::{Array as _, RecordBatch, TimestampMicrosecondArray};
use deltalake::arrow::compute::cast;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::datasource::MemTable;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::prelude::{DataFrame, Expr, SessionConfig, SessionContext, col, lit};
use deltalake::datafusion::scalar::ScalarValue;

use crate::coverage::{
    Coverage, Heartbeat, SourceReport, SourceState, before_first_heartbeat, silences,
};
use crate::store::{FileSpan, OpenTable, Provider, StoreError, TableRoot, spanning};
use crate::tail::{TailSettings, TopicTail};
use crate::window::{Micros, Window, micros_of, now};

mod exports;
mod tail_join;

use tail_join::{dedupe_within, read_tail, tail_detail};

/// What to read.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Where the tables are.
    pub root: TableRoot,
    /// The Kafka tail to read as well; `None` with `--live` off.
    pub tail: Option<TailSettings>,
    /// The tables the question needs. The heartbeats are always read: they are the clock of
    /// the coverage.
    pub tables: Vec<Table>,
}

/// A DataFusion failure, with the statement's problem in its words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(#[from] pub DataFusionError);

/// The opened sources.
pub struct Reader {
    /// The session, with each table registered under its name.
    pub context: SessionContext,
    sources: Vec<SourceReport>,
    heartbeat: Option<Heartbeat>,
    now: Micros,
    /// Per table whose rows' times are known: the oldest and newest time of every row it holds
    /// (the table's and the tail's), or `None` when it holds none.
    spans: BTreeMap<Table, Option<(Micros, Micros)>>,
    /// Per opened table: what [`Reader::window_frame`] reads it from.
    windowed: BTreeMap<Table, WindowSource>,
    /// How long a client's retried copy can trail the original (the compactor's dedupe
    /// window); tail rows are checked against table rows this far back.
    dedupe_window: Micros,
}

/// An opened table and the tail rows joined to it, kept apart so that a question over a window
/// can read only the table's files that overlap it.
struct WindowSource {
    open: OpenTable,
    /// The table as registered (before its tail rows are joined).
    provider: Provider,
    /// The table's files with the spans of its time column, worked out once at open; `None`
    /// when the file list could not be read.
    files: Option<Vec<FileSpan>>,
    /// The tail rows the table does not hold, when there are any.
    tail: Option<Arc<dyn TableProvider>>,
}

/// The session settings: Parquet filter pushdown on, so that bloom filters, page indexes and
/// row-group statistics prune what a question does not need.
pub fn session() -> SessionContext {
    let mut config = SessionConfig::new().with_information_schema(true);
    let parquet = &mut config.options_mut().execution.parquet;
    parquet.pushdown_filters = true;
    parquet.reorder_filters = true;
    parquet.bloom_filter_on_read = true;
    parquet.enable_page_index = true;
    SessionContext::new_with_config(config)
}

/// The rows of one table read from the Kafka tails, with what reading them found.
#[derive(Debug, Default)]
struct TailPart {
    rows: Vec<(Meta, Row)>,
    /// The tail of the table's own topic, when it was read.
    own: Option<TopicTail>,
}

impl Reader {
    /// Opens the tables and reads the tail.
    pub async fn open(options: ReadOptions) -> Self {
        let context = session();
        let now = now();
        let mut tables = options.tables.clone();
        let heartbeats_needed = tables.contains(&Table::Heartbeats);
        if !heartbeats_needed {
            tables.push(Table::Heartbeats);
        }
        tables.sort();
        let mut reader = Self {
            context,
            sources: Vec::new(),
            heartbeat: None,
            now,
            spans: BTreeMap::new(),
            windowed: BTreeMap::new(),
            dedupe_window: micros_of(
                options
                    .tail
                    .as_ref()
                    .map_or(candor_records::ids::DEDUPE_WINDOW, |tail| {
                        tail.dedupe_window
                    }),
            ),
        };
        if let Err(err) = options.root.check() {
            for &table in &tables {
                reader.sources.push(SourceReport::unreachable(
                    table_source(table),
                    err.to_string(),
                ));
                if options.tail.is_some() {
                    reader.sources.push(skipped(
                        table,
                        "without the table its start offsets are unknown",
                    ));
                }
                // An empty table keeps SQL over it valid; the coverage says it was not read.
                reader.register_empty(table);
            }
            reader.mark_needed(heartbeats_needed);
            return reader;
        }
        let mut opened: BTreeMap<Table, OpenTable> = BTreeMap::new();
        let mut failed: BTreeMap<Table, StoreError> = BTreeMap::new();
        // The tables' logs are read at once: each open waits mostly on its own files.
        let root = &options.root;
        let opens = tables
            .iter()
            .map(|&table| async move { (table, OpenTable::open(root, table).await) });
        for (table, result) in futures_util::future::join_all(opens).await {
            match result {
                Ok(open) => {
                    opened.insert(table, open);
                }
                Err(err) => {
                    failed.insert(table, err);
                }
            }
        }
        // Only the tails of opened tables are read: without a table's position, where its tail
        // starts is unknown.
        let readable: Vec<Table> = opened.keys().copied().collect();
        let tails = match &options.tail {
            Some(settings) if !readable.is_empty() => {
                Some(read_tail(settings.clone(), &readable, &opened).await)
            }
            _ => None,
        };
        // A record that could not be decoded becomes a `rejected` row, wherever it was read.
        let mut parts: BTreeMap<Table, TailPart> = BTreeMap::new();
        if let Some(Ok(read)) = &tails {
            for (topic, tail) in read {
                let mut tail = tail.clone();
                for (meta, row) in std::mem::take(&mut tail.rows) {
                    parts.entry(row.table()).or_default().rows.push((meta, row));
                }
                parts.entry(*topic).or_default().own = Some(tail);
            }
        }
        for &table in &tables {
            let open = opened.get(&table);
            let part = parts.remove(&table).unwrap_or_default();
            reader
                .register(table, open, failed.remove(&table), part)
                .await;
            match (&options.tail, &tails) {
                (None, _) => reader.sources.push(skipped(table, "--live is off")),
                (Some(_), _) if open.is_none() => reader.sources.push(skipped(
                    table,
                    "without the table its start offsets are unknown",
                )),
                (Some(_), Some(Err(reason))) => reader.sources.push(SourceReport::unreachable(
                    kafka_source(table),
                    reason.clone(),
                )),
                _ => {}
            }
        }
        reader.mark_needed(heartbeats_needed);
        reader
    }

    /// Marks the heartbeat sources as read for the coverage clock only, unless asked about.
    fn mark_needed(&mut self, heartbeats_needed: bool) {
        let names = [
            table_source(Table::Heartbeats),
            kafka_source(Table::Heartbeats),
        ];
        for source in &mut self.sources {
            if names.contains(&source.name) {
                source.needed = heartbeats_needed;
            }
        }
    }

    /// The coverage of an answer over `window`, with the silences of the heartbeats (table and
    /// tail) inside it and the stretch of it before the first of them.
    pub async fn coverage(&self, window: Option<Window>) -> Coverage {
        let mut coverage = Coverage::new(window, self.sources.clone(), self.heartbeat, self.now);
        if let Some(window) = window {
            match self.heartbeats_around(window).await {
                Ok(beats) => {
                    coverage.silences = silences(&beats, window);
                    coverage.before_first_heartbeat = before_first_heartbeat(&beats, window);
                }
                Err(err) => coverage.notes.push(format!(
                    "the heartbeats inside the window could not be read, so silences in it and \
                     a start before the first heartbeat were not looked for: {err}"
                )),
            }
        }
        coverage
    }

    /// `(time, interval)` of every heartbeat from a little before `window` to its end, by time.
    async fn heartbeats_around(
        &self,
        window: Window,
    ) -> Result<Vec<(Micros, Micros)>, DataFusionError> {
        // The heartbeat before the window decides whether its start was silent; collectors
        // promise at most an hour between heartbeats here.
        let before = window.since.saturating_sub(3 * 3_600_000_000);
        let at = |micros| ScalarValue::TimestampMicrosecond(Some(micros), Some("UTC".into()));
        let time = col(column::TIME);
        let beats = collectors_beats(self.context.table(Table::Heartbeats.name()).await?)?;
        let batches = beats
            .filter(
                time.clone()
                    .gt_eq(lit(at(before)))
                    .and(time.clone().lt(lit(at(window.until)))),
            )?
            .sort(vec![time.clone().sort(true, false)])?
            .select(vec![time, col(column::INTERVAL_MS)])?
            .collect()
            .await?;
        let mut beats = Vec::new();
        for batch in &batches {
            let times = cast(
                batch.column(0),
                &deltalake::arrow::datatypes::DataType::Timestamp(
                    deltalake::arrow::datatypes::TimeUnit::Microsecond,
                    None,
                ),
            )?;
            let intervals = cast(
                batch.column(1),
                &deltalake::arrow::datatypes::DataType::Int64,
            )?;
            let (Some(times), Some(intervals)) = (
                times.as_any().downcast_ref::<TimestampMicrosecondArray>(),
                intervals
                    .as_any()
                    .downcast_ref::<deltalake::arrow::array::Int64Array>(),
            ) else {
                return Err(DataFusionError::Internal(
                    "unexpected heartbeat column types".into(),
                ));
            };
            for row in 0..batch.num_rows() {
                beats.push((times.value(row), intervals.value(row).saturating_mul(1000)));
            }
        }
        Ok(beats)
    }

    /// Whether every row registered for `table` is known to have its time column in
    /// [`since`, `until`): then a filter on that time would keep every row, and a question may
    /// leave it out rather than read the column. False when any source's span is unknown.
    pub fn holds_only(&self, table: Table, since: Micros, until: Micros) -> bool {
        match self.spans.get(&table) {
            Some(Some((oldest, newest))) => *oldest >= since && *newest < until,
            // Nothing registered at all: no row lies outside.
            Some(None) => true,
            None => false,
        }
    }

    /// The rows of `table` that may have its time in [`since`, `until`): the table's files whose
    /// statistics overlap the window, and the tail rows joined to it. Rows outside the window
    /// remain, and the caller checks each row's time; no predicate reaches the Parquet scan.
    ///
    /// A time predicate pushed into the scan turns into a row filter (the Delta provider always
    /// applies one), which cost several times more than reading the columns whole: the files
    /// keep rows sorted by target, so a window selects a slice of every target's run.
    pub async fn window_frame(
        &self,
        table: Table,
        since: Micros,
        until: Micros,
    ) -> Result<DataFrame, DataFusionError> {
        let Some(source) = self.windowed.get(&table) else {
            return self.context.table(table.name()).await;
        };
        let Some(files) = &source.files else {
            return self.context.table(table.name()).await;
        };
        let provider: Arc<dyn TableProvider> = match &source.provider {
            Provider::Files(all) => Arc::new(all.overlapping(since, until)),
            Provider::Delta(_) => {
                let overlapping = files
                    .iter()
                    .filter(|file| file.may_overlap(since, until))
                    .map(|file| file.path.clone())
                    .collect();
                source
                    .open
                    .provider_over(overlapping)
                    .await
                    .map_err(|err| DataFusionError::External(Box::new(err)))?
            }
        };
        let frame = self.context.read_table(provider)?;
        match &source.tail {
            Some(tail) => frame.union(self.context.read_table(tail.clone())?),
            None => Ok(frame),
        }
    }

    /// When the reader was opened.
    pub fn now(&self) -> Micros {
        self.now
    }

    /// Registers `table` as its table unioned with its tail rows, and records both sources.
    async fn register(
        &mut self,
        table: Table,
        open: Option<&OpenTable>,
        failure: Option<StoreError>,
        part: TailPart,
    ) {
        let table_provider = match open {
            Some(open) => match open.provider(&self.context).await {
                Ok(provider) => Some((open, provider)),
                Err(err) => {
                    self.sources.push(SourceReport::unreachable(
                        table_source(table),
                        err.to_string(),
                    ));
                    None
                }
            },
            None => {
                let reason = failure.map_or_else(|| "not opened".to_owned(), |err| err.to_string());
                self.sources
                    .push(SourceReport::unreachable(table_source(table), reason));
                None
            }
        };
        let registered = table_provider
            .as_ref()
            .map(|(_, provider)| provider.clone());
        let table_provider = table_provider.map(|(open, provider)| (open, provider.table()));
        // Without a table, no table rows are registered; without statistics, their span is unknown.
        let files = table_provider
            .as_ref()
            .and_then(|(open, _)| open.file_spans(table.time_column()));
        let table_span = match (&table_provider, &files) {
            (Some(_), Some(files)) => spanning(files),
            (Some(_), None) => None,
            (None, _) => Some(None),
        };
        if let Some((open, provider)) = &table_provider {
            let newest_from_log = table_span.map(|span| span.map(|(_, newest)| newest));
            let mut report = self
                .table_report(table, open, provider.clone(), newest_from_log)
                .await;
            if let Some(own) = &part.own {
                let positions: Vec<String> = own
                    .ranges
                    .iter()
                    .map(|range| format!("p{}={}", range.partition, range.start))
                    .collect();
                report
                    .detail
                    .push_str(&format!(", positions {}", positions.join(" ")));
            }
            self.sources.push(report);
        }
        if let (Some((open, _)), Some(provider)) = (&table_provider, registered) {
            let open = (*open).clone();
            self.windowed.insert(
                table,
                WindowSource {
                    open,
                    provider,
                    files,
                    tail: None,
                },
            );
        }
        let Some(own) = part.own else {
            if let Some(span) = table_span {
                self.spans.insert(table, span);
            }
            self.register_provider(table, table_provider.map(|(_, provider)| provider));
            return;
        };
        let mut rows = part.rows;
        let mut problems = own.problems.clone();
        let mut removed = dedupe_within(&mut rows);
        if let Some((_, provider)) = &table_provider {
            match self
                .dedupe_against(table, provider.clone(), &mut rows)
                .await
            {
                Ok(count) => removed += count,
                Err(err) => problems.push(format!(
                    "copies the table already holds could not be looked up, so some rows may be \
                     counted twice: {err}"
                )),
            }
        }
        for (_, row) in &rows {
            if let Row::Heartbeat(beat) = row
                && !beat.is_senders()
            {
                self.offer_heartbeat(Some(Heartbeat {
                    at: row.time_micros(),
                    interval: i64::try_from(beat.interval_ms)
                        .unwrap_or(i64::MAX)
                        .saturating_mul(1000),
                    from_tail: true,
                }));
            }
        }
        let newest = rows.iter().map(|(_, row)| row.time_micros()).max();
        let oldest = rows.iter().map(|(_, row)| row.time_micros()).min();
        let tail_span = oldest.zip(newest);
        if let Some(table_span) = table_span {
            let span = match (table_span, tail_span) {
                (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
                (span, None) | (None, span) => span,
            };
            self.spans.insert(table, span);
        }
        let count = u64::try_from(rows.len()).unwrap_or(u64::MAX);
        let mut report = SourceReport::read(
            kafka_source(table),
            newest,
            Some(count),
            tail_detail(&own, removed),
        );
        let mut provider = table_provider.map(|(_, provider)| provider);
        if !rows.is_empty() {
            let refs: Vec<&(Meta, Row)> = rows.iter().collect();
            let joined = match rows::to_batch(table, &refs) {
                Ok(batch) => self
                    .union(provider.clone(), batch)
                    .await
                    .map_err(|err| err.to_string()),
                Err(err) => Err(err.to_string()),
            };
            match joined {
                Ok((view, tail)) => {
                    provider = Some(view);
                    if let Some(source) = self.windowed.get_mut(&table) {
                        source.tail = Some(tail);
                    }
                }
                Err(err) => {
                    report.state = SourceState::Unreachable {
                        reason: format!("its rows could not be joined to the table: {err}"),
                    };
                    report.rows = None;
                }
            }
        }
        if !problems.is_empty() && report.state == SourceState::Read {
            report.state = SourceState::Incomplete {
                reason: problems.join("; "),
            };
        }
        self.sources.push(report);
        self.register_provider(table, provider);
    }

    fn register_provider(&mut self, table: Table, provider: Option<Arc<dyn TableProvider>>) {
        let provider = provider.unwrap_or_else(|| empty_table(table));
        // Each name is registered once per session, so nothing is replaced.
        let _previous = self.context.register_table(table.name(), provider);
    }

    fn register_empty(&mut self, table: Table) {
        self.register_provider(table, None);
    }

    /// The report of a table read: its newest time (`from_log`, the Delta log's statistics, as
    /// [`OpenTable::span_from_log`] gives it), its row count and version.
    async fn table_report(
        &mut self,
        table: Table,
        open: &OpenTable,
        provider: Arc<dyn TableProvider>,
        from_log: Option<Option<Micros>>,
    ) -> SourceReport {
        let time = table.time_column();
        // The Delta log's per-file statistics answer without reading a file; a scan is the
        // fallback for files written without them.
        let newest = match from_log {
            Some(newest) => Ok(newest),
            None => self.newest(provider.clone(), time).await,
        };
        let newest = match newest {
            Ok(newest) => newest,
            Err(err) => {
                return SourceReport::unreachable(
                    table_source(table),
                    format!("its newest {time} could not be read: {err}"),
                );
            }
        };
        if table == Table::Heartbeats {
            match self.newest_heartbeat(provider).await {
                Ok(beat) => self.offer_heartbeat(beat),
                Err(err) => {
                    return SourceReport::unreachable(
                        table_source(table),
                        format!("its newest heartbeat could not be read: {err}"),
                    );
                }
            }
        }
        let detail = format!(
            "version {}",
            open.version()
                .map_or_else(|| "none".into(), |v| v.to_string())
        );
        SourceReport::read(table_source(table), newest, self.count(open), detail)
    }

    /// The rows the table holds, from the Delta log's per-file counts; `None` when a file has no
    /// count.
    fn count(&self, open: &OpenTable) -> Option<u64> {
        let snapshot = open.delta.snapshot().ok()?;
        let files = snapshot.log_data();
        let mut rows = 0u64;
        for file in files.iter() {
            rows += u64::try_from(file.num_records()?).ok()?;
        }
        Some(rows)
    }

    async fn newest(
        &self,
        provider: Arc<dyn TableProvider>,
        time: &str,
    ) -> Result<Option<Micros>, DataFusionError> {
        use deltalake::datafusion::functions_aggregate::expr_fn::max;
        let batches = self
            .context
            .read_table(provider)?
            .aggregate(vec![], vec![max(col(time)).alias("newest")])?
            .collect()
            .await?;
        Ok(first_micros(&batches, 0))
    }

    async fn newest_heartbeat(
        &self,
        provider: Arc<dyn TableProvider>,
    ) -> Result<Option<Heartbeat>, DataFusionError> {
        let batches = collectors_beats(self.context.read_table(provider)?)?
            .sort(vec![col(column::TIME).sort(false, false)])?
            .limit(0, Some(1))?
            .select(vec![col(column::TIME), col(column::INTERVAL_MS)])?
            .collect()
            .await?;
        let at = first_micros(&batches, 0);
        let interval = batches.iter().find(|b| b.num_rows() > 0).and_then(|batch| {
            batch
                .column(1)
                .as_any()
                .downcast_ref::<deltalake::arrow::array::Int64Array>()
                .map(|ms| ms.value(0).saturating_mul(1000))
        });
        Ok(at.zip(interval).map(|(at, interval)| Heartbeat {
            at,
            interval,
            from_tail: false,
        }))
    }

    /// Keeps the newer of the known heartbeat and `beat`.
    fn offer_heartbeat(&mut self, beat: Option<Heartbeat>) {
        if let Some(beat) = beat
            && self.heartbeat.is_none_or(|known| beat.at > known.at)
        {
            self.heartbeat = Some(beat);
        }
    }
}

fn skipped(table: Table, reason: &str) -> SourceReport {
    SourceReport {
        state: SourceState::Skipped {
            reason: reason.to_owned(),
        },
        ..SourceReport::unreachable(kafka_source(table), "")
    }
}

fn empty_table(table: Table) -> Arc<dyn TableProvider> {
    let schema = table.schema();
    // An empty MemTable of a valid schema cannot fail to build.
    match MemTable::try_new(schema.clone(), vec![vec![]]) {
        Ok(mem) => Arc::new(mem),
        Err(_) => Arc::new(deltalake::datafusion::datasource::empty::EmptyTable::new(
            schema,
        )),
    }
}

fn first_micros(batches: &[RecordBatch], column: usize) -> Option<Micros> {
    let batch = batches.iter().find(|batch| batch.num_rows() > 0)?;
    let array = cast(
        batch.column(column),
        &deltalake::arrow::datatypes::DataType::Timestamp(
            deltalake::arrow::datatypes::TimeUnit::Microsecond,
            None,
        ),
    )
    .ok()?;
    let times = array.as_any().downcast_ref::<TimestampMicrosecondArray>()?;
    times.is_valid(0).then(|| times.value(0))
}

/// The predicate that keeps an adapter's rows of `frame` (source `adapter`, or null: written
/// before sources were told apart); `None` when the table has no `source` column, whose rows are
/// all an adapter's.
pub(crate) fn declared_rows(frame: &DataFrame) -> Option<Expr> {
    frame
        .schema()
        .has_column_with_unqualified_name(column::SOURCE)
        .then(|| {
            let source = col(column::SOURCE);
            source
                .clone()
                .is_null()
                .or(source.eq(lit(OutcomeSource::Adapter.as_str())))
        })
}

/// The collectors' own heartbeats of a heartbeats frame, without the senders' heartbeats
/// beside them (a table written before those has only the collectors').
fn collectors_beats(frame: DataFrame) -> Result<DataFrame, DataFusionError> {
    if frame
        .schema()
        .has_column_with_unqualified_name(column::SERVICE_NAME)
    {
        frame.filter(col(column::SERVICE_NAME).is_null())
    } else {
        Ok(frame)
    }
}

/// The name of a table source in a coverage report.
pub fn table_source(table: Table) -> String {
    format!("table {}", table.name())
}

/// The name of a Kafka tail source in a coverage report.
pub fn kafka_source(table: Table) -> String {
    format!("kafka {}", table.topic())
}

#[cfg(test)]
mod tests {
    use candor_records::proto::OutcomeEvent;
    use candor_records::tables::Arrival;
    use deltalake::kernel::StructType;
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;

    use super::*;

    const HOUR: Micros = 3_600_000_000;

    /// A table of `outcome_events` under a fresh root, one file per hour given (10 events each).
    async fn table_of_hours(name: &str, hours: &[Micros]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("candor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let table = Table::OutcomeEvents;
        let location = root.join(table.name());
        std::fs::create_dir_all(&location).unwrap();
        let url = url::Url::from_directory_path(&location).unwrap();
        let schema: StructType = table.schema().as_ref().try_into_kernel().unwrap();
        let mut delta = deltalake::DeltaTableBuilder::from_url(url)
            .unwrap()
            .build()
            .unwrap()
            .create()
            .with_columns(schema.fields().cloned())
            .with_partition_columns([column::DATE])
            .await
            .unwrap();
        for &hour in hours {
            let rows: Vec<(Meta, Row)> = (0..10)
                .map(|n| {
                    let micros = hour + n * 60_000_000;
                    let event = OutcomeEvent {
                        schema_version: 1,
                        event_id: format!("{hour}-{n}"),
                        event_time_unix_nano: u64::try_from(micros * 1000).unwrap(),
                        outcome_class: "access_failure".into(),
                        tool_target: "t".into(),
                        retry_action: "give_up".into(),
                        ..OutcomeEvent::default()
                    };
                    let meta = Meta {
                        partition: 0,
                        offset: n,
                        kafka_micros: micros,
                        arrival: Arrival::OnTime,
                    };
                    (meta, Row::Event(rows::Event::from_record(&event)))
                })
                .collect();
            let refs: Vec<&(Meta, Row)> = rows.iter().collect();
            let batch = rows::to_batch(table, &refs).unwrap();
            delta = delta.write(vec![batch]).await.unwrap();
        }
        root
    }

    fn rows_of(batches: &[RecordBatch]) -> usize {
        batches.iter().map(RecordBatch::num_rows).sum()
    }

    #[tokio::test]
    async fn a_window_reads_only_the_files_whose_times_overlap_it() {
        // Three files, an hour apart, each of rows 0–9 minutes into its hour.
        let start = 1_764_547_200_000_000; // 2025-12-01T00:00:00Z
        let hours = [start, start + HOUR, start + 2 * HOUR];
        let root = table_of_hours("window-files", &hours).await;
        let reader = Reader::open(ReadOptions {
            root: TableRoot::new(root.to_string_lossy()),
            tail: None,
            tables: vec![Table::OutcomeEvents],
        })
        .await;
        let count = |since, until| {
            let reader = &reader;
            async move {
                let batches = reader
                    .window_frame(Table::OutcomeEvents, since, until)
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap();
                rows_of(&batches)
            }
        };
        // The middle hour only: its file, whole (rows are not filtered here).
        assert_eq!(count(start + HOUR, start + 2 * HOUR).await, 10);
        // A window touching the first file's last row and the second's first.
        assert_eq!(count(start + 9 * 60_000_000, start + HOUR + 1).await, 20);
        // Between files: none is read.
        assert_eq!(
            count(start + 30 * 60_000_000, start + 40 * 60_000_000).await,
            0
        );
        // Everything.
        assert_eq!(count(start, start + 3 * HOUR).await, 30);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The rows of `statement` as text, and the physical plan's files.
    async fn answer(context: &SessionContext, statement: &str) -> (String, Vec<String>) {
        let frame = context.sql(statement).await.unwrap();
        let plan = frame.clone().create_physical_plan().await.unwrap();
        let shown = deltalake::datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        let files = shown
            .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
            .filter(|word| word.contains(".parquet"))
            .map(|word| word.split(':').next().unwrap_or(word).to_owned())
            .collect();
        let batches = frame.collect().await.unwrap();
        let text = deltalake::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        (text, files)
    }

    #[tokio::test]
    async fn the_listed_files_answer_as_the_delta_provider_does_and_prune_by_day_and_time() {
        // Two files on the last hour of one day, one on the next day's first hour.
        let start = 1_764_547_200_000_000; // 2025-12-01T00:00:00Z
        let hours = [start - HOUR, start - HOUR + 600_000_000, start];
        let root = table_of_hours("listed-files", &hours).await;
        let open = OpenTable::open(
            &TableRoot::new(root.to_string_lossy()),
            Table::OutcomeEvents,
        )
        .await
        .unwrap();
        let files = session();
        let delta = session();
        let Provider::Files(listed) = open.provider(&files).await.unwrap() else {
            panic!("a reader-version-1 table is read as its files");
        };
        assert_eq!(listed.len(), 3);
        files.register_table("t", listed).unwrap();
        open.delta
            .update_datafusion_session(&delta.state())
            .unwrap();
        delta
            .register_table("t", open.delta.table_provider().await.unwrap())
            .unwrap();
        for (statement, expected_rows, expected_files) in [
            ("SELECT * FROM t ORDER BY event_id", 30, 3),
            (
                "SELECT event_id, date, event_time FROM t WHERE date = DATE '2025-12-01' \
                 ORDER BY event_id",
                10,
                1,
            ),
            (
                "SELECT event_id, tool_target FROM t WHERE date = DATE '2025-11-30' \
                 ORDER BY event_id",
                20,
                2,
            ),
            (
                "SELECT count(*) AS n FROM t WHERE event_time >= TIMESTAMP '2025-11-30T23:10:00Z'",
                1,
                2,
            ),
        ] {
            let (got, read) = answer(&files, statement).await;
            let (want, _) = answer(&delta, statement).await;
            assert_eq!(got, want, "{statement}");
            assert_eq!(got.lines().count(), expected_rows + 4, "{statement}\n{got}");
            assert_eq!(read.len(), expected_files, "{statement}: {read:?}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    /// How many files the session's metadata cache holds, and how many of them with their page
    /// index.
    fn cached_footers(context: &SessionContext) -> (usize, usize) {
        let entries = context
            .runtime_env()
            .cache_manager
            .get_file_metadata_cache()
            .list_entries();
        let indexed = entries
            .values()
            .filter(|entry| {
                entry.value.file_metadata.extra_info().get("page_index") == Some(&"true".to_owned())
            })
            .count();
        (entries.len(), indexed)
    }

    #[tokio::test]
    async fn a_filtering_question_keeps_its_files_page_indexes_for_the_next_one() {
        let start = 1_764_547_200_000_000; // 2025-12-01T00:00:00Z
        let root = table_of_hours("page-index", &[start, start + HOUR]).await;
        let reader = Reader::open(ReadOptions {
            root: TableRoot::new(root.to_string_lossy()),
            tail: None,
            tables: vec![Table::OutcomeEvents],
        })
        .await;
        let run = |statement: &'static str| {
            let reader = &reader;
            async move {
                reader
                    .context
                    .sql(statement)
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap()
            }
        };
        // Reading columns whole needs no page index, and none is loaded.
        run("SELECT count(tool_target) FROM outcome_events").await;
        assert_eq!(cached_footers(&reader.context), (2, 0));
        // A filter may prune pages: each file's index is loaded once and kept.
        let found =
            run("SELECT event_id FROM outcome_events WHERE event_id = '1764547200000000-3'").await;
        assert_eq!(rows_of(&found), 1);
        assert_eq!(cached_footers(&reader.context), (2, 2));
        let _ = std::fs::remove_dir_all(&root);
    }
}
