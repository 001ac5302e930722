//! The ready-made questions: `rates`, `spikes`, `incident`, `trace`, `reconcile`, and free
//! `sql`.
//!
//! Each builds its query with DataFusion's DataFrame API, so filter values from the command line
//! are literals, never SQL text. Each filters on the `date` partition column as well as on the
//! time column, so a question about one day reads only that day's files.

use std::collections::BTreeMap;
use std::time::Duration;

use candor_records::tables::{Table, column};
use candor_schema::{OutcomeClass, RetryAction};
use deltalake::arrow::array::{
    Array, Int64Array, MAX_INLINE_VIEW_LEN, RecordBatch, StringArray, StringViewArray, make_view,
};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::common::runtime::SpawnedTask;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::execution::context::SQLOptions;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::{DataFrame, Expr, col, lit};
use deltalake::datafusion::scalar::ScalarValue;
use serde_json::Value;

use crate::answer::Rows;
use crate::rates::{self, Buckets, ClassCounts, Point, SpikeRule};
use crate::reader::Reader;
use crate::reconcile::{self, CounterPoint, SeriesKey};
use crate::window::{Micros, Window, micros_of, rfc3339};
use candor_records::rows::day;

/// A question that could not be answered as asked.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The statement or a name in it is wrong: a usage error.
    #[error(
        "the SQL statement could not be run: {0}\n  the tables are outcome_events, \
         outcome_counts, rejected and heartbeats; `candor sql \"DESCRIBE outcome_events\"` lists \
         a table's columns"
    )]
    Sql(DataFusionError),
    /// The statement would change something; this reader only reads.
    #[error(
        "the SQL statement would create or change data ({0}); candor only reads: use SELECT, \
         DESCRIBE, SHOW or EXPLAIN"
    )]
    NotReadOnly(DataFusionError),
    /// Reading failed while the question ran.
    #[error("reading the tables failed: {0}")]
    Read(DataFusionError),
    /// An argument is malformed.
    #[error("{0}")]
    Usage(String),
}

impl CommandError {
    /// Whether the person asked wrongly (exit 2) rather than the read failing (exit 4).
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Sql(_) | Self::NotReadOnly(_) | Self::Usage(_))
    }
}

fn read(err: DataFusionError) -> CommandError {
    CommandError::Read(err)
}

/// Exact-match filters every ready-made command takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// `service_name`.
    pub service: Option<String>,
    /// `tool_name`.
    pub tool: Option<String>,
    /// `tool_target`.
    pub target: Option<String>,
}

impl Filters {
    /// The filters as one predicate; `None` without any.
    fn expr(&self) -> Option<Expr> {
        [
            (column::SERVICE_NAME, &self.service),
            (column::TOOL_NAME, &self.tool),
            (column::TOOL_TARGET, &self.target),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|value| col(name).eq(lit(value.clone()))))
        .reduce(Expr::and)
    }

    /// `predicate` and the filters.
    fn and(&self, predicate: Expr) -> Expr {
        match self.expr() {
            Some(filters) => predicate.and(filters),
            None => predicate,
        }
    }
}

/// What `rates` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// `tool_target`.
    Target,
    /// `tool_name`.
    Tool,
    /// `service_name`.
    Service,
}

impl GroupBy {
    fn column(self) -> &'static str {
        match self {
            Self::Target => column::TOOL_TARGET,
            Self::Tool => column::TOOL_NAME,
            Self::Service => column::SERVICE_NAME,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Target => "target",
            Self::Tool => "tool",
            Self::Service => "service",
        }
    }
}

fn timestamp(at: Micros) -> Expr {
    lit(ScalarValue::TimestampMicrosecond(
        Some(at),
        Some("UTC".into()),
    ))
}

/// `time_column` in `[since, until)`, and the `date` partitions that can hold it.
fn in_window(time_column: &str, since: Micros, until: Micros) -> Expr {
    let (first, last) = (day(since), day(until.saturating_sub(1)));
    col(time_column)
        .gt_eq(timestamp(since))
        .and(col(time_column).lt(timestamp(until)))
        .and(col(column::DATE).gt_eq(lit(ScalarValue::Date32(Some(first)))))
        .and(col(column::DATE).lt_eq(lit(ScalarValue::Date32(Some(last)))))
}

/// [`in_window`] on `table`'s time column, or no filter at all when the reader knows every row
/// of the table lies inside the window (a whole-table question): the filter would keep every
/// row, after reading and comparing the time of each.
fn window_filter(reader: &Reader, table: Table, since: Micros, until: Micros) -> Expr {
    if reader.holds_only(table, since, until) {
        lit(true)
    } else {
        in_window(table.time_column(), since, until)
    }
}

/// Whether a DataFusion error is about the statement (a usage error) rather than the data.
fn is_statement_error(err: &DataFusionError) -> bool {
    matches!(
        err.find_root(),
        DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_)
    )
}

/// Runs a statement; anything but a query (DDL, DML, `SET`, `COPY`) is refused.
pub async fn sql(reader: &Reader, statement: &str) -> Result<Rows, CommandError> {
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    // The same statement parsed without those limits tells a refused write from a wrong query.
    let frame = match reader.context.sql_with_options(statement, options).await {
        Ok(frame) => frame,
        Err(err) => {
            let writes = reader
                .context
                .state()
                .create_logical_plan(statement)
                .await
                .is_ok();
            return Err(if writes {
                CommandError::NotReadOnly(err)
            } else if is_statement_error(&err) {
                CommandError::Sql(err)
            } else {
                CommandError::Read(err)
            });
        }
    };
    let batches = frame.collect().await.map_err(|err| {
        if is_statement_error(&err) {
            CommandError::Sql(err)
        } else {
            CommandError::Read(err)
        }
    })?;
    Rows::from_batches(&batches).map_err(|err| CommandError::Read(err.into()))
}

/// The parameters of `rates`.
#[derive(Debug, Clone)]
pub struct RatesQuery {
    /// The window.
    pub window: Window,
    /// Grouping.
    pub by: GroupBy,
    /// Bucket width; `None` for one bucket.
    pub step: Option<Duration>,
    /// How far before the window to look for a cumulative series' baseline point.
    pub lookback: Duration,
    /// Filters.
    pub filters: Filters,
}

/// Rates and their notes.
pub struct RatesAnswer {
    /// One row per group and bucket.
    pub rows: Rows,
    /// What the reader should know (series without a baseline, ignored points).
    pub notes: Vec<String>,
}

/// Counter points of `[since, until)` (the window and its lookback), grouped by `by`, and the
/// number of points with unspecified temporality inside `window`, which are left out.
async fn points(
    reader: &Reader,
    since: Micros,
    window: Window,
    by: GroupBy,
    filters: &Filters,
) -> Result<(Vec<Point>, u64), CommandError> {
    let frame = reader
        .context
        .table(Table::OutcomeCounts.name())
        .await
        .map_err(read)?
        .filter(filters.and(window_filter(
            reader,
            Table::OutcomeCounts,
            since,
            window.until,
        )))
        .map_err(read)?;
    let series = [
        column::SERVICE_NAME,
        column::SERVICE_INSTANCE_ID,
        column::TOOL_NAME,
        column::TOOL_TARGET,
        column::OUTCOME_CLASS,
        column::TEMPORALITY,
    ];
    let mut columns: Vec<Expr> = series.iter().map(|name| col(*name)).collect();
    columns.extend([
        cast_expr(col(column::START_TIME), DataType::Int64).alias(column::START_TIME),
        cast_expr(col(column::TIME), DataType::Int64).alias(column::TIME),
        col(column::VALUE),
        col(column::POINT_ID),
    ]);
    let batches = frame
        .select(columns)
        .map_err(read)?
        .collect()
        .await
        .map_err(read)?;
    // What a series' strings say, worked out once per series rather than once per point.
    enum Series {
        Counted {
            group: std::sync::Arc<str>,
            class: OutcomeClass,
            cumulative: bool,
        },
        UnspecifiedTemporality,
        UnknownClass,
    }
    let mut known: rates::SeriesTable<Series> = rates::SeriesTable::default();
    let mut unspecified_ids = rates::IdSet::default();
    // At most one point per row: reserved once, rather than grown (and copied) by doubling.
    let mut out = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    let mut unspecified = 0u64;
    let group_part = series
        .iter()
        .position(|name| *name == by.column())
        .ok_or_else(|| {
            read(DataFusionError::Internal(format!(
                "{} is not a series column",
                by.column()
            )))
        })?;
    for batch in &batches {
        let series_text: Vec<Texts> = series
            .iter()
            .map(|name| texts(batch, name))
            .collect::<Result<_, _>>()?;
        let id = texts(batch, column::POINT_ID)?;
        let start = ints(batch, column::START_TIME)?;
        let time = ints(batch, column::TIME)?;
        let value = ints(batch, column::VALUE)?;
        for row in 0..batch.num_rows() {
            // Copies of a point (from the tail and the table) are counted once by `increases`.
            let parts: [&str; 6] = std::array::from_fn(|part| series_text[part].value(row));
            let (number, found) = known.intern(&parts, || {
                let [_, _, _, _, class, temporality] = parts;
                let cumulative = match temporality {
                    "cumulative" => true,
                    "delta" => false,
                    _ => return Series::UnspecifiedTemporality,
                };
                match class.parse::<OutcomeClass>() {
                    Ok(class) => Series::Counted {
                        group: std::sync::Arc::from(parts[group_part]),
                        class,
                        cumulative,
                    },
                    Err(_) => Series::UnknownClass,
                }
            });
            match found {
                Series::Counted {
                    group,
                    class,
                    cumulative,
                } => out.push(Point {
                    series: number as u128,
                    group: std::sync::Arc::clone(group),
                    class: *class,
                    cumulative: *cumulative,
                    start: start.value(row),
                    time: time.value(row),
                    value: value.value(row),
                    id: rates::id_key(id.value(row)),
                }),
                Series::UnspecifiedTemporality => {
                    if window.contains(time.value(row))
                        && unspecified_ids.insert(rates::id_key(id.value(row)))
                    {
                        unspecified += 1;
                    }
                }
                Series::UnknownClass => {}
            }
        }
    }
    Ok((out, unspecified))
}

/// Terminal failure events (retry action other than `retry`) per (group, bucket start), of one
/// class when `class` is given.
async fn failure_events(
    reader: &Reader,
    buckets: Buckets,
    by: GroupBy,
    filters: &Filters,
    class: Option<OutcomeClass>,
) -> Result<BTreeMap<(String, Micros), u64>, CommandError> {
    let frame = failure_events_frame(reader, buckets, by, filters, class).await?;
    count_failure_events(frame, buckets).await
}

/// The rows [`failure_events`] counts from: the group and the retry action of each failure
/// event that may lie inside the buckets, with its event time when the buckets have a step or
/// the frame holds rows outside them.
///
/// Neither the retry action nor the window is a Parquet predicate: as a row filter, each cut the
/// columns into many small selections, which cost several times more to read than the columns
/// whole. The window picks the files to read ([`Reader::window_frame`]), and
/// [`count_failure_events`] skips retried attempts and rows outside the buckets itself.
async fn failure_events_frame(
    reader: &Reader,
    buckets: Buckets,
    by: GroupBy,
    filters: &Filters,
    class: Option<OutcomeClass>,
) -> Result<DataFrame, CommandError> {
    let table = Table::OutcomeEvents;
    // A whole-table question reads every row, without the time column unless for the step.
    let whole = reader.holds_only(table, buckets.since, buckets.until);
    let frame = if whole {
        reader.context.table(table.name()).await
    } else {
        reader
            .window_frame(table, buckets.since, buckets.until)
            .await
    }
    .map_err(read)?;
    let mut predicate = filters.expr();
    if let Some(class) = class {
        let of_class = col(column::OUTCOME_CLASS).eq(lit(class.as_str()));
        predicate = Some(match predicate {
            Some(filters) => filters.and(of_class),
            None => of_class,
        });
    }
    let mut columns = vec![
        col(by.column()).alias("group"),
        col(column::RETRY_ACTION).alias("action"),
    ];
    if buckets.step.is_some() || !whole {
        columns.push(cast_expr(col(column::EVENT_TIME), DataType::Int64).alias("time"));
    }
    // Events as stored: the compactor removed retried copies within its dedupe window, and the
    // reader removed the tail's copies of stored events.
    let frame = match predicate {
        Some(predicate) => frame.filter(predicate).map_err(read)?,
        None => frame,
    };
    frame.select(columns).map_err(read)
}

/// Counts the terminal failure events (retry action other than `retry`) of
/// [`failure_events_frame`] per (group, bucket start).
///
/// Counted here rather than by a DataFusion aggregate, which hashed every row's group: the
/// files keep rows sorted by target, so each row mostly continues the run of the one before it
/// and costs a comparison of two views (see [`FailureRows::same_group`]).
async fn count_failure_events(
    frame: DataFrame,
    buckets: Buckets,
) -> Result<BTreeMap<(String, Micros), u64>, CommandError> {
    use futures_util::StreamExt as _;
    let mut stream = frame.execute_stream().await.map_err(read)?;
    let mut counts = rates::GroupCounts::default();
    let retry = make_view(RetryAction::Retry.as_str().as_bytes(), 0, 0);
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(read)?;
        let rows = FailureRows {
            group: views(&batch, "group")?,
            action: views(&batch, "action")?,
            retry,
            time: match batch.schema().index_of("time") {
                Ok(_) => Some(ints(&batch, "time")?),
                Err(_) => None,
            },
            buckets,
        };
        counts.add_runs(batch.num_rows(), &rows);
    }
    Ok(counts.into_map())
}

/// One batch of [`failure_events_frame`], as [`rates::GroupCounts`] counts it. Both text columns
/// are string views: most rows are decided by comparing views, not texts.
struct FailureRows {
    group: StringViewArray,
    action: StringViewArray,
    /// The view of `retry`, which is inline (see [`FailureRows::counted`]).
    retry: u128,
    /// Event times, when the buckets have a step or the frame holds rows outside them.
    time: Option<Int64Array>,
    buckets: Buckets,
}

// `retry` fits in a view, so its view alone decides whether a row holds it.
const _: () = assert!(RetryAction::Retry.as_str().len() <= MAX_INLINE_VIEW_LEN as usize);

impl rates::RunRows for FailureRows {
    fn counted(&self, row: usize) -> bool {
        // An inline view is the text's length and bytes, padded with zeros (as the Arrow format
        // requires): the view equals `retry`'s exactly when the text is `retry`.
        self.action.views()[row] != self.retry
    }

    /// Two equal views are equal texts: a short text is inline in its view, and a long one's
    /// view names its buffer and offset. Parquet's dictionary pages decode each value to the
    /// same view, so the rows of a run mostly cost one integer comparison; other views are
    /// compared by length and prefix (their low 64 bits), then by text.
    fn same_group(&self, a: usize, b: usize) -> bool {
        let views = self.group.views();
        let (x, y) = (views[a], views[b]);
        x == y || (x as u64 == y as u64 && self.group.value(a) == self.group.value(b))
    }

    fn group(&self, row: usize) -> &str {
        self.group.value(row)
    }

    fn bucket(&self, row: usize) -> Option<Micros> {
        match &self.time {
            Some(time) => self.buckets.bucket_of(time.value(row)),
            // Without times, the frame holds only rows inside the one bucket.
            None => Some(self.buckets.since),
        }
    }
}

/// `candor rates`.
pub async fn rates(reader: &Reader, query: &RatesQuery) -> Result<RatesAnswer, CommandError> {
    let step = query.step.map(micros_of);
    let buckets = Buckets {
        since: query.window.since,
        until: query.window.until,
        step,
    };
    let lookback_since = query.window.since.saturating_sub(micros_of(query.lookback));
    // The failure events are counted on a task of their own while this one reads the counter
    // points: the two reads share nothing, and each leaves a core idle part of the time. The
    // task is aborted if this answer is dropped before it finishes.
    let events_frame =
        failure_events_frame(reader, buckets, query.by, &query.filters, None).await?;
    let events_task = SpawnedTask::spawn(count_failure_events(events_frame, buckets));
    let (points, unspecified) = points(
        reader,
        lookback_since,
        query.window,
        query.by,
        &query.filters,
    )
    .await?;
    let increases = rates::increases(&points, buckets);
    // A panic in the task resumes here, as it would have had the count run on this task.
    let events = events_task
        .join_unwind()
        .await
        .map_err(|err| read(DataFusionError::External(Box::new(err))))??;
    let found = rates::rate_rows(&increases, &events, buckets);
    let mut rows = Rows::new(&[
        query.by.label(),
        "bucket_start",
        "bucket_end",
        "calls",
        "success",
        "empty",
        "partial",
        "access_failure",
        "silent_failure_rate",
        "denominator",
        "failure_events",
    ]);
    let mut missing = 0usize;
    for row in &found {
        let counts = |pick: fn(&ClassCounts) -> u64| {
            row.counts
                .map_or(Value::Null, |counts| Value::from(pick(&counts)))
        };
        let denominator = row.denominator();
        if denominator == rates::Denominator::Missing {
            missing += 1;
        }
        rows.push(vec![
            Value::from(row.group.clone()),
            Value::from(rfc3339(row.bucket_start)),
            Value::from(rfc3339(row.bucket_end)),
            counts(ClassCounts::calls),
            counts(|c| c.success),
            counts(|c| c.empty),
            counts(|c| c.partial),
            counts(|c| c.access_failure),
            row.rate().map_or(Value::Null, Value::from),
            serde_json::to_value(denominator).unwrap_or(Value::Null),
            Value::from(row.failure_events),
        ]);
    }
    let mut notes = Vec::new();
    if missing > 0 {
        notes.push(format!(
            "{missing} row(s) have failure events but no call counts (denominator missing): their \
             rate is unknown, not 0 %; the adapter's tool.outcomes counter did not reach the table \
             for them"
        ));
    }
    if increases.series_without_baseline > 0 {
        notes.push(format!(
            "{} counter series had no point before the window (lookback {}): their first point \
             only served as a baseline, so calls before it are not counted; a longer --lookback \
             may find one",
            increases.series_without_baseline,
            humantime::format_duration(query.lookback)
        ));
    }
    if unspecified > 0 {
        notes.push(format!(
            "{unspecified} counter point(s) with unspecified temporality were left out"
        ));
    }
    Ok(RatesAnswer { rows, notes })
}

/// The parameters of `spikes`.
#[derive(Debug, Clone)]
pub struct SpikesQuery {
    /// The end of the window (now by default).
    pub until: Micros,
    /// The recent window.
    pub window: Duration,
    /// The baseline before it.
    pub baseline: Duration,
    /// Factor and floor.
    pub rule: SpikeRule,
    /// How far before the baseline to look for baseline points.
    pub lookback: Duration,
    /// Filters.
    pub filters: Filters,
}

/// `candor spikes`: the window covered is baseline + window.
pub async fn spikes(reader: &Reader, query: &SpikesQuery) -> Result<RatesAnswer, CommandError> {
    let window_start = query.until.saturating_sub(micros_of(query.window));
    let baseline_start = window_start.saturating_sub(micros_of(query.baseline));
    let whole = Window {
        since: baseline_start,
        until: query.until,
    };
    let lookback_since = baseline_start.saturating_sub(micros_of(query.lookback));
    let (points, _) = points(
        reader,
        lookback_since,
        whole,
        GroupBy::Target,
        &query.filters,
    )
    .await?;
    let mut without_baseline = 0;
    let mut per_target = |points: &[Point], since, until| -> BTreeMap<String, ClassCounts> {
        let increases = rates::increases(
            points,
            Buckets {
                since,
                until,
                step: None,
            },
        );
        without_baseline += increases.series_without_baseline;
        increases
            .buckets
            .into_iter()
            .map(|((target, _), counts)| (target, counts))
            .collect()
    };
    let recent = per_target(&points, window_start, query.until);
    let before = per_target(&points, baseline_start, window_start);
    let found = rates::spikes(&recent, &before, query.rule);
    // A spike's baseline is only as long as the target's counter history.
    let mut first_point: BTreeMap<&str, Micros> = BTreeMap::new();
    for point in &points {
        let first = first_point.entry(&point.group).or_insert(point.time);
        *first = (*first).min(point.time);
    }
    let short_baselines: Vec<String> = found
        .iter()
        .filter_map(|spike| {
            let first = *first_point.get(spike.target.as_str())?;
            (first > baseline_start).then(|| format!("{} (from {})", spike.target, rfc3339(first)))
        })
        .collect();
    let mut rows = Rows::new(&[
        "target",
        "window_access_failures",
        "window_calls",
        "window_rate",
        "baseline_access_failures",
        "baseline_calls",
        "baseline_rate",
        "factor",
    ]);
    for spike in &found {
        rows.push(vec![
            Value::from(spike.target.clone()),
            Value::from(spike.window_failures),
            Value::from(spike.window_calls),
            Value::from(spike.window_rate),
            Value::from(spike.baseline_failures),
            Value::from(spike.baseline_calls),
            spike.baseline_rate.map_or(Value::Null, Value::from),
            spike.factor.map_or_else(|| Value::from("new"), Value::from),
        ]);
    }
    // A target that failed often but has no call counts cannot be given a rate; it is listed
    // with its failure events, never left out.
    let window_buckets = Buckets {
        since: window_start,
        until: query.until,
        step: None,
    };
    let events = failure_events(
        reader,
        window_buckets,
        GroupBy::Target,
        &query.filters,
        Some(OutcomeClass::AccessFailure),
    )
    .await?;
    let mut uncounted = Vec::new();
    for ((target, _), failures) in events {
        if failures >= query.rule.min_events && !recent.contains_key(&target) {
            rows.push(vec![
                Value::from(target.clone()),
                Value::from(failures),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::from("unknown: no call counts"),
            ]);
            uncounted.push(target);
        }
    }
    let mut notes = Vec::new();
    if !uncounted.is_empty() {
        notes.push(format!(
            "{} target(s) had at least {} terminal AccessFailure events in the window but no call \
             counts, so their rate is unknown: {}",
            uncounted.len(),
            query.rule.min_events,
            uncounted.join(", ")
        ));
    }
    if !short_baselines.is_empty() {
        notes.push(format!(
            "the baseline of these spikes is shorter than asked, since their counters begin inside \
             it: {}",
            short_baselines.join(", ")
        ));
    }
    if without_baseline > 0 {
        notes.push(format!(
            "{without_baseline} counter series had no point before their window (lookback {}): \
             calls before their first point are not counted",
            humantime::format_duration(query.lookback)
        ));
    }
    Ok(RatesAnswer { rows, notes })
}

/// The event columns `incident` and `trace` show, in order.
const EVENT_COLUMNS: &[&str] = &[
    column::EVENT_TIME,
    column::SERVICE_NAME,
    column::SERVICE_INSTANCE_ID,
    column::TOOL_NAME,
    column::TOOL_TARGET,
    column::OUTCOME_CLASS,
    column::FAILURE_KIND,
    column::RETRY_ACTION,
    column::RETRY_ATTEMPT,
    column::RETRY_MAX_ATTEMPTS,
    column::HTTP_STATUS_CODE,
    column::ERROR_TYPE,
    column::COVERAGE,
    column::DROPPED,
    column::TRACE_ID,
    column::SPAN_ID,
    column::EVENT_ID,
];

/// Events in order, with the summaries a person needs during an incident.
pub struct EventsAnswer {
    /// The events.
    pub rows: Rows,
    /// Retry outcomes and services involved.
    pub summary: Vec<String>,
}

async fn events(reader: &Reader, filter: Expr) -> Result<EventsAnswer, CommandError> {
    let frame = reader
        .context
        .table(Table::OutcomeEvents.name())
        .await
        .map_err(read)?
        .filter(filter)
        .map_err(read)?
        .sort(vec![
            col(column::EVENT_TIME).sort(true, false),
            col(column::KAFKA_PARTITION).sort(true, false),
            col(column::KAFKA_OFFSET).sort(true, false),
        ])
        .map_err(read)?
        .select(
            EVENT_COLUMNS
                .iter()
                .map(|name| col(*name))
                .collect::<Vec<Expr>>(),
        )
        .map_err(read)?;
    let batches = frame.collect().await.map_err(read)?;
    let rows = Rows::from_batches(&batches).map_err(|err| CommandError::Read(err.into()))?;
    let rows = if rows.columns.is_empty() {
        Rows::new(EVENT_COLUMNS)
    } else {
        rows
    };
    let summary = summarize(&rows);
    Ok(EventsAnswer { rows, summary })
}

/// Retry outcomes (exhausted, permanent, accepted partial, retried attempts) and services of
/// event rows.
pub fn summarize(rows: &Rows) -> Vec<String> {
    let mut actions: BTreeMap<String, u64> = BTreeMap::new();
    let mut services: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows.rows {
        let text = |name: &str| {
            row.get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        *actions.entry(text(column::RETRY_ACTION)).or_default() += 1;
        *services.entry(text(column::SERVICE_NAME)).or_default() += 1;
    }
    if rows.rows.is_empty() {
        return Vec::new();
    }
    let get = |name: &str| actions.get(name).copied().unwrap_or(0);
    let services: Vec<String> = services
        .iter()
        .map(|(name, events)| format!("{name} ({events})"))
        .collect();
    vec![
        format!(
            "calls that ended failed: {} exhausted (ran out of retries), {} permanent (not \
             retryable), {} partial answers accepted; {} attempt(s) were retried",
            get("exhausted"),
            get("permanent"),
            get("accept_partial"),
            get("retry")
        ),
        format!("services involved: {}", services.join(", ")),
    ]
}

/// `candor incident`: every event of one target in the window.
pub async fn incident(
    reader: &Reader,
    window: Window,
    filters: &Filters,
) -> Result<EventsAnswer, CommandError> {
    events(
        reader,
        filters.and(in_window(column::EVENT_TIME, window.since, window.until)),
    )
    .await
}

/// Checks a trace id: 32 hex digits, any case; returns it in lower case as stored.
pub fn trace_id(raw: &str) -> Result<String, CommandError> {
    let id = raw.trim().to_ascii_lowercase();
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) && id != "0".repeat(32) {
        Ok(id)
    } else {
        Err(CommandError::Usage(format!(
            "{raw:?} is not a trace id: expected 32 hex digits, as in the trace_id column"
        )))
    }
}

/// `candor trace`: every event of one trace.
pub async fn trace(
    reader: &Reader,
    id: &str,
    window: Option<Window>,
) -> Result<EventsAnswer, CommandError> {
    let mut filter = col(column::TRACE_ID).eq(lit(id.to_owned()));
    if let Some(window) = window {
        filter = filter.and(in_window(column::EVENT_TIME, window.since, window.until));
    }
    events(reader, filter).await
}

fn column_named<'a>(
    batch: &'a RecordBatch,
    name: &str,
) -> Result<&'a deltalake::arrow::array::ArrayRef, CommandError> {
    batch.column_by_name(name).ok_or_else(|| {
        read(DataFusionError::Internal(format!(
            "no column {name} in the result"
        )))
    })
}

/// A string column as read, plain or as views, without copying it into the other layout.
enum Texts {
    Plain(StringArray),
    Views(StringViewArray),
}

impl Texts {
    fn value(&self, row: usize) -> &str {
        match self {
            Texts::Plain(array) => array.value(row),
            Texts::Views(array) => array.value(row),
        }
    }
}

fn texts(batch: &RecordBatch, name: &str) -> Result<Texts, CommandError> {
    let array = column_named(batch, name)?;
    if let Some(views) = array.as_any().downcast_ref::<StringViewArray>() {
        return Ok(Texts::Views(views.clone()));
    }
    strings(batch, name).map(Texts::Plain)
}

/// A column cast to `to` (no copy when it already is) as the array type `A` of that type.
fn column_as<A: Array + Clone + 'static>(
    batch: &RecordBatch,
    name: &str,
    to: &DataType,
) -> Result<A, CommandError> {
    let array = cast(column_named(batch, name)?, to).map_err(|e| read(e.into()))?;
    array.as_any().downcast_ref::<A>().cloned().ok_or_else(|| {
        read(DataFusionError::Internal(format!(
            "{name}: expected {to} after the cast"
        )))
    })
}

/// A string column as views, cast when it was read as plain strings (the tail's rows).
fn views(batch: &RecordBatch, name: &str) -> Result<StringViewArray, CommandError> {
    column_as(batch, name, &DataType::Utf8View)
}

fn strings(batch: &RecordBatch, name: &str) -> Result<StringArray, CommandError> {
    column_as(batch, name, &DataType::Utf8)
}

fn ints(batch: &RecordBatch, name: &str) -> Result<Int64Array, CommandError> {
    let ints: Int64Array = column_as(batch, name, &DataType::Int64)?;
    if ints.null_count() > 0 {
        return Err(read(DataFusionError::Internal(format!(
            "{name}: unexpected null in a required column"
        ))));
    }
    Ok(ints)
}

/// The parameters of `reconcile`.
#[derive(Debug, Clone)]
pub struct ReconcileQuery {
    /// Counter points with a time in this window are checked.
    pub window: Window,
    /// Filters.
    pub filters: Filters,
    /// How far an event's time may be from the counter point that counted its call.
    pub slack: Duration,
    /// How far before the window to look for each counter's baseline point.
    pub lookback: Duration,
}

/// Where the adapter's two records of failed calls disagree.
pub struct ReconcileAnswer {
    /// One row per window where a gap appeared or grew.
    pub rows: Rows,
    /// The figures, for a person.
    pub summary: Vec<String>,
    /// What the reader should know (series without a baseline).
    pub notes: Vec<String>,
    /// What could not be checked: the answer is partial when this is not empty.
    pub unchecked: Vec<String>,
    /// The figures.
    pub totals: reconcile::Totals,
}

/// The columns of `reconcile`'s rows: the series, the window, the counter's increase and the
/// events in it, and the gap that appeared there.
pub const RECONCILE_COLUMNS: [&str; 11] = [
    "service",
    "instance",
    "tool",
    "target",
    "class",
    "window_start",
    "window_end",
    "counted",
    "events",
    "missing",
    "extra",
];

/// The classes the adapter records twice.
const RECONCILED: [OutcomeClass; 2] = [OutcomeClass::AccessFailure, OutcomeClass::Partial];

fn reconciled_classes() -> Expr {
    col(column::OUTCOME_CLASS).in_list(
        RECONCILED.iter().map(|class| lit(class.as_str())).collect(),
        false,
    )
}

/// `columns` of the rows of `table` that match `predicate`.
async fn select(
    reader: &Reader,
    table: Table,
    predicate: Expr,
    columns: Vec<Expr>,
) -> Result<Vec<RecordBatch>, CommandError> {
    reader
        .context
        .table(table.name())
        .await
        .map_err(read)?
        .filter(predicate)
        .map_err(read)?
        .select(columns)
        .map_err(read)?
        .collect()
        .await
        .map_err(read)
}

/// The series key of each row of `batch`, or `None` for a class outside [`RECONCILED`].
fn series_keys(batch: &RecordBatch) -> Result<Vec<Option<SeriesKey>>, CommandError> {
    let service = strings(batch, column::SERVICE_NAME)?;
    let instance = strings(batch, column::SERVICE_INSTANCE_ID)?;
    let tool = strings(batch, column::TOOL_NAME)?;
    let target = strings(batch, column::TOOL_TARGET)?;
    let class = strings(batch, column::OUTCOME_CLASS)?;
    Ok((0..batch.num_rows())
        .map(|row| {
            let class = class.value(row).parse::<OutcomeClass>().ok()?;
            RECONCILED.contains(&class).then(|| SeriesKey {
                service: service.value(row).to_owned(),
                instance: instance.value(row).to_owned(),
                tool: tool.value(row).to_owned(),
                target: target.value(row).to_owned(),
                class,
            })
        })
        .collect())
}

const SERIES_COLUMNS: [&str; 5] = [
    column::SERVICE_NAME,
    column::SERVICE_INSTANCE_ID,
    column::TOOL_NAME,
    column::TOOL_TARGET,
    column::OUTCOME_CLASS,
];

/// `candor reconcile`: per series, the counter's increase between its points against the
/// terminal events stored in the same span (see [`crate::reconcile`]).
pub async fn reconcile(
    reader: &Reader,
    query: &ReconcileQuery,
) -> Result<ReconcileAnswer, CommandError> {
    let slack = micros_of(query.slack);
    let read_from = query.window.since.saturating_sub(micros_of(query.lookback));
    let settings = reconcile::Settings {
        window: query.window,
        read_from,
        slack,
    };
    let mut columns: Vec<Expr> = SERIES_COLUMNS.iter().map(|name| col(*name)).collect();
    columns.extend([
        col(column::TEMPORALITY),
        cast_expr(col(column::START_TIME), DataType::Int64).alias(column::START_TIME),
        cast_expr(col(column::TIME), DataType::Int64).alias(column::TIME),
        col(column::VALUE),
        col(column::POINT_ID),
    ]);
    let predicate =
        in_window(column::TIME, read_from, query.window.until).and(reconciled_classes());
    let batches = select(
        reader,
        Table::OutcomeCounts,
        query.filters.and(predicate),
        columns,
    )
    .await?;
    let mut points: BTreeMap<SeriesKey, Vec<CounterPoint>> = BTreeMap::new();
    let mut seen = rates::IdSet::default();
    let mut unspecified = 0u64;
    for batch in &batches {
        let keys = series_keys(batch)?;
        let temporality = strings(batch, column::TEMPORALITY)?;
        let ids = strings(batch, column::POINT_ID)?;
        let start = ints(batch, column::START_TIME)?;
        let time = ints(batch, column::TIME)?;
        let value = ints(batch, column::VALUE)?;
        for (row, key) in keys.into_iter().enumerate() {
            let cumulative = match temporality.value(row) {
                "cumulative" => true,
                "delta" => false,
                _ => {
                    unspecified += 1;
                    continue;
                }
            };
            // A retried copy the tail and the table both hold is one point.
            let Some(key) = key.filter(|_| seen.insert(rates::id_key(ids.value(row)))) else {
                continue;
            };
            points.entry(key).or_default().push(CounterPoint {
                start: start.value(row),
                time: time.value(row),
                value: value.value(row),
                cumulative,
            });
        }
    }
    let mut columns: Vec<Expr> = SERIES_COLUMNS.iter().map(|name| col(*name)).collect();
    columns.extend([
        cast_expr(col(column::EVENT_TIME), DataType::Int64).alias(column::EVENT_TIME),
        col(column::EVENT_ID),
    ]);
    let predicate = in_window(
        column::EVENT_TIME,
        read_from.saturating_sub(slack),
        query.window.until.saturating_add(slack),
    )
    .and(col(column::RETRY_ACTION).not_eq(lit(RetryAction::Retry.as_str())))
    .and(reconciled_classes());
    let batches = select(
        reader,
        Table::OutcomeEvents,
        query.filters.and(predicate),
        columns,
    )
    .await?;
    let mut events: BTreeMap<SeriesKey, Vec<Micros>> = BTreeMap::new();
    let mut copies = 0u64;
    seen.clear();
    for batch in &batches {
        let keys = series_keys(batch)?;
        let time = ints(batch, column::EVENT_TIME)?;
        let ids = strings(batch, column::EVENT_ID)?;
        for (row, key) in keys.into_iter().enumerate() {
            let Some(key) = key else { continue };
            if !seen.insert(rates::id_key(ids.value(row))) {
                copies += 1;
                continue;
            }
            events.entry(key).or_default().push(time.value(row));
        }
    }
    let result = reconcile::reconcile(points, events, settings);
    let totals = result.totals();
    let mut rows = Rows::new(&RECONCILE_COLUMNS);
    let mut push =
        |key: &SeriesKey, from: Micros, to: Micros, counted: Value, events, gap: (u64, u64)| {
            rows.push(vec![
                Value::from(key.service.clone()),
                Value::from(key.instance.clone()),
                Value::from(key.tool.clone()),
                Value::from(key.target.clone()),
                Value::from(key.class.as_str()),
                Value::from(rfc3339(from)),
                Value::from(rfc3339(to)),
                counted,
                Value::from(events),
                Value::from(gap.0),
                Value::from(gap.1),
            ]);
        };
    for (key, check) in &result.series {
        for window in check.windows.iter().filter(|window| window.gap_grew()) {
            push(
                key,
                window.from,
                window.to,
                Value::from(window.counted),
                window.events,
                (window.new_missing, window.new_extra),
            );
        }
    }
    for (key, events) in &result.without_counter {
        push(
            key,
            query.window.since,
            query.window.until,
            Value::Null,
            *events,
            (0, *events),
        );
    }
    let mut summary = vec![format!(
        "{} counter series, {} closed windows: {} matched, {} with a gap; {} event(s) missing \
         (counted calls whose terminal event is not stored), {} extra (events of calls not \
         counted)",
        totals.series,
        totals.windows,
        totals.matched,
        totals.mismatched,
        totals.missing,
        totals.extra
    )];
    if totals.events_without_counter > 0 {
        summary.push(format!(
            "{} terminal event(s) in {} series have no tool.outcomes point at all: their counter \
             did not reach the tables",
            totals.events_without_counter,
            result.without_counter.len()
        ));
    }
    let mut notes = Vec::new();
    let mut unchecked = Vec::new();
    if totals.windows == 0 {
        unchecked.push(
            "no closed counter window lies inside the window (no tool.outcomes points of \
             access_failure or partial were read, or only one per series), so nothing was \
             compared"
                .to_owned(),
        );
    }
    let without_baseline = result.without_baseline();
    if without_baseline > 0 {
        notes.push(format!(
            "{without_baseline} counter series had no point before the window (lookback {}): \
             their first point only served as a baseline, so their first window was not checked",
            humantime::format_duration(query.lookback)
        ));
    }
    if copies > 0 {
        notes.push(format!(
            "{copies} stored copies of events already counted were left out (same event_id)"
        ));
    }
    if unspecified > 0 {
        notes.push(format!(
            "{unspecified} counter point(s) with unspecified temporality could not be compared \
             and were left out; their series' events show as having no counter"
        ));
    }
    Ok(ReconcileAnswer {
        rows,
        summary,
        notes,
        unchecked,
        totals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::StringViewBuilder;
    use rates::{GroupCounts, RunRows as _};

    fn view_array(texts: &[&str]) -> StringViewArray {
        let mut builder = StringViewBuilder::new();
        for text in texts {
            builder.append_value(text);
        }
        builder.finish()
    }

    #[test]
    fn failure_rows_skip_retried_attempts_and_compare_groups_by_text_not_by_view() {
        let long = "https://api-1.internal/v1/search";
        // The builder copies each long value anew: equal texts with different views.
        let group = view_array(&[
            long,
            long,
            "short",
            "short",
            long,
            "https://api-1.internal/v1/lookup",
        ]);
        assert_ne!(group.views()[0], group.views()[1]);
        let action = view_array(&[
            "exhausted",
            "retry",
            "permanent",
            "retry",
            "accept_partial",
            "exhausted",
        ]);
        let buckets = Buckets {
            since: 0,
            until: 10,
            step: None,
        };
        let rows = FailureRows {
            group,
            action,
            retry: make_view(RetryAction::Retry.as_str().as_bytes(), 0, 0),
            time: None,
            buckets,
        };
        let counted: Vec<bool> = (0..6).map(|row| rows.counted(row)).collect();
        assert_eq!(counted, [true, false, true, false, true, true]);
        assert!(rows.same_group(0, 1));
        assert!(rows.same_group(0, 4));
        assert!(rows.same_group(2, 3));
        assert!(!rows.same_group(0, 2));
        // Same length and first four bytes, different text.
        assert!(!rows.same_group(0, 5));
        let mut counts = GroupCounts::default();
        counts.add_runs(6, &rows);
        let expected: BTreeMap<(String, Micros), u64> = [
            ((long.to_owned(), 0), 2),
            (("short".to_owned(), 0), 1),
            (("https://api-1.internal/v1/lookup".to_owned(), 0), 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(counts.into_map(), expected);
    }

    #[test]
    fn plain_string_columns_are_read_as_views() {
        let batch = RecordBatch::try_from_iter([(
            "group",
            std::sync::Arc::new(StringArray::from(vec!["a", "retry"])) as _,
        )])
        .expect("a batch of one column");
        let read = views(&batch, "group").expect("a string column");
        assert_eq!(read.value(1), "retry");
        assert_eq!(read.views()[1], make_view(b"retry", 0, 0));
    }
}
