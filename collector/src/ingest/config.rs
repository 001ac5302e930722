//! Configuration of the ingest role: TOML → [`RawConfig`] (serde) → [`RawConfig::validate`] (pure,
//! no I/O) → [`Config`] with real types. Reading the file, the environment and binding sockets are
//! left to the caller. The error type and the value rules (durations, addresses, counts) are
//! those every service shares ([`candor_service::config`]); `[kafka]` is the section every
//! service shares, validated for the producer ([`candor_kafka::KafkaSection::producer`]).
//!
//! ```
//! use candor_collector::ingest::config::Config;
//! let config = Config::from_toml_str("[kafka]\nbrokers = \"k1:9092, k2:9092\"\n").unwrap();
//! assert_eq!(config.kafka_bootstrap_servers(), "k1:9092,k2:9092");
//! ```

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use candor_kafka::{KafkaSection, ProducerConfig, ProducerDefaults};
use candor_records::proto::OutcomeSource;
use candor_service::config::{invalid, nonzero_usize, parse_toml, socket_addr};
use serde::Deserialize;

pub use crate::ingest::extract::derived::DerivedConfig;
use crate::ingest::extract::derived::{Conventions, RawConvention};
pub use crate::sink::kafka::spool::SpoolSettings;

/// The error type and rules every service shares ([`candor_service::config`]), named from here too.
pub use candor_kafka::Compression;
pub use candor_service::config::{BrokerAddr, ConfigError, parse_duration};

/// The configuration file as written. Every key may be left out; this table is the one place
/// the defaults are documented (`deploy/collector.example.toml` repeats them, checked by a test).
///
/// | key | default | meaning |
/// |---|---|---|
/// | `collector_id` | unset: the caller derives one from host name and process id | names this collector in heartbeats and records |
/// | `otlp.grpc_addr` | `"127.0.0.1:4317"` | OTLP/gRPC listen address (IP and port) |
/// | `otlp.http_addr` | `"127.0.0.1:4318"` | OTLP/HTTP listen address (IP and port) |
/// | `otlp.max_request_bytes` | `20971520` (20 MiB) | largest request body, counted after decompression |
/// | `otlp.max_in_flight_requests` | `64` | requests handled at once, both transports together; more are answered "retry later" (UNAVAILABLE / 503), which bounds memory |
/// | `otlp.auth_token_env` | unset: no authentication | name of the environment variable holding the bearer token clients must send |
/// | `otlp.tls_cert_path`, `otlp.tls_key_path` | unset: plain text | PEM certificate chain and private key for the OTLP listeners; both or neither |
/// | `limits.max_value_bytes` | `4096` | longest attribute value accepted in an event; at most `otlp.max_request_bytes` |
/// | `limits.max_attributes_per_event` | `128` | most attributes on one event |
/// | `limits.max_events_per_request` | `10000` | most events and counter points in one request; at most half of `kafka.queue_max_messages`, so that one request always fits the producer's queue |
/// | `limits.max_rejected_copy_bytes` | `4096` | most bytes of a rejected event copied into `candor.rejected.v1` |
/// | `kafka.brokers` | `"127.0.0.1:9092"` | bootstrap brokers, comma separated `host:port` (IPv6 hosts in brackets) |
/// | `kafka.create_topics` | `true` | create missing topics at start-up |
/// | `kafka.partitions` | `3` | partitions of a topic the collector creates |
/// | `kafka.replication_factor` | `1` | replication factor of a topic the collector creates |
/// | `kafka.delivery_timeout` | `"5s"` | how long a record may take to be acknowledged before it counts as failed (librdkafka `delivery.timeout.ms`) |
/// | `kafka.queue_max_messages` | `100000` | bound of the producer's local queue (`queue.buffering.max.messages`) |
/// | `kafka.compression` | `"zstd"` | `none`, `snappy`, `lz4` or `zstd` (not `gzip`: no zlib in this build) |
/// | `kafka.compression_level` | unset: 1 for zstd, the codec's own default for lz4 | librdkafka `compression.level`: 1–12 for zstd, 0–12 for lz4; not for `none` or `snappy`. zstd's own default (3) made the collector spend about a fifth more CPU per event (`tests/bench/collector.sh`) |
/// | `kafka.extra` | empty | more librdkafka settings passed as-is (SASL, TLS); values are strings |
/// | `kafka.extra_env` | empty | librdkafka settings whose values come from environment variables: setting → variable name |
/// | `heartbeat.interval` | `"10s"` | how often a heartbeat goes to `candor.heartbeats.v1`; also the width of the intervals senders' heartbeats are about |
/// | `heartbeat.max_sender_intervals` | `100000` | most senders' heartbeats (a sender and an interval its data fell in) kept between two heartbeats; past it, more are counted in `candor_collector_sender_intervals_dropped_total` and not kept, and their senders may be judged silent |
/// | `metrics.addr` | `"127.0.0.1:8888"` | self-metrics listen address |
/// | `spool.dir` | unset: no spool | a local directory where records Kafka cannot take yet are kept (fsynced) before the request is acknowledged, and drained to Kafka in order when it returns |
/// | `spool.max_bytes` | `1073741824` (1 GiB) | most bytes of records spooled; past it, requests are answered "retry later" (UNAVAILABLE / 503) |
/// | `spool.max_age` | `"24h"` | oldest a spooled record may grow; an older one is dropped unsent, counted and logged |
/// | `derived.genai` | `true` | count the calls of the conventions of the `genai` layer: GenAI `execute_tool` spans, OpenInference, OpenLLMetry, the Vercel AI SDK, Spring AI, pydantic-ai (contract section 10.7) |
/// | `derived.mcp` | `true` | count the calls of the conventions of the `mcp` layer: MCP `tools/call` spans, Logfire's MCP spans |
/// | `derived.http` | `true` | count the calls of HTTP client spans |
/// | `derived.disable` | `[]` | built-in conventions not to recognise, by name |
/// | `derived.conventions` | `[]` | conventions of the team's own, tried before the built-in ones; one named like a built-in convention takes its place (CONFIGURATION.md, "Derived conventions") |
/// | `derived.request_id_attributes` | `http.response.header.x-request-id`, then `http.response.header.x_request_id` (older conventions) | HTTP span attributes holding the request id its server assigned; a failed call's evidence |
/// | `derived.max_result_bytes` | `65536` | longest captured result read for failure markers; a longer one is not read, and counted |
/// | `derived.max_targets_per_service` | `500` | most distinct derived targets and tools kept per service, counted together; later ones are recorded as `other` and counted |
/// | `derived.max_targets` | `200000` | most distinct derived targets kept over all services, which bounds the memory of the cap |
/// | `derived.forget_targets_after` | `"1h"` | a kept target or tool that no call named for this long gives up its place under the cap (within two such periods) |
/// | `derived.join_window` | `"30s"` | how long a counted GenAI or MCP call is remembered (between this and twice this), so that its spans arriving in later requests (another process's, a later batch's) are not counted again |
/// | `derived.max_join_keys` | `3500000` | the most keys the join across requests keeps (one per span, parent and tool call id of each counted call; a 17-byte slot each in a table up to twice their number, about 72 MiB at most by default); past it, the oldest are forgotten early and counted in `candor_collector_derived_join_keys_dropped_total` |
///
/// Durations are numbers with units, added up: `250ms`, `5s`, `2m`, `1h 30m`, `2d` (see
/// [`parse_duration`]).
///
/// **Secrets are never in the file.** A configuration file is committed, baked into images, copied
/// into ConfigMaps and printed when debugging, so it is read by more people and tools than a secret
/// should be. The file names environment variables instead (`otlp.auth_token_env`,
/// `kafka.extra_env`), which a secret store fills and rotates without touching the file; and
/// `validate` stays pure, since reading the environment is the caller's I/O. For the same reason
/// [`validate`](Self::validate) refuses librdkafka password and secret settings in `kafka.extra`,
/// and refuses there the settings the collector's delivery guarantee depends on
/// (`enable.idempotence`, `acks`, `request.required.acks`) or that a typed key above already sets
/// (the rules of [`candor_kafka::Role::Producer`], shared with the other services in
/// [`candor_kafka`]).
///
/// `[kafka]` is the section every service shares ([`KafkaSection`]), validated for the producer
/// with the defaults above ([`KAFKA_DEFAULTS`]): a key only another service takes is refused,
/// saying why (`kafka.group_id`, `kafka.session_timeout`: the collector does not join a consumer
/// group).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawConfig {
    /// See the table above.
    pub collector_id: Option<String>,
    /// The `[otlp]` section.
    pub otlp: RawOtlp,
    /// The `[limits]` section.
    pub limits: RawLimits,
    /// The `[kafka]` section, validated for the producer.
    pub kafka: KafkaSection,
    /// The `[heartbeat]` section.
    pub heartbeat: RawHeartbeat,
    /// The `[metrics]` section.
    pub metrics: RawMetrics,
    /// The `[spool]` section.
    pub spool: RawSpool,
    /// The `[derived]` section.
    pub derived: RawDerived,
}

/// `[otlp]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawOtlp {
    /// `otlp.grpc_addr`.
    pub grpc_addr: String,
    /// `otlp.http_addr`.
    pub http_addr: String,
    /// `otlp.max_request_bytes`.
    pub max_request_bytes: i64,
    /// `otlp.max_in_flight_requests`.
    pub max_in_flight_requests: i64,
    /// `otlp.auth_token_env`.
    pub auth_token_env: Option<String>,
    /// `otlp.tls_cert_path`.
    pub tls_cert_path: Option<String>,
    /// `otlp.tls_key_path`.
    pub tls_key_path: Option<String>,
}

impl Default for RawOtlp {
    fn default() -> Self {
        Self {
            grpc_addr: "127.0.0.1:4317".into(),
            http_addr: "127.0.0.1:4318".into(),
            max_request_bytes: 20 * 1024 * 1024,
            max_in_flight_requests: 64,
            auth_token_env: None,
            tls_cert_path: None,
            tls_key_path: None,
        }
    }
}

/// `[limits]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawLimits {
    /// `limits.max_value_bytes`.
    pub max_value_bytes: i64,
    /// `limits.max_attributes_per_event`.
    pub max_attributes_per_event: i64,
    /// `limits.max_events_per_request`.
    pub max_events_per_request: i64,
    /// `limits.max_rejected_copy_bytes`.
    pub max_rejected_copy_bytes: i64,
}

impl Default for RawLimits {
    /// The extraction's own defaults ([`crate::ingest::extract::Limits`]), the one place they are
    /// set.
    fn default() -> Self {
        let limits = crate::ingest::extract::Limits::default();
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        Self {
            max_value_bytes: as_i64(limits.max_value_bytes),
            max_attributes_per_event: as_i64(limits.max_attributes_per_event),
            max_events_per_request: as_i64(limits.max_events_per_request),
            max_rejected_copy_bytes: as_i64(limits.max_rejected_copy_bytes),
        }
    }
}

/// What each `[kafka]` key left out means: the producer's defaults, as in the table on
/// [`RawConfig`].
pub const KAFKA_DEFAULTS: ProducerDefaults<'static> = ProducerDefaults {
    brokers: "127.0.0.1:9092",
    create_topics: true,
    partitions: 3,
    replication_factor: 1,
    delivery_timeout: "5s",
    queue_max_messages: 100_000,
    compression: "zstd",
};

/// `[heartbeat]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawHeartbeat {
    /// `heartbeat.interval`.
    pub interval: String,
    /// `heartbeat.max_sender_intervals`.
    pub max_sender_intervals: NonZeroUsize,
}

impl Default for RawHeartbeat {
    fn default() -> Self {
        Self {
            interval: "10s".into(),
            max_sender_intervals: NonZeroUsize::new(crate::ingest::senders::DEFAULT_MAX_INTERVALS)
                .unwrap_or(NonZeroUsize::MIN),
        }
    }
}

/// `[metrics]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawMetrics {
    /// `metrics.addr`.
    pub addr: String,
}

impl Default for RawMetrics {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8888".into(),
        }
    }
}

/// A validated configuration; field meanings are in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Left unset when the file does not name one; the caller derives it.
    pub collector_id: Option<String>,
    /// `[otlp]`.
    pub otlp: OtlpConfig,
    /// `[limits]`.
    pub limits: LimitsConfig,
    /// `[kafka]`.
    pub kafka: ProducerConfig,
    /// `[heartbeat]`.
    pub heartbeat: HeartbeatConfig,
    /// `[metrics]`.
    pub metrics: MetricsConfig,
    /// `[spool]`: `None` when `spool.dir` is unset.
    pub spool: Option<SpoolSettings>,
    /// `[derived]`.
    pub derived: DerivedConfig,
}

/// Validated `[otlp]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// OTLP/gRPC listen address.
    pub grpc_addr: SocketAddr,
    /// OTLP/HTTP listen address.
    pub http_addr: SocketAddr,
    /// Largest request body, in bytes after decompression.
    pub max_request_bytes: NonZeroUsize,
    /// Requests handled at once; more are answered "retry later".
    pub max_in_flight_requests: NonZeroUsize,
    /// The name of the variable, not the token.
    pub auth_token_env: Option<String>,
    /// Set when both `tls_cert_path` and `tls_key_path` are.
    pub tls: Option<TlsConfig>,
}

/// PEM files for the OTLP listeners' TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// Certificate chain (`otlp.tls_cert_path`).
    pub cert_path: PathBuf,
    /// Private key (`otlp.tls_key_path`).
    pub key_path: PathBuf,
}

/// Validated `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitsConfig {
    /// Longest attribute value accepted in an event, in bytes; at most `max_request_bytes`.
    pub max_value_bytes: NonZeroUsize,
    /// Most attributes on one event.
    pub max_attributes_per_event: NonZeroUsize,
    /// Most events and counter points in one request.
    pub max_events_per_request: NonZeroUsize,
    /// Most bytes of a rejected event copied into the rejected topic.
    pub max_rejected_copy_bytes: NonZeroUsize,
}

/// `[spool]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawSpool {
    /// `spool.dir`.
    pub dir: Option<String>,
    /// `spool.max_bytes`.
    pub max_bytes: i64,
    /// `spool.max_age`.
    pub max_age: String,
}

impl Default for RawSpool {
    fn default() -> Self {
        Self {
            dir: None,
            max_bytes: 1 << 30,
            max_age: "24h".into(),
        }
    }
}

impl RawSpool {
    fn validate(self) -> Result<Option<SpoolSettings>, ConfigError> {
        let max_bytes = u64::try_from(self.max_bytes)
            .ok()
            .filter(|&bytes| bytes > 0)
            .ok_or_else(|| invalid("spool.max_bytes", self.max_bytes, "must be at least 1"))?;
        let max_age = parse_duration("spool.max_age", &self.max_age)?;
        let Some(dir) = self.dir else {
            return Ok(None);
        };
        if dir.trim().is_empty() {
            return Err(invalid(
                "spool.dir",
                &dir,
                "must not be blank; leave it out for no spool",
            ));
        }
        Ok(Some(SpoolSettings {
            dir: PathBuf::from(dir),
            max_bytes,
            max_age,
        }))
    }
}

/// `[derived]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawDerived {
    /// `derived.genai`.
    pub genai: bool,
    /// `derived.mcp`.
    pub mcp: bool,
    /// `derived.http`.
    pub http: bool,
    /// `derived.disable`.
    pub disable: Vec<String>,
    /// `derived.conventions`.
    pub conventions: Vec<RawConvention>,
    /// `derived.request_id_attributes`.
    pub request_id_attributes: Vec<String>,
    /// `derived.max_result_bytes`.
    pub max_result_bytes: i64,
    /// `derived.max_targets_per_service`.
    pub max_targets_per_service: i64,
    /// `derived.max_targets`.
    pub max_targets: i64,
    /// `derived.forget_targets_after`.
    pub forget_targets_after: String,
    /// `derived.join_window`.
    pub join_window: String,
    /// `derived.max_join_keys`.
    pub max_join_keys: i64,
}

impl Default for RawDerived {
    fn default() -> Self {
        let config = DerivedConfig::default();
        Self {
            genai: true,
            mcp: true,
            http: true,
            disable: Vec::new(),
            conventions: Vec::new(),
            request_id_attributes: config.request_id_attributes,
            max_result_bytes: config.max_result_bytes as i64,
            max_targets_per_service: config.max_targets_per_service as i64,
            max_targets: config.max_targets as i64,
            forget_targets_after: format!("{}s", config.forget_targets_after.as_secs()),
            join_window: format!("{}s", config.join_window.as_secs()),
            max_join_keys: config.max_join_keys as i64,
        }
    }
}

impl RawDerived {
    fn validate(self) -> Result<DerivedConfig, ConfigError> {
        let count = |key: &str, value: i64| {
            usize::try_from(value)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| invalid(key, value, "must be at least 1"))
        };
        if let Some(blank) = self
            .request_id_attributes
            .iter()
            .find(|name| name.trim().is_empty())
        {
            return Err(invalid(
                "derived.request_id_attributes",
                blank,
                "names must not be blank",
            ));
        }
        let layers = [
            (OutcomeSource::Genai, self.genai),
            (OutcomeSource::Mcp, self.mcp),
            (OutcomeSource::Http, self.http),
        ];
        let conventions = Conventions::new(self.conventions, &self.disable, |layer| {
            layers.iter().any(|(l, on)| *l == layer && *on)
        })
        .map_err(|error| {
            let (key, value, reason) = error.parts();
            invalid(key, value, reason)
        })?;
        Ok(DerivedConfig {
            conventions,
            request_id_attributes: self.request_id_attributes,
            max_result_bytes: count("derived.max_result_bytes", self.max_result_bytes)?,
            max_targets_per_service: count(
                "derived.max_targets_per_service",
                self.max_targets_per_service,
            )?,
            max_targets: count("derived.max_targets", self.max_targets)?,
            forget_targets_after: parse_duration(
                "derived.forget_targets_after",
                &self.forget_targets_after,
            )?,
            join_window: parse_duration("derived.join_window", &self.join_window)?,
            max_join_keys: count("derived.max_join_keys", self.max_join_keys)?,
        })
    }
}

/// Validated `[heartbeat]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatConfig {
    /// Time between two heartbeats.
    pub interval: Duration,
    /// Most senders' heartbeats kept between two heartbeats.
    pub max_sender_intervals: NonZeroUsize,
}

/// Validated `[metrics]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Self-metrics listen address.
    pub addr: SocketAddr,
}

impl RawConfig {
    /// Parses TOML text; unknown keys and values of the wrong type are refused.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// Checks every value and converts it to its real type. Pure: no file, network or
    /// environment is read. The first invalid value is refused, naming its key and value.
    pub fn validate(self) -> Result<Config, ConfigError> {
        if let Some(id) = &self.collector_id
            && id.trim().is_empty()
        {
            return Err(invalid("collector_id", id, "must not be blank"));
        }
        let otlp = self.otlp.validate()?;
        let limits = self.limits.validate()?;
        if limits.max_value_bytes > otlp.max_request_bytes {
            let (value, max) = (limits.max_value_bytes, otlp.max_request_bytes);
            let reason = format!("must not exceed otlp.max_request_bytes ({max})");
            return Err(invalid("limits.max_value_bytes", value, reason));
        }
        let interval = parse_duration("heartbeat.interval", &self.heartbeat.interval)?;
        let kafka = self.kafka.producer(&KAFKA_DEFAULTS)?;
        // One request's records (events or points, plus rejections) must always fit the
        // producer's queue; otherwise it would be answered "retry" forever.
        let queue = usize::try_from(kafka.queue_max_messages.get()).unwrap_or(usize::MAX);
        if limits.max_events_per_request.get() > queue / 2 {
            let value = limits.max_events_per_request;
            let reason = format!("must be at most half of kafka.queue_max_messages ({queue})");
            return Err(invalid("limits.max_events_per_request", value, reason));
        }
        Ok(Config {
            collector_id: self.collector_id,
            otlp,
            limits,
            kafka,
            heartbeat: HeartbeatConfig {
                interval,
                max_sender_intervals: self.heartbeat.max_sender_intervals,
            },
            metrics: MetricsConfig {
                addr: socket_addr("metrics.addr", &self.metrics.addr)?,
            },
            spool: self.spool.validate()?,
            derived: self.derived.validate()?,
        })
    }
}

const TLS_PAIR: &str = "otlp.tls_cert_path and otlp.tls_key_path go together, neither empty";

impl RawOtlp {
    fn validate(self) -> Result<OtlpConfig, ConfigError> {
        if let Some(name) = &self.auth_token_env {
            candor_kafka::env_var_name("otlp.auth_token_env", name)?;
        }
        let tls = match (self.tls_cert_path, self.tls_key_path) {
            (None, None) => None,
            (Some(cert), Some(key)) if !cert.is_empty() && !key.is_empty() => Some(TlsConfig {
                cert_path: cert.into(),
                key_path: key.into(),
            }),
            (Some(cert), key) if key.is_none() || cert.is_empty() => {
                return Err(invalid("otlp.tls_cert_path", cert, TLS_PAIR));
            }
            (_, key) => {
                let key = key.unwrap_or_default();
                return Err(invalid("otlp.tls_key_path", key, TLS_PAIR));
            }
        };
        Ok(OtlpConfig {
            grpc_addr: socket_addr("otlp.grpc_addr", &self.grpc_addr)?,
            http_addr: socket_addr("otlp.http_addr", &self.http_addr)?,
            max_request_bytes: nonzero_usize("otlp.max_request_bytes", self.max_request_bytes)?,
            max_in_flight_requests: nonzero_usize(
                "otlp.max_in_flight_requests",
                self.max_in_flight_requests,
            )?,
            auth_token_env: self.auth_token_env,
            tls,
        })
    }
}

impl RawLimits {
    fn validate(self) -> Result<LimitsConfig, ConfigError> {
        let nz = |key: &str, value| nonzero_usize(&format!("limits.{key}"), value);
        Ok(LimitsConfig {
            max_value_bytes: nz("max_value_bytes", self.max_value_bytes)?,
            max_attributes_per_event: nz(
                "max_attributes_per_event",
                self.max_attributes_per_event,
            )?,
            max_events_per_request: nz("max_events_per_request", self.max_events_per_request)?,
            max_rejected_copy_bytes: nz("max_rejected_copy_bytes", self.max_rejected_copy_bytes)?,
        })
    }
}

impl Config {
    /// Parses and validates TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        RawConfig::from_toml_str(text)?.validate()
    }

    /// The brokers as librdkafka's `bootstrap.servers`: `host:port` joined with commas.
    pub fn kafka_bootstrap_servers(&self) -> String {
        self.kafka.bootstrap_servers()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn refusal(text: &str) -> String {
        Config::from_toml_str(text).unwrap_err().to_string()
    }

    /// A convention of the team's own is read from `[[derived.conventions]]` and put first; a
    /// faulty one is refused with its key, and a built-in name to disable must exist.
    #[test]
    fn declared_conventions_are_validated_and_tried_first() {
        let config = Config::from_toml_str(
            "[derived]\ndisable = [\"openllmetry\"]\n\
             [[derived.conventions]]\nname = \"acme-agent\"\nlayer = \"genai\"\n\
             recognise = [{ attribute = \"acme.kind\", equals = \"tool\" }]\n\
             tool_name = [\"acme.tool\"]\n",
        )
        .unwrap();
        let names: Vec<&str> = config
            .derived
            .conventions
            .table()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names.first(), Some(&"acme-agent"));
        assert!(!names.contains(&"openllmetry"), "{names:?}");

        let refused = refusal(
            "[[derived.conventions]]\nname = \"acme\"\nlayer = \"genai\"\n\
             recognise = [{ attribute = \"acme.kind\", equals = \"tool\", at_least = 1 }]\n",
        );
        assert!(
            refused.contains("derived.conventions[0].recognise[0].equals"),
            "{refused}"
        );
        let refused = refusal("[derived]\ndisable = [\"no-such-convention\"]\n");
        assert!(refused.contains("derived.disable"), "{refused}");
        let refused = refusal(
            "[[derived.conventions]]\nname = \"acme\"\nlayer = \"genai\"\n\
             recognise = [{ attribute = \"acme.kind\" }]\nunknown_key = 1\n",
        );
        assert!(refused.contains("unknown_key"), "{refused}");
    }

    #[test]
    fn empty_file_validates_to_the_documented_defaults() {
        let c = Config::from_toml_str("").unwrap();
        let n = |v| NonZeroUsize::new(v).unwrap();
        let n32 = |v| NonZeroU32::new(v).unwrap();
        assert_eq!(c.collector_id, None);
        assert_eq!(c.otlp.grpc_addr, addr("127.0.0.1:4317"));
        assert_eq!(c.otlp.http_addr, addr("127.0.0.1:4318"));
        assert_eq!(c.otlp.max_request_bytes, n(20_971_520));
        assert!(c.otlp.auth_token_env.is_none() && c.otlp.tls.is_none());
        let l = &c.limits;
        assert_eq!(
            [l.max_value_bytes, l.max_attributes_per_event],
            [n(4096), n(128)]
        );
        assert_eq!(
            [l.max_events_per_request, l.max_rejected_copy_bytes],
            [n(10_000), n(4096)]
        );
        assert_eq!(c.kafka_bootstrap_servers(), "127.0.0.1:9092");
        assert!(c.kafka.create_topics);
        assert_eq!(
            [c.kafka.partitions, c.kafka.replication_factor],
            [n32(3), n32(1)]
        );
        assert_eq!(c.kafka.delivery_timeout, Duration::from_secs(5));
        assert_eq!(c.kafka.queue_max_messages, n32(100_000));
        assert_eq!(c.kafka.compression, Compression::Zstd);
        assert_eq!(c.kafka.compression_level, Some(1));
        assert!(c.kafka.extra.extra().is_empty() && c.kafka.extra.extra_env().is_empty());
        assert_eq!(c.heartbeat.interval, Duration::from_secs(10));
        assert_eq!(c.metrics.addr, addr("127.0.0.1:8888"));
        assert_eq!(c.spool, None);
    }

    #[test]
    fn a_spool_is_set_by_its_directory_and_its_bounds_are_checked() {
        let c = Config::from_toml_str("[spool]\ndir = \"/var/lib/candor/spool\"\n").unwrap();
        let spool = c.spool.unwrap();
        assert_eq!(spool.dir, PathBuf::from("/var/lib/candor/spool"));
        assert_eq!(spool.max_bytes, 1 << 30);
        assert_eq!(spool.max_age, Duration::from_secs(24 * 3600));
        for (text, key) in [
            ("[spool]\ndir = \" \"\n", "spool.dir"),
            ("[spool]\ndir = \"/s\"\nmax_bytes = 0\n", "spool.max_bytes"),
            ("[spool]\nmax_bytes = -1\n", "spool.max_bytes"),
            ("[spool]\nmax_age = \"soon\"\n", "spool.max_age"),
        ] {
            assert!(refusal(text).contains(key), "{text}: {}", refusal(text));
        }
    }

    #[test]
    fn compression_levels_are_checked_against_the_codec() {
        let level = |toml: &str| Config::from_toml_str(toml).map(|c| c.kafka.compression_level);
        assert_eq!(
            level("[kafka]\ncompression_level = 12\n").unwrap(),
            Some(12)
        );
        assert_eq!(
            level("[kafka]\ncompression = \"lz4\"\n").unwrap(),
            None,
            "lz4 keeps its own default"
        );
        assert_eq!(
            level("[kafka]\ncompression = \"lz4\"\ncompression_level = 0\n").unwrap(),
            Some(0)
        );
        for refused in [
            "[kafka]\ncompression_level = 0\n",
            "[kafka]\ncompression_level = 13\n",
            "[kafka]\ncompression_level = 4294967297\n",
            "[kafka]\ncompression = \"snappy\"\ncompression_level = 1\n",
            "[kafka]\ncompression = \"none\"\ncompression_level = 0\n",
        ] {
            let err = level(refused).unwrap_err().to_string();
            assert!(err.contains("kafka.compression_level"), "{refused}: {err}");
        }
        let err = Config::from_toml_str("[kafka.extra]\n\"compression.level\" = \"9\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("kafka.compression_level"), "{err}");
    }

    #[test]
    fn example_file_validates_to_the_defaults() {
        let example = include_str!("../../../deploy/collector.example.toml");
        assert_eq!(
            Config::from_toml_str(example).unwrap(),
            Config::from_toml_str("").unwrap()
        );
    }

    #[test]
    fn gzip_is_refused_at_validation_not_at_the_producers_start() {
        let gzip = refusal("[kafka]\ncompression = \"gzip\"\n");
        assert!(
            gzip.contains("kafka.compression") && gzip.contains("zlib"),
            "{gzip}"
        );
    }

    #[test]
    fn refusals_name_the_key_and_the_value() {
        let grpc_adr = refusal("[otlp]\ngrpc_adr = \"127.0.0.1:4317\"\n");
        assert!(
            grpc_adr.contains("at line 2: unknown field `grpc_adr`"),
            "{grpc_adr}"
        );
        let typo = refusal("[kafka]\npartitions = \"3\"\n");
        assert!(
            typo.starts_with("cannot parse the configuration at line 2: "),
            "{typo}"
        );
        for line in [
            "kafka.partitions = 0",
            "kafka.replication_factor = -1",
            "kafka.compression = \"brotli\"",
            "limits.max_value_bytes = 30000000",
            "otlp.http_addr = \"localhost:4318\"",
            "otlp.tls_cert_path = \"c.pem\"",
        ] {
            let (key, value) = line.split_once(" = ").unwrap();
            let (section, field) = key.split_once('.').unwrap();
            let err = refusal(&format!("[{section}]\n{field} = {value}\n"));
            let want = format!("invalid {key} = {:?}: ", value.trim_matches('"'));
            assert!(err.starts_with(&want), "{err}");
        }
    }

    #[test]
    fn a_request_must_fit_the_producer_queue() {
        let err = Config::from_toml_str(
            "[limits]\nmax_events_per_request = 60000\n[kafka]\nqueue_max_messages = 100000\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("limits.max_events_per_request"),
            "{err}"
        );
    }

    #[test]
    fn brokers() {
        let c = Config::from_toml_str("[kafka]\nbrokers = \"a:1, [::1]:2\"\n").unwrap();
        assert_eq!(
            c.kafka.brokers[1],
            BrokerAddr {
                host: "[::1]".into(),
                port: 2
            }
        );
        assert_eq!(c.kafka_bootstrap_servers(), "a:1,[::1]:2");
        for bad in ["a", "", "a:1,", "a:0", "::1:2"] {
            let err = refusal(&format!("[kafka]\nbrokers = {bad:?}\n"));
            assert!(err.starts_with("invalid kafka.brokers = "), "{err}");
        }
        assert!(refusal("[kafka]\nbrokers = \"a\"\n").contains("kafka.brokers = \"a\""));
    }

    #[test]
    fn the_keys_of_a_consumer_group_are_refused_with_why() {
        for (key, value) in [("group_id", "g"), ("session_timeout", "6s")] {
            let err = refusal(&format!("[kafka]\n{key} = {value:?}\n"));
            assert_eq!(
                err,
                format!(
                    "invalid kafka.{key} = {value:?}: the collector does not join a consumer group"
                )
            );
        }
        let unknown = refusal("[kafka]\ngroup = \"g\"\n");
        assert!(
            unknown.contains("at line 2: unknown field `group`"),
            "{unknown}"
        );
    }

    #[test]
    fn guarantee_settings_and_secrets_stay_out_of_extra() {
        let err = refusal("[kafka.extra]\n\"enable.idempotence\" = \"false\"\n");
        assert!(
            err.starts_with("invalid kafka.extra.\"enable.idempotence\" = "),
            "{err}"
        );
        let err = refusal("[kafka.extra]\n\"sasl.password\" = \"hunter2\"\n");
        assert!(
            err.contains("sasl.password") && !err.contains("hunter2"),
            "{err}"
        );
        let env = "[kafka.extra_env]\n\"sasl.password\" = \"CANDOR_KAFKA_PASSWORD\"\n";
        let extra = Config::from_toml_str(env).unwrap().kafka.extra;
        assert_eq!(extra.extra_env().len(), 1);
        let err = refusal("[otlp]\nauth_token_env = \"s3cr3t-t0ken!\"\n");
        assert!(
            err.contains("otlp.auth_token_env") && !err.contains("s3cr3t"),
            "{err}"
        );
    }
}
