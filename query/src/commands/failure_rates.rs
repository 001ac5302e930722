//! `rates` and `spikes`: the silent-failure rate of each group over a window, from the counter
//! and the terminal failure events.

use std::collections::BTreeMap;
use std::time::Duration;

use candor_records::tables::{Table, column};
use candor_schema::{OutcomeClass, RetryAction};
use deltalake::arrow::array::{
    Int64Array, MAX_INLINE_VIEW_LEN, RecordBatch, StringViewArray, make_view,
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

use super::{CommandError, Filters, GroupBy, Texts, ints, read, texts, views, window_filter};

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
