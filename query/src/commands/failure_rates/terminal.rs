//! The terminal failure events `rates` and `spikes` count: per group and bucket, the failure
//! events whose action ends their call, counted over the files' runs of one group.

use std::collections::BTreeMap;

use candor_records::proto::OutcomeSource;
use candor_records::tables::{Table, column};
use candor_schema::{OutcomeClass, RetryAction};
use deltalake::arrow::array::{
    Array as _, Int64Array, MAX_INLINE_VIEW_LEN, StringViewArray, make_view,
};
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::{DataFrame, col, lit};

use crate::rates::{self, Buckets};
use crate::reader::Reader;
use crate::window::Micros;

use super::super::{CommandError, Filters, GroupBy, ints, read, source_column, views};
use super::{group_key, source_label, source_named};

/// Terminal failure events (retry action other than `retry`) per (group, bucket start), of one
/// class when `class` is given.
pub(super) async fn failure_events(
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
pub(super) async fn failure_events_frame(
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
pub(super) async fn count_failure_events(
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

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{RecordBatch, StringArray, StringViewBuilder};
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
