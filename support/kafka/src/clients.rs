//! The three kinds of Kafka client Candor's programs build, each configured here and nowhere
//! else. A builder sets its defaults (which the file's extra settings may change), then the
//! extra settings, then the settings its [`Role`] reserves: whatever a builder decides, a file
//! is refused for naming, and nothing a file names is silently overwritten.
//!
//! - [`ProducerSettings`]: the collector's idempotent, `acks=all` producer and its admin client.
//! - [`GroupConsumerSettings`]: the compactor's consumer, a group member reading committed
//!   records whose offsets live in the tables.
//! - [`Reader`]: a group-less reader (`candor`'s tail, the dashboards' stream, `candor-collector
//!   read`): it assigns partitions itself, never lets librdkafka commit, and is told when it
//!   reaches a partition's end.

use std::fmt;
use std::time::Duration;

use rdkafka::config::ClientConfig;

use crate::ClientSettings;
#[cfg(doc)]
use crate::Role;

/// The producer's compression codec (librdkafka `compression.type`). Gzip is not one: this
/// build's librdkafka has no zlib.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// `none`.
    None,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd`.
    Zstd,
}

impl Compression {
    /// The value of librdkafka's `compression.type`, as written in a configuration file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the collector's producer is built.
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// `host:port,host:port`.
    pub bootstrap_servers: String,
    /// How long a record may take to be acknowledged before its request fails.
    pub delivery_timeout: Duration,
    /// The most records waiting in the producer's queue.
    pub queue_max_messages: usize,
    /// The codec records are compressed with.
    pub compression: Compression,
    /// librdkafka `compression.level`; `None` leaves the codec's default.
    pub compression_level: Option<i32>,
    /// The client id reported to the brokers.
    pub client_id: String,
    /// Further librdkafka settings (SASL, TLS), validated for [`Role::Producer`]: they may not
    /// override idempotence or acks.
    pub extra: ClientSettings,
}

impl ProducerSettings {
    /// The admin client's configuration: the brokers, the client id and the extra settings.
    pub fn admin_config(&self) -> ClientConfig {
        self.with_extra(ClientConfig::new())
    }

    /// `config` with the extra settings, then the brokers and the client id.
    fn with_extra(&self, mut config: ClientConfig) -> ClientConfig {
        self.extra.apply(&mut config);
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("client.id", &self.client_id);
        config
    }

    /// The producer's configuration: the admin client's, idempotent with `acks=all`, so a
    /// client hears of its records only once every replica in sync holds them. It waits up to
    /// 5 ms to batch records (`linger.ms`, which the file may change).
    pub fn producer_config(&self) -> ClientConfig {
        let mut defaults = ClientConfig::new();
        defaults.set("linger.ms", "5");
        let mut config = self.with_extra(defaults);
        if let Some(level) = self.compression_level {
            config.set("compression.level", level.to_string());
        }
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("compression.type", self.compression.as_str())
            .set(
                "queue.buffering.max.messages",
                self.queue_max_messages.to_string(),
            )
            .set(
                "message.timeout.ms",
                self.delivery_timeout.as_millis().to_string(),
            );
        config
    }
}

/// How the compactor's consumer is built.
#[derive(Debug, Clone)]
pub struct GroupConsumerSettings {
    /// `host:port,host:port`.
    pub bootstrap_servers: String,
    /// The consumer group.
    pub group_id: String,
    /// How long the group waits for a silent member before it hands its partitions on.
    pub session_timeout: Duration,
    /// The client id reported to the brokers.
    pub client_id: String,
    /// How often librdkafka reports its statistics (the compactor's lag metric).
    pub statistics_interval: Duration,
    /// Further librdkafka settings (values of `extra_env` resolved; its `Debug` does not show
    /// them), validated for [`Role::Consumer`].
    pub extra: ClientSettings,
}

impl GroupConsumerSettings {
    /// The consumer's configuration: its offsets are the tables' (librdkafka commits and stores
    /// none), it reads committed records only, and a partition with no stored position starts
    /// at its earliest record.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        self.extra.apply(&mut config);
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", &self.group_id)
            .set("client.id", &self.client_id)
            .set("session.timeout.ms", millis(self.session_timeout))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            .set("statistics.interval.ms", millis(self.statistics_interval));
        config
    }
}

/// Where a reader reads a partition from when the brokers no longer hold its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// From the oldest record they keep (a start lost to retention is said by the reader).
    Earliest,
    /// Nowhere: the read fails, and the reader reports it rather than jumping silently.
    Error,
}

/// A group-less reader: it assigns partitions itself, so every copy of a program reads every
/// partition; librdkafka commits and stores no offset (a reader that keeps its place commits
/// by hand); each partition's end is reported as an event. librdkafka logs only its errors
/// (`log_level` 3, which the file may change).
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    /// `host:port,host:port`.
    pub bootstrap_servers: &'a str,
    /// Its group id and client id: the group its offsets are committed under, if any; it never
    /// joins it.
    pub id: &'a str,
    /// Where a partition whose start the brokers no longer hold is read from.
    pub reset: OffsetReset,
    /// Whether it reads to the ends of its partitions and stops: then a fetch at the end
    /// returns at once instead of waiting at the broker for new records (librdkafka's default
    /// 500 ms).
    pub stops_at_end: bool,
}

impl Reader<'_> {
    /// The reader's configuration, with `extra` (validated for [`Role::Reader`]) under its own.
    pub fn config(&self, extra: &ClientSettings) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("log_level", "3");
        extra.apply(&mut config);
        config
            .set("bootstrap.servers", self.bootstrap_servers)
            .set("group.id", self.id)
            .set("client.id", self.id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set(
                "auto.offset.reset",
                match self.reset {
                    OffsetReset::Earliest => "earliest",
                    OffsetReset::Error => "error",
                },
            );
        if self.stops_at_end {
            config.set("fetch.wait.max.ms", "10");
        }
        config
    }
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}
