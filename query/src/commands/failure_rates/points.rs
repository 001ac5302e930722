//! The counter points `rates`, `spikes` and `operations` read: each group's `tool.outcomes`
//! points of a window and its lookback, with what their derived counts said of sampling.

use std::collections::BTreeMap;

use candor_records::proto::{CountClass, Sampling};
use candor_records::tables::{Table, column};
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::{Expr, col};

use crate::rates::{self, Point};
use crate::reader::Reader;
use crate::window::{Micros, Window};

use super::super::{
    CommandError, Filters, GroupBy, Texts, added_text_column, convention_column, ints, read,
    source_column, texts, window_filter,
};
use super::{group_key, source_label, source_named};

/// Counter points of `[since, until)` (the window and its lookback), grouped by `by` (and by
/// source unless `merge`), and the number of points inside `window` left out: those with
/// unspecified temporality, or a class or source this reader does not know.
pub(in crate::commands) async fn points(
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
pub(in crate::commands) struct SamplingSeen {
    /// Some were weighted by their spans' sampling thresholds.
    pub weighted: bool,
    /// Some counted spans whose sampling is unknown.
    pub unknown: bool,
}

impl SamplingSeen {
    /// How a row states it: `unknown` when any count's sampling is unknown (the row then counts
    /// only what the senders kept), else `weighted`.
    pub(in crate::commands) fn state(self) -> Option<Sampling> {
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
pub(in crate::commands) type GroupSampling = BTreeMap<std::sync::Arc<str>, SamplingSeen>;
