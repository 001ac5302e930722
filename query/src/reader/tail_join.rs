//! The Kafka tail joined to its table: the tail read from the positions the table holds, a
//! client's retried copies removed (within the tail, and against the table within the dedupe
//! window), and the tail's rows unioned with the table's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use candor_records::rows::{Meta, Row};
use candor_records::tables::{Table, column};
use deltalake::arrow::array::{Array as _, RecordBatch, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::datasource::MemTable;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::prelude::{col, lit};
use deltalake::datafusion::scalar::ScalarValue;

use super::Reader;
use crate::rates::id_key;
use crate::store::OpenTable;
use crate::tail::{Tail, TailSettings, TopicTail};
use crate::window::Micros;

impl Reader {
    /// Drops tail rows whose id the table already holds (stored within the compactor's dedupe
    /// window before the row's own Kafka time); returns how many.
    pub(super) async fn dedupe_against(
        &self,
        table: Table,
        provider: Arc<dyn TableProvider>,
        rows: &mut Vec<(Meta, Row)>,
    ) -> Result<u64, DataFusionError> {
        let (Some(id_column), Some(oldest)) = (
            table.id_column(),
            rows.iter().map(|(meta, _)| meta.kafka_micros).min(),
        ) else {
            return Ok(0);
        };
        let since = ScalarValue::TimestampMicrosecond(
            Some(oldest.saturating_sub(self.dedupe_window)),
            Some("UTC".into()),
        );
        let stored = self
            .context
            .read_table(provider)?
            .filter(col(column::KAFKA_TIMESTAMP).gt_eq(lit(since)))?
            .select(vec![col(id_column), col(column::KAFKA_TIMESTAMP)])?
            .collect()
            .await?;
        let mut ids: HashMap<u128, Micros> = HashMap::new();
        for batch in &stored {
            let column = cast(
                batch.column(0),
                &deltalake::arrow::datatypes::DataType::Utf8,
            )?;
            let times = cast(
                batch.column(1),
                &deltalake::arrow::datatypes::DataType::Timestamp(
                    deltalake::arrow::datatypes::TimeUnit::Microsecond,
                    None,
                ),
            )?;
            let (Some(strings), Some(times)) = (
                column.as_any().downcast_ref::<StringArray>(),
                times.as_any().downcast_ref::<TimestampMicrosecondArray>(),
            ) else {
                return Err(DataFusionError::Internal(
                    "unexpected id column types".into(),
                ));
            };
            for row in 0..batch.num_rows() {
                if strings.is_valid(row) {
                    ids.insert(id_key(strings.value(row)), times.value(row));
                }
            }
        }
        let before = rows.len();
        // A copy counts as one only when it came within the window after the stored row, as the
        // compactor would have dropped it.
        rows.retain(|(meta, row)| {
            row.id().is_none_or(|id| {
                ids.get(&id_key(id)).is_none_or(|stored| {
                    meta.kafka_micros.saturating_sub(*stored) > self.dedupe_window
                })
            })
        });
        Ok(u64::try_from(before - rows.len()).unwrap_or(0))
    }

    /// The table's provider unioned with the tail's rows, and the tail's rows alone (in the
    /// table's types).
    pub(super) async fn union(
        &self,
        provider: Option<Arc<dyn TableProvider>>,
        batch: RecordBatch,
    ) -> Result<(Arc<dyn TableProvider>, Arc<dyn TableProvider>), DataFusionError> {
        let Some(provider) = provider else {
            let tail = mem_table(batch.schema(), vec![batch])?;
            return Ok((tail.clone(), tail));
        };
        // The provider's types win (a Delta scan may present strings or times differently).
        let schema = provider.schema();
        let mut columns = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let column = batch.column_by_name(field.name()).ok_or_else(|| {
                DataFusionError::Plan(format!("the tail has no column {}", field.name()))
            })?;
            columns.push(cast(column, field.data_type())?);
        }
        let batch = RecordBatch::try_new(schema.clone(), columns)?;
        let tail = mem_table(schema, vec![batch])?;
        let union = self
            .context
            .read_table(provider)?
            .union(self.context.read_table(tail.clone())?)?;
        Ok((union.into_view(), tail))
    }
}

/// Reads the tails of `tables` from the positions the opened tables hold.
pub(super) async fn read_tail(
    settings: TailSettings,
    tables: &[Table],
    opened: &BTreeMap<Table, OpenTable>,
) -> Result<BTreeMap<Table, TopicTail>, String> {
    let topics = tables.to_vec();
    let connected = tokio::task::spawn_blocking(move || Tail::connect(settings, &topics))
        .await
        .map_err(|err| format!("the tail reader stopped: {err}"))?;
    let (tail, partitions) = connected.map_err(|err| err.to_string())?;
    let mut starts = BTreeMap::new();
    for (table, ids) in partitions {
        for partition in ids {
            let start = match opened.get(&table) {
                Some(open) => open
                    .position(partition)
                    .await
                    .map_err(|err| format!("the table's position could not be read: {err}"))?
                    .unwrap_or(0),
                None => 0,
            };
            starts.insert((table, partition), start);
        }
    }
    tokio::task::spawn_blocking(move || tail.read(&starts))
        .await
        .map_err(|err| format!("the tail reader stopped: {err}"))
}

/// Removes rows whose id an earlier row has; returns how many.
pub(super) fn dedupe_within(rows: &mut Vec<(Meta, Row)>) -> u64 {
    let mut seen: HashSet<u128> = HashSet::new();
    let before = rows.len();
    rows.retain(|(_, row)| row.id().is_none_or(|id| seen.insert(id_key(id))));
    u64::try_from(before - rows.len()).unwrap_or(0)
}

pub(super) fn tail_detail(tail: &TopicTail, duplicates: u64) -> String {
    let ranges: Vec<String> = tail
        .ranges
        .iter()
        .map(|range| format!("p{} {}..{}", range.partition, range.from, range.to))
        .collect();
    let mut detail = format!("offsets {}", ranges.join(" "));
    if duplicates > 0 {
        detail.push_str(&format!("; {duplicates} retried copies removed"));
    }
    detail
}

pub(super) fn mem_table(
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<Arc<dyn TableProvider>, DataFusionError> {
    Ok(Arc::new(MemTable::try_new(schema, vec![batches])?))
}
