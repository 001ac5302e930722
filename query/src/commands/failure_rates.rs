//! `rates` and `spikes`: the silent-failure rate of each group over a window, from the counter
//! and the terminal failure events.
//!
//! A group is also told apart by its source: what adapters declared (`adapter`) and what was
//! derived from standard spans (`genai`, `mcp`, `http`) are separate rows, unless the question
//! merges them (its source is then `all`). Internally a group's key is its source's label, a NUL
//! and its value ([`group_key`]); the label has no NUL, so the key splits back unambiguously.

use std::collections::BTreeMap;
use std::time::Duration;

use candor_records::proto::{CountClass, OutcomeSource, Sampling};
use candor_records::tables::{Table, column};
use candor_schema::{OutcomeClass, RetryAction};
use deltalake::arrow::array::{
    Array as _, Int64Array, MAX_INLINE_VIEW_LEN, RecordBatch, StringViewArray, make_view,
};
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::common::runtime::SpawnedTask;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::{DataFrame, Expr, col, lit};
use serde_json::Value;

use crate::answer::Rows;
use crate::rates::{self, Buckets, ClassCounts, Point, SpikeRule};
use crate::reader::Reader;
use crate::window::{Micros, Window, micros_of, rfc3339};

use super::{
    CommandError, Filters, GroupBy, Texts, added_text_column, convention_column, ints, read,
    source_column, texts, views, window_filter,
};

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
    /// Count declared and derived calls of a group together.
    pub merge_sources: bool,
}

/// Rates and their notes.
pub struct RatesAnswer {
    /// One row per group and bucket.
    pub rows: Rows,
    /// What the reader should know (series without a baseline, ignored points).
    pub notes: Vec<String>,
}

/// The label of a group's source in its key and in answers: `all` when sources are merged.
fn source_label(source: OutcomeSource, merge: bool) -> &'static str {
    if merge { MERGED } else { source.as_str() }
}

/// The source label of merged groups.
const MERGED: &str = "all";

/// The key of a group: its source's label, a NUL, its value.
pub(crate) fn group_key(label: &str, value: &str) -> String {
    format!("{label}\u{0}{value}")
}

/// A group key's (source label, value).
pub(crate) fn split_group(key: &str) -> (&str, &str) {
    key.split_once('\u{0}').unwrap_or(("", key))
}

/// The source a row names: `adapter` for a row written before sources were told apart (empty or
/// null); `None` for a name outside the closed set, which readers refuse before it is stored.
fn source_named(name: &str) -> Option<OutcomeSource> {
    if name.is_empty() {
        return Some(OutcomeSource::Adapter);
    }
    OutcomeSource::from_bytes(name.as_bytes())
}

/// Counter points of `[since, until)` (the window and its lookback), grouped by `by` (and by
/// source unless `merge`), and the number of points inside `window` left out: those with
/// unspecified temporality, or a class or source this reader does not know.
pub(super) async fn points(
    reader: &Reader,
    since: Micros,
    window: Window,
    by: GroupBy,
    filters: &Filters,
    merge: bool,
) -> Result<(Vec<Point>, u64, GroupSampling), CommandError> {
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
        column::SOURCE,
        column::CONVENTION,
        column::SAMPLING,
    ];
    let source = source_column(&frame);
    let mut columns: Vec<Expr> = series
        .iter()
        .map(|name| match *name {
            column::SOURCE => Ok(source.clone()),
            column::CONVENTION => convention_column(&frame),
            column::SAMPLING => Ok(added_text_column(&frame, column::SAMPLING)),
            name => Ok(col(name)),
        })
        .collect::<Result<_, CommandError>>()?;
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
            class: CountClass,
            cumulative: bool,
            sampling: Option<Sampling>,
        },
        UnspecifiedTemporality,
        UnknownClass,
    }
    let mut known: rates::SeriesTable<Series> = rates::SeriesTable::default();
    let mut unspecified_ids = rates::IdSet::default();
    // At most one point per row: reserved once, rather than grown (and copied) by doubling.
    let mut out = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    let mut unspecified = 0u64;
    let mut group_sampling = GroupSampling::new();
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
            let parts: [&str; 9] = std::array::from_fn(|part| series_text[part].value(row));
            let (number, found) = known.intern(&parts, || {
                let [_, _, _, _, class, temporality, source, _, sampling] = parts;
                let cumulative = match temporality {
                    "cumulative" => true,
                    "delta" => false,
                    _ => return Series::UnspecifiedTemporality,
                };
                let Some(source) = source_named(source) else {
                    return Series::UnknownClass;
                };
                match CountClass::parse(class, Some(source)) {
                    Ok(class) => Series::Counted {
                        group: std::sync::Arc::from(group_key(
                            source_label(source, merge),
                            parts[group_part],
                        )),
                        class,
                        cumulative,
                        sampling: Sampling::parse(sampling),
                    },
                    Err(_) => Series::UnknownClass,
                }
            });
            match found {
                Series::Counted {
                    group,
                    class,
                    cumulative,
                    sampling,
                } => {
                    if let Some(sampling) = sampling {
                        let seen = group_sampling
                            .entry(std::sync::Arc::clone(group))
                            .or_default();
                        match sampling {
                            Sampling::Weighted => seen.weighted = true,
                            Sampling::Unknown => seen.unknown = true,
                        }
                    }
                    out.push(Point {
                        series: number as u128,
                        group: std::sync::Arc::clone(group),
                        class: *class,
                        cumulative: *cumulative,
                        start: start.value(row),
                        time: time.value(row),
                        value: value.value(row),
                        id: rates::id_key(id.value(row)),
                    });
                }
                Series::UnspecifiedTemporality => {
                    if window.contains(time.value(row))
                        && unspecified_ids.insert(rates::id_key(id.value(row)))
                    {
                        unspecified += 1;
                    }
                }
                // Readers refuse such a point before it is stored; one that got past them
                // anyway is counted with the unspecified ones rather than dropped unsaid.
                Series::UnknownClass => {
                    if window.contains(time.value(row))
                        && unspecified_ids.insert(rates::id_key(id.value(row)))
                    {
                        unspecified += 1;
                    }
                }
            }
        }
    }
    Ok((out, unspecified, group_sampling))
}

/// What the derived counts of a group said of their spans' sampling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SamplingSeen {
    /// Some were weighted by their spans' sampling thresholds.
    pub weighted: bool,
    /// Some counted spans whose sampling is unknown.
    pub unknown: bool,
}

impl SamplingSeen {
    /// How a row states it: `unknown` when any count's sampling is unknown (the row then counts
    /// only what the senders kept), else `weighted`.
    fn state(self) -> Option<Sampling> {
        if self.unknown {
            Some(Sampling::Unknown)
        } else if self.weighted {
            Some(Sampling::Weighted)
        } else {
            None
        }
    }
}

/// Per group key, what its derived counts said of their sampling.
pub(super) type GroupSampling = BTreeMap<std::sync::Arc<str>, SamplingSeen>;

/// Terminal failure events (retry action other than `retry`) per (group, bucket start), of one
/// class when `class` is given.
async fn failure_events(
    reader: &Reader,
    buckets: Buckets,
    by: GroupBy,
    filters: &Filters,
    class: Option<OutcomeClass>,
    merge: bool,
) -> Result<BTreeMap<(String, Micros), u64>, CommandError> {
    let frame = failure_events_frame(reader, buckets, by, filters, class).await?;
    count_failure_events(frame, buckets, merge).await
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
        by.expr(&frame)?.alias("group"),
        col(column::RETRY_ACTION).alias("action"),
        source_column(&frame).alias("source"),
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

/// Counts the terminal failure events of [`failure_events_frame`] per (group, bucket start): those
/// whose action ends their call ([`candor_schema::action_ends_call`]: any but `retry`).
///
/// Counted here rather than by a DataFusion aggregate, which hashed every row's group: the
/// files keep rows sorted by target, so each row mostly continues the run of the one before it
/// and costs a comparison of two views (see [`FailureRows::same_group`]).
///
/// The rows of each source are counted apart (unless `merge`), and the keys are
/// [`group_key`]s. A batch of an adapter's rows only, the usual case, is counted in one pass.
async fn count_failure_events(
    frame: DataFrame,
    buckets: Buckets,
    merge: bool,
) -> Result<BTreeMap<(String, Micros), u64>, CommandError> {
    use futures_util::StreamExt as _;
    let mut stream = frame.execute_stream().await.map_err(read)?;
    let mut counts: [rates::GroupCounts; OutcomeSource::ALL.len()] = Default::default();
    let retry = make_view(RetryAction::Retry.as_str().as_bytes(), 0, 0);
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(read)?;
        let mut rows = FailureRows {
            group: views(&batch, "group")?,
            action: views(&batch, "action")?,
            retry,
            time: match batch.schema().index_of("time") {
                Ok(_) => Some(ints(&batch, "time")?),
                Err(_) => None,
            },
            buckets,
            source: views(&batch, "source")?,
            only: None,
        };
        let present = if merge {
            vec![OutcomeSource::Adapter]
        } else {
            rows.sources()
        };
        if let [one] = present.as_slice() {
            counts[source_index(*one)].add_runs(batch.num_rows(), &rows);
            continue;
        }
        for source in present {
            rows.only = Some(source);
            counts[source_index(source)].add_runs(batch.num_rows(), &rows);
        }
    }
    let mut all = BTreeMap::new();
    for (source, counts) in OutcomeSource::ALL.iter().zip(counts) {
        let label = source_label(*source, merge);
        all.extend(
            counts
                .into_map()
                .into_iter()
                .map(|((group, at), n)| ((group_key(label, &group), at), n)),
        );
    }
    Ok(all)
}

fn source_index(source: OutcomeSource) -> usize {
    OutcomeSource::ALL
        .iter()
        .position(|s| *s == source)
        .unwrap_or(0)
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
    /// Each row's source (null or `adapter`: an adapter's).
    source: StringViewArray,
    /// Count only the rows of this source; `None`: every row.
    only: Option<OutcomeSource>,
}

impl FailureRows {
    /// A row's source; an unknown name (which readers refuse before it is stored) counts as
    /// derived over HTTP rather than as declared, so that it never raises a declared rate.
    fn source(&self, row: usize) -> OutcomeSource {
        if self.source.is_null(row) {
            return OutcomeSource::Adapter;
        }
        source_named(self.source.value(row)).unwrap_or(OutcomeSource::Http)
    }

    /// The sources of the batch's rows, in [`OutcomeSource::ALL`]'s order. Rows of one
    /// source mostly share one view, so most rows cost a comparison with the one before.
    fn sources(&self) -> Vec<OutcomeSource> {
        let mut seen = [false; OutcomeSource::ALL.len()];
        let views = self.source.views();
        for row in 0..self.source.len() {
            if row > 0 && views[row] == views[row - 1] && !self.source.is_null(row) {
                continue;
            }
            seen[source_index(self.source(row))] = true;
        }
        OutcomeSource::ALL
            .iter()
            .zip(seen)
            .filter_map(|(source, seen)| seen.then_some(*source))
            .collect()
    }
}

// `retry` fits in a view, so its view alone decides whether a row holds it.
const _: () = assert!(RetryAction::Retry.as_str().len() <= MAX_INLINE_VIEW_LEN as usize);

impl rates::RunRows for FailureRows {
    fn counted(&self, row: usize) -> bool {
        // `candor_schema::action_ends_call` on the view: an inline view is the text's length and
        // bytes, padded with zeros (as the Arrow format requires), so the view equals `retry`'s
        // exactly when the text is `retry`.
        self.action.views()[row] != self.retry
            && self.only.is_none_or(|only| self.source(row) == only)
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
    let merge = query.merge_sources;
    let events_frame =
        failure_events_frame(reader, buckets, query.by, &query.filters, None).await?;
    let events_task = SpawnedTask::spawn(count_failure_events(events_frame, buckets, merge));
    let (points, unspecified, sampling) = points(
        reader,
        lookback_since,
        query.window,
        query.by,
        &query.filters,
        merge,
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
        "source",
        "bucket_start",
        "bucket_end",
        "calls",
        "success",
        "empty",
        "partial",
        "access_failure",
        "unverified",
        "cancelled",
        "accepted",
        "silent_failure_rate",
        "rate_bound",
        "sampling",
        "denominator",
        "failure_events",
    ]);
    let mut missing = 0usize;
    let mut lower_bounds = 0usize;
    let (mut weighted, mut sampling_unknown) = (0usize, 0usize);
    for row in &found {
        let (label, group) = split_group(&row.group);
        let counts = |pick: fn(&ClassCounts) -> u64| {
            row.counts
                .map_or(Value::Null, |counts| Value::from(pick(&counts)))
        };
        let denominator = row.denominator();
        if denominator == rates::Denominator::Missing {
            missing += 1;
        }
        let bound = rate_bound(row.counts.as_ref(), row.rate().is_some());
        if bound == Some(LOWER_BOUND) {
            lower_bounds += 1;
        }
        let sampled = sampling
            .get(row.group.as_str())
            .and_then(|seen| seen.state());
        match sampled {
            Some(Sampling::Unknown) => sampling_unknown += 1,
            Some(Sampling::Weighted) => weighted += 1,
            None => {}
        }
        rows.push(vec![
            Value::from(group),
            Value::from(label),
            Value::from(rfc3339(row.bucket_start)),
            Value::from(rfc3339(row.bucket_end)),
            counts(ClassCounts::calls),
            counts(|c| c.success),
            counts(|c| c.empty),
            counts(|c| c.partial),
            counts(|c| c.access_failure),
            counts(|c| c.unverified),
            counts(|c| c.cancelled),
            counts(|c| c.accepted),
            row.rate().map_or(Value::Null, Value::from),
            bound.map_or(Value::Null, Value::from),
            sampled.map_or(Value::Null, |state| Value::from(state.as_str())),
            serde_json::to_value(denominator).unwrap_or(Value::Null),
            Value::from(row.failure_events),
        ]);
    }
    let mut notes = Vec::new();
    if lower_bounds > 0 {
        notes.push(lower_bound_note(lower_bounds));
    }
    if sampling_unknown > 0 {
        notes.push(format!(
            "{sampling_unknown} row(s) count derived calls from spans whose sampling is unknown \
             (sampling = unknown): they count the spans the senders kept; a head sampler's \
             left-out calls are not in them, and a tail sampler that keeps failures makes their \
             failure share too high"
        ));
    }
    if weighted > 0 {
        notes.push(format!(
            "{weighted} row(s) count derived calls weighted by their spans' sampling thresholds \
             (sampling = weighted): estimates of the calls made, each kept span standing for the \
             inverse of its sampling probability"
        ));
    }
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
            "{unspecified} counter point(s) were left out: their temporality is unspecified, or \
             their class or source is one this reader does not know"
        ));
    }
    Ok(RatesAnswer { rows, notes })
}

/// What a rate is: `exact`, or a `lower_bound` when some of its calls are unverified (derived
/// calls without error, any of which may have been partial); `None` without a rate.
fn rate_bound(counts: Option<&ClassCounts>, rated: bool) -> Option<&'static str> {
    let counts = counts.filter(|_| rated)?;
    Some(if counts.lower_bound() {
        LOWER_BOUND
    } else {
        EXACT
    })
}

const LOWER_BOUND: &str = "lower_bound";
const EXACT: &str = "exact";

fn lower_bound_note(rows: usize) -> String {
    format!(
        "{rows} row(s) count calls derived from standard spans (GenAI, MCP, HTTP client): a call \
         without error is unverified, since its span cannot tell a whole answer from an empty or \
         a partial one, so their rate is a lower bound (rate_bound = lower_bound); only an \
         adapter declares partial answers"
    )
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
    /// Count declared and derived calls of a target together.
    pub merge_sources: bool,
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
    let merge = query.merge_sources;
    let (points, _, _) = points(
        reader,
        lookback_since,
        whole,
        GroupBy::Target,
        &query.filters,
        merge,
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
            let (label, target) = split_group(&spike.target);
            (first > baseline_start)
                .then(|| format!("{target} [{label}] (from {})", rfc3339(first)))
        })
        .collect();
    let mut rows = Rows::new(&[
        "target",
        "source",
        "window_access_failures",
        "window_calls",
        "window_rate",
        "baseline_access_failures",
        "baseline_calls",
        "baseline_rate",
        "factor",
    ]);
    let mut lower_bounds = 0usize;
    for spike in &found {
        let (label, target) = split_group(&spike.target);
        if recent
            .get(&spike.target)
            .is_some_and(ClassCounts::lower_bound)
        {
            lower_bounds += 1;
        }
        rows.push(vec![
            Value::from(target),
            Value::from(label),
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
        merge,
    )
    .await?;
    let mut uncounted = Vec::new();
    for ((key, _), failures) in events {
        if failures >= query.rule.min_events && !recent.contains_key(&key) {
            let (label, target) = split_group(&key);
            rows.push(vec![
                Value::from(target),
                Value::from(label),
                Value::from(failures),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::from("unknown: no call counts"),
            ]);
            uncounted.push(format!("{target} [{label}]"));
        }
    }
    let mut notes = Vec::new();
    if lower_bounds > 0 {
        notes.push(lower_bound_note(lower_bounds));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{StringArray, StringViewBuilder};
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
            source: view_array(&["", "", "", "", "", ""]),
            only: None,
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
