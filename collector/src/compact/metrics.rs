//! The compactor's own telemetry, in the Prometheus text format on `/metrics` (port 8889).
//!
//! As for the ingest role ([`crate::metrics`]): names are constants here, and anything more than
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

use crate::metrics::{
    Counter, CounterVec, Gauge, GaugeVec, HistogramVec, write_header, write_sample,
};

use super::table::CommitReport;

/// Metric names and help texts of the compactor.
pub mod names {
    macro_rules! metric_names {
        ($($name:ident = $value:literal, $help:literal;)*) => {
            $(#[doc = $help] pub const $name: &str = $value;)*
            /// Every metric family above.
            pub const ALL: &[&str] = &[$($name),*];
            /// The `# HELP` text of a family named above.
            pub fn help(name: &str) -> &'static str {
                match name { $($value => $help,)* _ => "" }
            }
        };
    }
    metric_names! {
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
        MAINTENANCE_TOTAL = "candor_compactor_maintenance_total",
            "Maintenance runs, by table, job (optimize, vacuum, retention) and result.";
        SERIES_OVERFLOW_TOTAL = "candor_compactor_metric_series_overflow_total",
            "Label sets folded into `other` because a family was full.";
    }
}

/// Every metric of the compactor.
#[derive(Debug)]
pub struct CompactMetrics {
    consumed: CounterVec,
    rows_written: CounterVec,
    already_stored: CounterVec,
    commits: CounterVec,
    commit_duration: HistogramVec,
    commit_stages: HistogramVec,
    files_written: CounterVec,
    bytes_written: CounterVec,
    lag: GaugeVec,
    watermark: GaugeVec,
    duplicates: CounterVec,
    off_time: CounterVec,
    undecodable: CounterVec,
    errors: CounterVec,
    maintenance: CounterVec,
    read_again: Counter,
    not_assigned: Counter,
    assigned: Gauge,
    overflow: Arc<Counter>,
}

impl CompactMetrics {
    /// Every family at zero.
    pub fn new() -> Arc<Self> {
        use names::*;
        let overflow = Arc::new(Counter::new());
        let counters = |name, labels| CounterVec::new(name, labels, Arc::clone(&overflow));
        Arc::new(Self {
            consumed: counters(RECORDS_CONSUMED_TOTAL, &["topic"]),
            rows_written: counters(ROWS_WRITTEN_TOTAL, &["table"]),
            already_stored: counters(ALREADY_STORED_TOTAL, &["table"]),
            commits: counters(COMMITS_TOTAL, &["table"]),
            commit_duration: HistogramVec::new(
                COMMIT_DURATION_SECONDS,
                &["table"],
                Arc::clone(&overflow),
            ),
            commit_stages: HistogramVec::new(
                COMMIT_STAGE_SECONDS,
                &["table", "stage"],
                Arc::clone(&overflow),
            ),
            files_written: counters(FILES_WRITTEN_TOTAL, &["table"]),
            bytes_written: counters(BYTES_WRITTEN_TOTAL, &["table"]),
            lag: GaugeVec::new(CONSUMER_LAG, &["topic", "partition"], Arc::clone(&overflow)),
            watermark: GaugeVec::new(WATERMARK_SECONDS, &["table"], Arc::clone(&overflow)),
            duplicates: counters(DUPLICATES_REMOVED_TOTAL, &["table"]),
            off_time: counters(OFF_TIME_RECORDS_TOTAL, &["table", "arrival"]),
            undecodable: counters(UNDECODABLE_TOTAL, &["reason"]),
            errors: counters(ERRORS_TOTAL, &["reason"]),
            maintenance: counters(MAINTENANCE_TOTAL, &["table", "job", "result"]),
            read_again: Counter::new(),
            not_assigned: Counter::new(),
            assigned: Gauge::new(),
            overflow,
        })
    }

    /// `records` records read from `topic`.
    pub fn consumed(&self, topic: &str, records: u64) {
        self.consumed.with(&[topic]).add(records);
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
        self.undecodable.with(&[reason]).add(count);
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
            .add(report.already_stored as u64);
        if report.version.is_none() {
            return;
        }
        self.commits.with(&[table]).inc();
        self.commit_duration.with(&[table]).observe(elapsed);
        for (stage, took) in report.stages.named() {
            self.commit_stages.with(&[table, stage]).observe(took);
        }
        self.rows_written.with(&[table]).add(report.rows as u64);
        self.files_written.with(&[table]).add(report.files as u64);
        self.bytes_written.with(&[table]).add(report.bytes);
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
        let mut text = String::with_capacity(8 * 1024);
        let out = &mut text;
        for family in [
            &self.consumed,
            &self.rows_written,
            &self.already_stored,
            &self.commits,
            &self.files_written,
            &self.bytes_written,
            &self.duplicates,
            &self.off_time,
            &self.undecodable,
            &self.errors,
            &self.maintenance,
        ] {
            family.render(out);
        }
        self.commit_duration.render(out);
        self.commit_stages.render(out);
        self.lag.render(out);
        self.watermark.render(out);
        for (name, counter) in [
            (names::READ_AGAIN_TOTAL, &self.read_again),
            (names::NOT_ASSIGNED_TOTAL, &self.not_assigned),
            (names::SERIES_OVERFLOW_TOTAL, &*self.overflow),
        ] {
            write_header(out, name, "counter");
            write_sample(out, name, (&[], &[]), None, counter.get());
        }
        write_header(out, names::ASSIGNED_PARTITIONS, "gauge");
        write_sample(
            out,
            names::ASSIGNED_PARTITIONS,
            (&[], &[]),
            None,
            self.assigned.get(),
        );
        text
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
