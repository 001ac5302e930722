//! Table maintenance: merge small files of closed date partitions (optimize), delete files no
//! longer referenced (vacuum), and drop date partitions past the retention. Each runs on a
//! schedule in the compact role and as a command (`candor-collector maintain`).
//!
//! All three are Delta operations: optimize commits the merged files and the removal of the
//! small ones atomically, so a reader sees either set, never both or neither; vacuum only deletes
//! files that no snapshot newer than the retention refers to.

use std::num::NonZeroU64;
use std::time::Duration;

use candor_records::tables::column;
use deltalake::operations::vacuum::VacuumMode;
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::{DeltaTable, DeltaTableError, FilterOp, FilterValue};

/// What a maintenance job did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobReport {
    /// Files added (optimize).
    pub files_added: u64,
    /// Files removed from the table (optimize, retention) or deleted from storage (vacuum).
    pub files_removed: u64,
}

/// The `date` of `days` since the epoch, as written in partition values (`YYYY-MM-DD`).
pub fn date_string(days: i32) -> String {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    epoch
        .checked_add_signed(chrono::TimeDelta::days(i64::from(days)))
        .unwrap_or(epoch)
        .format("%Y-%m-%d")
        .to_string()
}

/// Merges the files of every date partition before `today` (days since the epoch) into files
/// of about `target_bytes`, written with the table's own `properties` (zstd, bloom filters,
/// dictionaries) so that merged files prune as well as the compactor's. Today's partition is
/// still being written and is left alone.
pub async fn optimize(
    table: DeltaTable,
    today: i32,
    target_bytes: u64,
    properties: WriterProperties,
) -> Result<(DeltaTable, JobReport), DeltaTableError> {
    let today = date_string(today);
    let filters = [(
        column::DATE,
        FilterOp::Lt,
        FilterValue::Scalar(today.as_str()),
    )];
    let target = NonZeroU64::new(target_bytes).unwrap_or(NonZeroU64::MIN);
    let (table, metrics) = table
        .optimize()
        .with_filters(&filters)
        .with_target_size(target)
        .with_writer_properties(properties)
        .await?;
    Ok((
        table,
        JobReport {
            files_added: metrics.num_files_added,
            files_removed: metrics.num_files_removed,
        },
    ))
}

/// Deletes files that no version of the table newer than `retention` refers to, including
/// files written by a crashed commit that never made it into the log.
pub async fn vacuum(
    table: DeltaTable,
    retention: Duration,
) -> Result<(DeltaTable, JobReport), DeltaTableError> {
    let retention = chrono::Duration::from_std(retention)
        .map_err(|err| DeltaTableError::Generic(format!("vacuum retention: {err}")))?;
    let (table, metrics) = table
        .vacuum()
        .with_retention_period(retention)
        .with_mode(VacuumMode::Full)
        .await?;
    Ok((
        table,
        JobReport {
            files_added: 0,
            files_removed: metrics.files_deleted.len() as u64,
        },
    ))
}

/// Drops the date partitions older than `keep_days` before `today` (days since the epoch).
pub async fn retention(
    table: DeltaTable,
    today: i32,
    keep_days: u32,
) -> Result<(DeltaTable, JobReport), DeltaTableError> {
    let cutoff = today.saturating_sub(i32::try_from(keep_days).unwrap_or(i32::MAX));
    // A partition-only predicate: whole files are removed, nothing is rewritten. The date is
    // formatted by this code, never taken from input.
    let predicate = format!("{} < '{}'", column::DATE, date_string(cutoff));
    let (table, metrics) = table.delete().with_predicate(predicate).await?;
    Ok((
        table,
        JobReport {
            files_added: metrics.num_added_files as u64,
            files_removed: metrics.num_removed_files as u64,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dates_are_iso() {
        assert_eq!(date_string(0), "1970-01-01");
        assert_eq!(date_string(20_000), "2024-10-04");
        assert_eq!(date_string(-1), "1969-12-31");
    }
}
