//! `reconcile`: where the adapter's two records of failed calls, the counter and the events,
//! disagree.

use std::collections::BTreeMap;
use std::time::Duration;

use candor_records::tables::{Table, column};
use candor_schema::{OutcomeClass, RetryAction};
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::{Expr, col, lit};

use crate::rates::{self};
use crate::reader::Reader;
use crate::reconcile::{self, CounterPoint, SeriesKey};
use crate::window::{Micros, Window, micros_of};

use super::rows::ReconcileRow;
use super::{CommandError, Filters, in_window, ints, read, strings};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileAnswer {
    /// One row per window where a gap appeared or grew, then one per series with events but
    /// no counter.
    pub rows: Vec<ReconcileRow>,
    /// The figures, for a person.
    pub summary: Vec<String>,
    /// What the reader should know (series without a baseline).
    pub notes: Vec<String>,
    /// What could not be checked: the answer is partial when this is not empty.
    pub unchecked: Vec<String>,
    /// The figures.
    pub totals: reconcile::Totals,
}

/// The columns of `reconcile`'s rows ([`ReconcileRow`]): the series, the window, the counter's
/// increase and the events in it, and the gap that appeared there.
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

/// `columns` of an adapter's rows of `table` that match `predicate`. Only an adapter records a
/// failed call twice (a counter and an event); a derived call's count and event are written
/// together by the collector, from one span, and have nothing to reconcile.
async fn select(
    reader: &Reader,
    table: Table,
    predicate: Expr,
    columns: Vec<Expr>,
) -> Result<Vec<RecordBatch>, CommandError> {
    let frame = reader.context.table(table.name()).await.map_err(read)?;
    let predicate = match crate::reader::declared_rows(&frame) {
        Some(declared) => predicate.and(declared),
        None => predicate,
    };
    frame
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
    // The events that end their calls (`candor_schema::action_ends_call`).
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
    let mut rows = Vec::new();
    for (key, check) in &result.series {
        for window in check.windows.iter().filter(|window| window.gap_grew()) {
            rows.push(ReconcileRow {
                series: key.clone(),
                window_start: window.from,
                window_end: window.to,
                counted: Some(window.counted),
                events: window.events,
                missing: window.new_missing,
                extra: window.new_extra,
            });
        }
    }
    for (key, &events) in &result.without_counter {
        rows.push(ReconcileRow {
            series: key.clone(),
            window_start: query.window.since,
            window_end: query.window.until,
            counted: None,
            events,
            missing: 0,
            extra: events,
        });
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
