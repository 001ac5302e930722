//! Configuration of the compact role: TOML → [`RawCompactConfig`] → [`RawCompactConfig::validate`]
//! (pure) → [`CompactConfig`]. The same error type and rules as every service's
//! ([`candor_service::config`]): unknown keys are refused, invalid values name their key, secrets
//! are never in the file. The `[dedupe]` section is the one the dashboards read too
//! ([`RawDedupe`]).
//!
//! ```
//! use candor_collector::compact::config::CompactConfig;
//! let config = CompactConfig::from_toml_str("table_root = \"/var/lib/candor/tables\"\n").unwrap();
//! assert_eq!(config.table_root, "/var/lib/candor/tables");
//! assert_eq!(config.files.max_age.as_secs(), 60);
//! ```

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use candor_kafka::{GroupConsumerConfig, GroupConsumerDefaults, KafkaSection};
use candor_service::config::{
    ConfigError, invalid, nonzero_usize, parse_duration, parse_toml, socket_addr,
};
use serde::Deserialize;

/// `[dedupe]` as written: the section the compactor shares with the dashboards.
pub use candor_records::ids::RawDedupe;

/// The shortest vacuum retention accepted: a reader's snapshot older than this may lose files
/// under it, so anything shorter is refused rather than clamped.
pub const VACUUM_RETENTION_FLOOR: Duration = Duration::from_secs(3600);

/// The configuration file as written. Every key may be left out; this table is the one place the
/// defaults are documented (`deploy/compactor.example.toml` repeats them, checked by a test).
///
/// | key | default | meaning |
/// |---|---|---|
/// | `table_root` | `"./data/tables"` | where the tables live: a local directory, or an S3 URL (`s3://bucket/prefix`, `s3a://…`; credentials and endpoint from the `AWS_*` variables) |
/// | `compactor_id` | unset: host name and process id | names this compactor in logs and commit metadata |
/// | `kafka.brokers` | `"127.0.0.1:9092"` | bootstrap brokers, comma separated `host:port` |
/// | `kafka.group_id` | `"candor-compactor"` | the consumer group; instances sharing it share the partitions |
/// | `kafka.session_timeout` | `"6s"` | librdkafka `session.timeout.ms`: how soon a dead instance's partitions move; a member alone with no partition for three times this joins again |
/// | `kafka.extra`, `kafka.extra_env` | empty | more librdkafka settings, as for the ingest role; refused there: the consumer settings the compactor sets itself ([`candor_kafka::Role::Consumer`]) |
/// | `files.target_bytes` | `134217728` (128 MiB) | write a file once the buffered rows would make about this much Parquet |
/// | `files.max_age` | `"60s"` | write at the latest this long after the oldest buffered record arrived |
/// | `files.max_rows` | `1048576` | write at the latest when this many rows are buffered |
/// | `files.max_buffer_bytes` | `33554432` (32 MiB) | write at the latest when the buffered rows take this much memory (each row's record bytes and its fixed size): the bound on the buffer. A stream of 2,000 events/s reaches it in about 40 s (an event row takes about 400 bytes); a backlog is written in files of this many bytes of rows |
/// | `files.row_group_rows` | `131072` | rows per Parquet row group: small enough that a bloom filter leaves little to read for one trace, large enough for scans |
/// | `files.zstd_level` | `3` | zstd level of the Parquet pages, 1 to 22 |
/// | `dedupe.window` | `"10m"` | how long an `event_id` (or `point_id`) is remembered to drop a client's retried copy |
/// | `time.late_after` | `"24h"` | a row whose time is older than its Kafka timestamp by more is flagged `late` |
/// | `time.future_after` | `"5m"` | a row whose time is newer than its Kafka timestamp by more is flagged `future` |
/// | `maintenance.enabled` | `true` | run optimize, vacuum and retention on the schedule below; false leaves them to one chosen replica or to `candor-collector maintain` |
/// | `maintenance.interval` | `"1h"` | how often optimize, vacuum and retention run |
/// | `maintenance.vacuum_retention` | `"168h"` | vacuum deletes files unreferenced for longer; at least 1h |
/// | `maintenance.retention_days` | `0` | drop date partitions older than this many days; 0 keeps everything |
/// | `metrics.addr` | `"127.0.0.1:8889"` | self-metrics listen address |
///
/// `[kafka]` is the section every service shares ([`KafkaSection`]), validated for the group
/// consumer with the defaults above ([`KAFKA_DEFAULTS`]): the collector's keys are refused,
/// saying why (`kafka.partitions`: the compactor does not create topics;
/// `kafka.compression`: the compactor does not produce records).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawCompactConfig {
    /// See the table above.
    pub table_root: Option<String>,
    /// See the table above.
    pub compactor_id: Option<String>,
    /// `[kafka]`, validated for the group consumer.
    pub kafka: KafkaSection,
    /// `[files]`.
    pub files: RawFiles,
    /// `[dedupe]`.
    pub dedupe: RawDedupe,
    /// `[time]`.
    pub time: RawTime,
    /// `[maintenance]`.
    pub maintenance: RawMaintenance,
    /// `[metrics]`.
    pub metrics: RawMetrics,
}

/// What each `[kafka]` key left out means: the group consumer's defaults, as in the table on
/// [`RawCompactConfig`].
pub const KAFKA_DEFAULTS: GroupConsumerDefaults<'static> = GroupConsumerDefaults {
    brokers: "127.0.0.1:9092",
    group_id: "candor-compactor",
    session_timeout: "6s",
};

/// `[files]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawFiles {
    /// `files.target_bytes`.
    pub target_bytes: i64,
    /// `files.max_age`.
    pub max_age: String,
    /// `files.max_rows`.
    pub max_rows: i64,
    /// `files.max_buffer_bytes`.
    pub max_buffer_bytes: i64,
    /// `files.row_group_rows`.
    pub row_group_rows: i64,
    /// `files.zstd_level`.
    pub zstd_level: i64,
}

impl Default for RawFiles {
    fn default() -> Self {
        Self {
            target_bytes: 128 * 1024 * 1024,
            max_age: "60s".into(),
            max_rows: 1024 * 1024,
            max_buffer_bytes: 32 * 1024 * 1024,
            row_group_rows: 128 * 1024,
            zstd_level: 3,
        }
    }
}

/// `[time]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawTime {
    /// `time.late_after`.
    pub late_after: String,
    /// `time.future_after`.
    pub future_after: String,
}

impl Default for RawTime {
    fn default() -> Self {
        Self {
            late_after: "24h".into(),
            future_after: "5m".into(),
        }
    }
}

/// `[maintenance]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawMaintenance {
    /// `maintenance.enabled`.
    pub enabled: bool,
    /// `maintenance.interval`.
    pub interval: String,
    /// `maintenance.vacuum_retention`.
    pub vacuum_retention: String,
    /// `maintenance.retention_days`.
    pub retention_days: i64,
}

impl Default for RawMaintenance {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: "1h".into(),
            vacuum_retention: "168h".into(),
            retention_days: 0,
        }
    }
}

/// `[metrics]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawMetrics {
    /// `metrics.addr`.
    pub addr: String,
}

impl Default for RawMetrics {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8889".into(),
        }
    }
}

/// A validated compactor configuration; meanings in the table on [`RawCompactConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactConfig {
    /// A local directory or an object store URL.
    pub table_root: String,
    /// Set when the file names one.
    pub compactor_id: Option<String>,
    /// `[kafka]`.
    pub kafka: GroupConsumerConfig,
    /// `[files]`.
    pub files: FilesConfig,
    /// `dedupe.window`.
    pub dedupe_window: Duration,
    /// `time.late_after`.
    pub late_after: Duration,
    /// `time.future_after`.
    pub future_after: Duration,
    /// `[maintenance]`.
    pub maintenance: MaintenanceConfig,
    /// `metrics.addr`.
    pub metrics_addr: SocketAddr,
}

/// Validated `[files]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesConfig {
    /// Parquet bytes a file is written at.
    pub target_bytes: NonZeroUsize,
    /// Age of the oldest buffered record a file is written at.
    pub max_age: Duration,
    /// Buffered rows a file is written at.
    pub max_rows: NonZeroUsize,
    /// Memory of the buffered rows a file is written at.
    pub max_buffer_bytes: NonZeroUsize,
    /// Rows per row group.
    pub row_group_rows: NonZeroUsize,
    /// zstd level, 1 to 22.
    pub zstd_level: i32,
}

/// Validated `[maintenance]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceConfig {
    /// Whether this process runs maintenance on its schedule (`candor-collector maintain`
    /// runs it whatever this says).
    pub enabled: bool,
    /// Time between two maintenance runs.
    pub interval: Duration,
    /// At least [`VACUUM_RETENTION_FLOOR`].
    pub vacuum_retention: Duration,
    /// `None` keeps every partition.
    pub retention_days: Option<u32>,
}

impl RawCompactConfig {
    /// Parses TOML text; unknown keys and values of the wrong type are refused.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// Checks every value and converts it to its real type. Pure: nothing is read or opened.
    pub fn validate(self) -> Result<CompactConfig, ConfigError> {
        let table_root = self.table_root.unwrap_or_else(|| "./data/tables".into());
        if table_root.trim().is_empty() {
            return Err(invalid("table_root", &table_root, "must not be blank"));
        }
        if let Some(id) = &self.compactor_id
            && id.trim().is_empty()
        {
            return Err(invalid("compactor_id", id, "must not be blank"));
        }
        let kafka = self.kafka.group_consumer(&KAFKA_DEFAULTS)?;
        let files = self.files.validate()?;
        let maintenance = self.maintenance.validate()?;
        Ok(CompactConfig {
            table_root,
            compactor_id: self.compactor_id,
            kafka,
            files,
            dedupe_window: self
                .dedupe
                .validate()
                .map_err(|err| invalid(RawDedupe::WINDOW_KEY, err.text, err.reason))?,
            late_after: parse_duration("time.late_after", &self.time.late_after)?,
            future_after: parse_duration("time.future_after", &self.time.future_after)?,
            maintenance,
            metrics_addr: socket_addr("metrics.addr", &self.metrics.addr)?,
        })
    }
}

impl RawFiles {
    fn validate(self) -> Result<FilesConfig, ConfigError> {
        if !(1..=22).contains(&self.zstd_level) {
            return Err(invalid(
                "files.zstd_level",
                self.zstd_level,
                "expected 1 to 22",
            ));
        }
        Ok(FilesConfig {
            target_bytes: nonzero_usize("files.target_bytes", self.target_bytes)?,
            max_age: parse_duration("files.max_age", &self.max_age)?,
            max_rows: nonzero_usize("files.max_rows", self.max_rows)?,
            max_buffer_bytes: nonzero_usize("files.max_buffer_bytes", self.max_buffer_bytes)?,
            row_group_rows: nonzero_usize("files.row_group_rows", self.row_group_rows)?,
            // Checked to be 1..=22 above.
            zstd_level: i32::try_from(self.zstd_level).unwrap_or(3),
        })
    }
}

impl RawMaintenance {
    fn validate(self) -> Result<MaintenanceConfig, ConfigError> {
        let vacuum_retention =
            parse_duration("maintenance.vacuum_retention", &self.vacuum_retention)?;
        if vacuum_retention < VACUUM_RETENTION_FLOOR {
            return Err(invalid(
                "maintenance.vacuum_retention",
                &self.vacuum_retention,
                "must be at least 1h: a reader's snapshot could lose files under it",
            ));
        }
        let retention_days = match self.retention_days {
            0 => None,
            days @ 1..=36_500 => u32::try_from(days).ok(),
            days => {
                return Err(invalid(
                    "maintenance.retention_days",
                    days,
                    "expected 0 (keep everything) to 36500",
                ));
            }
        };
        Ok(MaintenanceConfig {
            enabled: self.enabled,
            interval: parse_duration("maintenance.interval", &self.interval)?,
            vacuum_retention,
            retention_days,
        })
    }
}

impl CompactConfig {
    /// Parses and validates TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        RawCompactConfig::from_toml_str(text)?.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        CompactConfig::from_toml_str(text).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_those_of_the_table() {
        let config = CompactConfig::from_toml_str("").unwrap();
        assert_eq!(config.table_root, "./data/tables");
        assert_eq!(config.kafka.bootstrap_servers(), "127.0.0.1:9092");
        assert_eq!(config.kafka.group_id, "candor-compactor");
        assert_eq!(config.files.target_bytes.get(), 128 * 1024 * 1024);
        assert_eq!(config.files.max_age, Duration::from_secs(60));
        assert_eq!(config.files.max_buffer_bytes.get(), 32 * 1024 * 1024);
        assert_eq!(config.dedupe_window, Duration::from_secs(600));
        assert_eq!(config.maintenance.retention_days, None);
        assert!(config.maintenance.enabled);
        assert_eq!(config.metrics_addr.port(), 8889);
    }

    #[test]
    fn scheduled_maintenance_can_be_left_to_another_process() {
        let text = "[maintenance]\nenabled = false\n";
        let config = RawCompactConfig::from_toml_str(text)
            .unwrap()
            .validate()
            .unwrap();
        assert!(!config.maintenance.enabled);
    }

    #[test]
    fn the_example_config_parses_to_the_defaults() {
        let example = include_str!("../../../deploy/compactor.example.toml");
        let parsed = CompactConfig::from_toml_str(example).unwrap();
        assert_eq!(parsed, CompactConfig::from_toml_str("").unwrap());
    }

    #[test]
    fn bad_values_name_their_key() {
        assert!(refusal("[files]\nzstd_level = 40\n").contains("files.zstd_level"));
        assert!(refusal("[maintenance]\nvacuum_retention = \"5m\"\n").contains("at least 1h"));
        assert!(
            refusal("[kafka]\nextra = { \"enable.auto.commit\" = \"true\" }\n")
                .contains("offsets live in the table")
        );
        assert!(
            refusal("[kafka]\nextra = { \"sasl.password\" = \"hunter2\" }\n")
                .contains("(not shown)")
        );
        assert!(
            !refusal("[kafka]\nextra = { \"sasl.password\" = \"hunter2\" }\n").contains("hunter2")
        );
        assert!(refusal("[files]\nmax_age = \"soon\"\n").contains("files.max_age"));
        assert!(refusal("[files]\nmax_buffer_bytes = 0\n").contains("files.max_buffer_bytes"));
        assert!(refusal("tabel_root = \"x\"\n").contains("tabel_root"));
        assert!(refusal("[maintenance]\nretention_days = -1\n").contains("retention_days"));
    }

    #[test]
    fn the_collectors_kafka_keys_are_refused_with_why() {
        assert_eq!(
            refusal("[kafka]\npartitions = 3\n"),
            "invalid kafka.partitions = \"3\": the compactor does not create topics"
        );
        assert_eq!(
            refusal("[kafka]\ncompression = \"zstd\"\n"),
            "invalid kafka.compression = \"zstd\": the compactor does not produce records"
        );
        let unknown = refusal("[kafka]\ngroup = \"g\"\n");
        assert!(
            unknown.contains("at line 2: unknown field `group`"),
            "{unknown}"
        );
        assert_eq!(
            refusal("[kafka]\ngroup_id = \" \"\n"),
            "invalid kafka.group_id = \" \": must not be blank"
        );
    }
}
