//! Which instances went silent: the exports of every instance that reports, read from the
//! tables, for [`crate::coverage::instance_silences`] to judge.
//!
//! An adapter instance's exports are its counter points (with the interval each declared). An
//! instance without an adapter, whose calls are derived from its standard spans, has no counter;
//! the collector writes a sender's heartbeat per interval that its spans (or other telemetry)
//! fell in, and those are its exports. An instance with both is judged by its adapter's.

use std::collections::{BTreeMap, BTreeSet};

use candor_records::tables::{Table, column};
use deltalake::arrow::array::{Array as _, BooleanArray, Int64Array, StringArray};
use deltalake::arrow::array::{RecordBatch, TimestampMicrosecondArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, TimeUnit};
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::functions_aggregate::expr_fn::{bool_or, min};
use deltalake::datafusion::prelude::{DataFrame, Expr, col, lit};
use deltalake::datafusion::scalar::ScalarValue;

use super::{Reader, declared_rows};
use crate::commands::Filters;
use crate::coverage::{Coverage, Export, INSTANCE_LOOKBACK, SeenBy, instance_silences};
use crate::window::{Micros, Window};

const INTERVAL: &str = "interval";
const CONCERNED: &str = "concerned";

/// `(service, instance)`.
type Instance = (String, String);

impl Reader {
    /// Adds to `coverage` the instances that went silent inside its window while the pipeline
    /// was live ([`instance_silences`]), among those with a counter point matching `filters`
    /// (every instance with one without filters). Without a window there is no stretch to judge.
    pub async fn add_instance_silences(&self, coverage: &mut Coverage, filters: Option<&Filters>) {
        let Some(window) = coverage.window else {
            return;
        };
        let known_until = coverage.covered_until.unwrap_or(self.now).min(self.now);
        match self.exports(window, filters).await {
            Ok(exports) => {
                coverage.silent_instances = instance_silences(&exports, window, known_until);
            }
            // Not looking is not finding none: the answer is partial.
            Err(err) => coverage.unchecked.push(format!(
                "the counter points and senders' heartbeats could not be read, so instances \
                 that went silent were not looked for: {err}"
            )),
        }
    }

    /// Every instance's exports from [`INSTANCE_LOOKBACK`] before `window` to its end: an
    /// adapter's, then those of the senders seen only by their spans.
    async fn exports(
        &self,
        window: Window,
        filters: Option<&Filters>,
    ) -> Result<Vec<Export>, DataFusionError> {
        let since = window.since.saturating_sub(INSTANCE_LOOKBACK);
        let counts = self
            .window_frame(Table::OutcomeCounts, since, window.until)
            .await?
            .filter(within(since, window.until))?;
        let concerned = filters.and_then(Filters::expr).unwrap_or_else(|| lit(true));
        let (adapter_rows, derived_rows) = match declared_rows(&counts) {
            Some(declared) => (
                counts.clone().filter(declared.clone())?,
                Some(counts.filter(!declared)?),
            ),
            None => (counts, None),
        };
        let mut exports = adapter_exports(adapter_rows, concerned.clone()).await?;
        let Some(derived_rows) = derived_rows else {
            return Ok(exports);
        };
        let adapters: BTreeSet<Instance> = exports
            .iter()
            .map(|export| (export.service.clone(), export.instance.clone()))
            .collect();
        let mut senders = concerning(derived_rows, concerned).await?;
        senders.retain(|instance, _| !adapters.contains(instance));
        if senders.is_empty() {
            return Ok(exports);
        }
        let beats = self
            .window_frame(Table::Heartbeats, since, window.until)
            .await?;
        exports.extend(sender_exports(beats, since, window.until, &senders).await?);
        Ok(exports)
    }
}

/// `time` in [`since`, `until`).
fn within(since: Micros, until: Micros) -> Expr {
    let at = |micros| ScalarValue::TimestampMicrosecond(Some(micros), Some("UTC".into()));
    let time = col(column::TIME);
    time.clone()
        .gt_eq(lit(at(since)))
        .and(time.lt(lit(at(until))))
}

/// One export per adapter instance and point time, with the smallest export interval its
/// points carried (a final export's 0 wins) and whether any of them is `concerned`.
async fn adapter_exports(
    frame: DataFrame,
    concerned: Expr,
) -> Result<Vec<Export>, DataFusionError> {
    // A table written before the column was added, and not opened by a compactor since, has no
    // export intervals.
    let interval = if frame
        .schema()
        .has_column_with_unqualified_name(column::EXPORT_INTERVAL_MS)
    {
        col(column::EXPORT_INTERVAL_MS)
    } else {
        lit(ScalarValue::Int64(None))
    };
    let batches = frame
        .aggregate(
            vec![
                col(column::SERVICE_NAME),
                col(column::SERVICE_INSTANCE_ID),
                col(column::TIME),
            ],
            vec![
                min(interval).alias(INTERVAL),
                bool_or(concerned).alias(CONCERNED),
            ],
        )?
        .collect()
        .await?;
    let mut exports = Vec::new();
    for batch in &batches {
        let rows = Columns::of(batch)?;
        let intervals = cast(batch.column(3), &DataType::Int64)?;
        let concerned = cast(batch.column(4), &DataType::Boolean)?;
        let (Some(intervals), Some(concerned)) = (
            intervals.as_any().downcast_ref::<Int64Array>(),
            concerned.as_any().downcast_ref::<BooleanArray>(),
        ) else {
            return Err(unexpected());
        };
        for row in 0..batch.num_rows() {
            exports.push(Export {
                service: rows.services.value(row).to_owned(),
                instance: rows.instances.value(row).to_owned(),
                seen_by: SeenBy::Adapter,
                at: rows.times.value(row),
                interval: (!intervals.is_null(row))
                    .then(|| intervals.value(row).saturating_mul(1000)),
                concerned: !concerned.is_null(row) && concerned.value(row),
            });
        }
    }
    Ok(exports)
}

/// The instances with derived calls, and whether any of their points is `concerned`.
async fn concerning(
    frame: DataFrame,
    concerned: Expr,
) -> Result<BTreeMap<Instance, bool>, DataFusionError> {
    let batches = frame
        .aggregate(
            vec![col(column::SERVICE_NAME), col(column::SERVICE_INSTANCE_ID)],
            vec![bool_or(concerned).alias(CONCERNED)],
        )?
        .collect()
        .await?;
    let mut instances = BTreeMap::new();
    for batch in &batches {
        let services = cast(batch.column(0), &DataType::Utf8)?;
        let instances_column = cast(batch.column(1), &DataType::Utf8)?;
        let concerned = cast(batch.column(2), &DataType::Boolean)?;
        let (Some(services), Some(names), Some(concerned)) = (
            services.as_any().downcast_ref::<StringArray>(),
            instances_column.as_any().downcast_ref::<StringArray>(),
            concerned.as_any().downcast_ref::<BooleanArray>(),
        ) else {
            return Err(unexpected());
        };
        for row in 0..batch.num_rows() {
            let key = (services.value(row).to_owned(), names.value(row).to_owned());
            let concerns = !concerned.is_null(row) && concerned.value(row);
            *instances.entry(key).or_insert(false) |= concerns;
        }
    }
    Ok(instances)
}

/// The senders' heartbeats of `senders` in [`since`, `until`): one export per sender and
/// interval, which declares no interval of its own.
async fn sender_exports(
    beats: DataFrame,
    since: Micros,
    until: Micros,
    senders: &BTreeMap<Instance, bool>,
) -> Result<Vec<Export>, DataFusionError> {
    // A table written before senders' heartbeats holds none.
    if !beats
        .schema()
        .has_column_with_unqualified_name(column::SERVICE_NAME)
    {
        return Ok(Vec::new());
    }
    let batches = beats
        .filter(within(since, until).and(col(column::SERVICE_NAME).is_not_null()))?
        .aggregate(
            vec![
                col(column::SERVICE_NAME),
                col(column::SERVICE_INSTANCE_ID),
                col(column::TIME),
            ],
            vec![],
        )?
        .collect()
        .await?;
    let mut exports = Vec::new();
    for batch in &batches {
        let rows = Columns::of(batch)?;
        for row in 0..batch.num_rows() {
            if rows.instances.is_null(row) {
                continue;
            }
            let key = (
                rows.services.value(row).to_owned(),
                rows.instances.value(row).to_owned(),
            );
            let Some(&concerned) = senders.get(&key) else {
                continue;
            };
            exports.push(Export {
                service: key.0,
                instance: key.1,
                seen_by: SeenBy::Spans,
                at: rows.times.value(row),
                interval: None,
                concerned,
            });
        }
    }
    Ok(exports)
}

/// The first three columns of an export's batch: service, instance and time.
struct Columns {
    services: StringArray,
    instances: StringArray,
    times: TimestampMicrosecondArray,
}

impl Columns {
    fn of(batch: &RecordBatch) -> Result<Self, DataFusionError> {
        let services = cast(batch.column(0), &DataType::Utf8)?;
        let instances = cast(batch.column(1), &DataType::Utf8)?;
        let times = cast(
            batch.column(2),
            &DataType::Timestamp(TimeUnit::Microsecond, None),
        )?;
        let (Some(services), Some(instances), Some(times)) = (
            services.as_any().downcast_ref::<StringArray>(),
            instances.as_any().downcast_ref::<StringArray>(),
            times.as_any().downcast_ref::<TimestampMicrosecondArray>(),
        ) else {
            return Err(unexpected());
        };
        Ok(Self {
            services: services.clone(),
            instances: instances.clone(),
            times: times.clone(),
        })
    }
}

fn unexpected() -> DataFusionError {
    DataFusionError::Internal("unexpected column types of instances' exports".into())
}
