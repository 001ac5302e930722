//! The table watcher: reads the Delta logs (read-only, no data file) on a schedule for the
//! tables' committed watermark and stored positions, and from them the compactor's lag against
//! what the dashboards' consumer has read.

use std::sync::Arc;
use std::time::Duration;

use candor_query::store::{OpenTable, TableRoot};
use candor_records::tables::Table;

use crate::state::Shared;
use crate::sync::lock;

/// Reads the tables every `every` until the process ends.
pub async fn run(root: TableRoot, every: Duration, shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let result = check(&root, &shared).await;
        let mut pipeline = lock(&shared.pipeline);
        match result {
            Ok(seen) => {
                pipeline.table_error = None;
                pipeline.table_watermark = seen.watermark;
                pipeline.table_newest = seen.newest;
                pipeline.table_lag = seen.lag;
            }
            Err(err) => pipeline.table_error = Some(err),
        }
    }
}

#[derive(Debug, Default)]
struct Seen {
    watermark: Option<i64>,
    newest: std::collections::BTreeMap<Table, i64>,
    lag: std::collections::BTreeMap<Table, u64>,
}

async fn check(root: &TableRoot, shared: &Shared) -> Result<Seen, String> {
    root.check().map_err(|err| err.to_string())?;
    let read = lock(&shared.pipeline).next_offsets.clone();
    let mut seen = Seen::default();
    for table in Table::ALL {
        let open = match OpenTable::open(root, table).await {
            Ok(open) => open,
            // The compactor creates each table at its first commit; until then it is absent.
            Err(candor_query::store::StoreError::NoTable { .. }) => continue,
            Err(err) => return Err(err.to_string()),
        };
        if let Some(Some(newest)) = open.newest_from_log(table.time_column()) {
            seen.newest.insert(table, newest);
            if table == Table::Heartbeats {
                seen.watermark = Some(newest);
            }
        }
        let mut lag = 0u64;
        for (&(topic, partition), &next) in read.range((table, i32::MIN)..=(table, i32::MAX)) {
            debug_assert_eq!(topic, table);
            let stored = open
                .position(partition)
                .await
                .map_err(|err| err.to_string())?
                .unwrap_or(0);
            lag += u64::try_from(next.saturating_sub(stored)).unwrap_or(0);
        }
        seen.lag.insert(table, lag);
    }
    Ok(seen)
}
