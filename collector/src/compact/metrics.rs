//! The compactor's own telemetry, in one `prometheus-client` registry rendered
//! in the Prometheus text format on `/metrics` (port 8889).
//!
//! As for the ingest role ([`crate::ingest::metrics`]): names are constants here, and anything more than
//! routine (an undecodable record, an error, a duplicate) is counted by the one method that also
//! logs it.
//!
//! ```
//! use candor_collector::compact::metrics::CompactMetrics;
//! let metrics = CompactMetrics::new();
//! metrics.error("delta", "object store unreachable");
//! assert!(metrics.render().contains("candor_compactor_errors_total{reason=\"delta\"} 1\n"));
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use candor_service::metrics::{Counter, Family, Gauge, Histogram, Metrics, observe};

use super::table::CommitReport;

/// Metric names and help texts of the compactor.
pub mod names {
    candor_service::metric_names! {
        RECORDS_CONSUMED_TOTAL = "candor_compactor_records_consumed_total",
            "Kafka records read, by topic.";
        ROWS_WRITTEN_TOTAL = "candor_compactor_rows_written_total",
            "Rows committed to a table, by table.";
        ALREADY_STORED_TOTAL = "candor_compactor_rows_already_stored_total",
            "Rows left out of a commit because the table already held them, by table.";
        COMMITS_TOTAL = "candor_compactor_commits_total",
            "Delta commits, by table.";
        COMMIT_DURATION_SECONDS = "candor_compactor_commit_duration_seconds",
            "Time to write a table's files and commit them, by table.";
        COMMIT_STAGE_SECONDS = "candor_compactor_commit_stage_seconds",
            "Time of each stage of a commit, by table and stage: sorting the rows, building their Arrow batch, writing the Parquet files, committing to the Delta log.";
        FILES_WRITTEN_TOTAL = "candor_compactor_files_written_total",
            "Parquet files committed, by table.";
        BYTES_WRITTEN_TOTAL = "candor_compactor_bytes_written_total",
            "Bytes of Parquet committed, by table.";
        CONSUMER_LAG = "candor_compactor_consumer_lag",
            "Records in Kafka not yet committed to the tables, by topic and partition.";
        WATERMARK_SECONDS = "candor_compactor_watermark_seconds",
            "Newest row time committed, Unix seconds, by table.";
        DUPLICATES_REMOVED_TOTAL = "candor_compactor_duplicates_removed_total",
            "Records dropped as a retried copy of an id seen within the dedupe window, by table.";
        OFF_TIME_RECORDS_TOTAL = "candor_compactor_off_time_records_total",
            "Rows stored with a time far from their arrival, by table and arrival (late, future).";
        UNDECODABLE_TOTAL = "candor_compactor_undecodable_total",
            "Records stored in the rejected table instead of their own, by reason.";
        ERRORS_TOTAL = "candor_compactor_errors_total",
            "Failures of the compactor, by reason.";
        READ_AGAIN_TOTAL = "candor_compactor_records_read_again_total",
            "Records skipped because they were read before (a seek back or a redelivery).";
        NOT_ASSIGNED_TOTAL = "candor_compactor_records_not_assigned_total",
            "Records of a partition no longer assigned here, left to its new owner.";
        ASSIGNED_PARTITIONS = "candor_compactor_assigned_partitions",
            "Kafka partitions assigned to this compactor.";
        FLUSHES_TOTAL = "candor_compactor_flushes_total",
            "Writes of the buffered rows begun, by what made them due: size (files.target_bytes), memory (files.max_buffer_bytes), rows (files.max_rows), age (files.max_age), retry (after a failed one), stop (the last one, at shutdown).";
        BUFFERED_BYTES = "candor_compactor_buffered_bytes",
            "Memory of the rows read and not yet written, as files.max_buffer_bytes counts it.";
        MAINTENANCE_TOTAL = "candor_compactor_maintenance_total",
            "Maintenance runs, by table, job (optimize, vacuum, retention) and result.";
        SERIES_OVERFLOW_TOTAL = "candor_compactor_metric_series_overflow_total",
            "Label sets folded into `other` because a family was full.";
    }
}

/// Every metric of the compactor.
#[derive(Debug)]
pub struct CompactMetrics {
    registry: Metrics,
    consumed: Family<Counter>,
    rows_written: Family<Counter>,
    already_stored: Family<Counter>,
    commits: Family<Counter>,
    commit_duration: Family<Histogram>,
    commit_stages: Family<Histogram>,
    files_written: Family<Counter>,
    bytes_written: Family<Counter>,
    lag: Family<Gauge>,
    watermark: Family<Gauge>,
    duplicates: Family<Counter>,
    off_time: Family<Counter>,
    undecodable: Family<Counter>,
    errors: Family<Counter>,
    maintenance: Family<Counter>,
    flushes: Family<Counter>,
    buffered: Gauge,
    read_again: Counter,
    not_assigned: Counter,
    assigned: Gauge,
}

impl CompactMetrics {
    /// Every family at zero.
    pub fn new() -> Arc<Self> {
        use names::*;
        let mut m = Metrics::new(help, SERIES_OVERFLOW_TOTAL);
        Arc::new(Self {
            consumed: m.counters(RECORDS_CONSUMED_TOTAL, &["topic"]),
            rows_written: m.counters(ROWS_WRITTEN_TOTAL, &["table"]),
            already_stored: m.counters(ALREADY_STORED_TOTAL, &["table"]),
            commits: m.counters(COMMITS_TOTAL, &["table"]),
            commit_duration: m.histograms(COMMIT_DURATION_SECONDS, &["table"]),
            commit_stages: m.histograms(COMMIT_STAGE_SECONDS, &["table", "stage"]),
            files_written: m.counters(FILES_WRITTEN_TOTAL, &["table"]),
            bytes_written: m.counters(BYTES_WRITTEN_TOTAL, &["table"]),
            lag: m.gauges(CONSUMER_LAG, &["topic", "partition"]),
            watermark: m.gauges(WATERMARK_SECONDS, &["table"]),
            duplicates: m.counters(DUPLICATES_REMOVED_TOTAL, &["table"]),
            off_time: m.counters(OFF_TIME_RECORDS_TOTAL, &["table", "arrival"]),
            undecodable: m.counters(UNDECODABLE_TOTAL, &["reason"]),
            errors: m.counters(ERRORS_TOTAL, &["reason"]),
            maintenance: m.counters(MAINTENANCE_TOTAL, &["table", "job", "result"]),
            flushes: m.counters(FLUSHES_TOTAL, &["reason"]),
            buffered: m.gauge(BUFFERED_BYTES),
            read_again: m.counter(READ_AGAIN_TOTAL),
            not_assigned: m.counter(NOT_ASSIGNED_TOTAL),
            assigned: m.gauge(ASSIGNED_PARTITIONS),
            registry: m,
        })
    }

    /// `records` records read from `topic`.
    pub fn consumed(&self, topic: &str, records: u64) {
        self.consumed.with(&[topic]).inc_by(records);
    }

    /// A write of the buffer begun, for `reason` (a [`super::engine::Due`], `retry` or `stop`).
    pub fn flush(&self, reason: &str) {
        self.flushes.with(&[reason]).inc();
    }

    /// The buffered rows' memory now.
    pub fn set_buffered(&self, bytes: usize) {
        self.buffered.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// A record skipped for having been read before.
    pub fn read_again(&self) {
        self.read_again.inc();
    }

    /// A record of a partition not assigned here.
    pub fn not_assigned(&self) {
        self.not_assigned.inc();
    }

    /// How many partitions are assigned here now.
    pub fn set_assigned(&self, partitions: usize) {
        self.assigned
            .set(i64::try_from(partitions).unwrap_or(i64::MAX));
    }

    /// Records stored as rejected rows, one call per reason and flush: counted, and logged
    /// once with the last detail (not once per record, which a burst would turn into a flood).
    pub fn undecodable(&self, reason: &str, count: u64, detail: &str) {
        self.undecodable.with(&[reason]).inc_by(count);
        tracing::warn!(
            reason,
            count,
            detail,
            "records stored in the rejected table"
        );
    }

    /// A row whose time is far from its arrival (stored, flagged).
    pub fn off_time(&self, table: &str, arrival: &str) {
        self.off_time.with(&[table, arrival]).inc();
    }

    /// A retried copy removed.
    pub fn duplicate(&self, table: &str) {
        self.duplicates.with(&[table]).inc();
    }

    /// A commit of `table` landed (or had nothing to do).
    pub fn committed(&self, table: &str, report: &CommitReport, elapsed: Duration) {
        self.already_stored
            .with(&[table])
            .inc_by(report.already_stored as u64);
        if report.version.is_none() {
            return;
        }
        self.commits.with(&[table]).inc();
        observe(&self.commit_duration.with(&[table]), elapsed);
        for (stage, took) in report.stages.named() {
            observe(&self.commit_stages.with(&[table, stage]), took);
        }
        self.rows_written.with(&[table]).inc_by(report.rows as u64);
        self.files_written
            .with(&[table])
            .inc_by(report.files as u64);
        self.bytes_written.with(&[table]).inc_by(report.bytes);
        if let Some(micros) = report.watermark_micros {
            let watermark = self.watermark.with(&[table]);
            watermark.set(watermark.get().max(micros / 1_000_000));
        }
    }

    /// Sets the lag of a partition.
    pub fn set_lag(&self, topic: &str, partition: i32, lag: i64) {
        self.lag.with(&[topic, &partition.to_string()]).set(lag);
    }

    /// A failure; logged as an error with its detail.
    pub fn error(&self, reason: &str, detail: impl fmt::Display) {
        self.errors.with(&[reason]).inc();
        tracing::error!(reason, error = %detail, "compactor error");
    }

    /// A maintenance job ran.
    pub fn maintenance(&self, table: &str, job: &str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.maintenance.with(&[table, job, result]).inc();
    }

    /// Every family in the Prometheus text format.
    pub fn render(&self) -> String {
        self.registry.encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_a_help_text() {
        let metrics = CompactMetrics::new();
        metrics.consumed("t", 1);
        let text = metrics.render();
        for name in names::ALL {
            assert!(!names::help(name).is_empty(), "{name}");
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} not rendered"
            );
        }
    }
}
