//! Configuration of the dashboards: TOML → [`RawConfig`] (serde) → [`RawConfig::validate`] (pure,
//! no I/O) → [`Config`] with real types. Reading the files (the configuration, the rules, the
//! `--kafka-config` settings file) and the environment is left to the caller. The error type and
//! the value rules are those every service shares ([`candor_service::config`]); the `[kafka]`
//! tables follow the readers' rules of [`candor_kafka`], and `[dedupe]` is the compactor's section
//! ([`RawDedupe`]).
//!
//! ```
//! use candor_dashboards::config::Config;
//! let config = Config::from_toml_str("[kafka]\nbrokers = \"k1:9093, k2:9093\"\n").unwrap();
//! assert_eq!(config.kafka.bootstrap_servers(), "k1:9093,k2:9093");
//! assert_eq!(config.external_url, "http://127.0.0.1:3000");
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use candor_kafka::{ExtraSettings, KafkaSection, ReaderConfig, ReaderDefaults, Role};
use candor_query::kafka_client::SettingsFile;
use candor_query::window::micros_of;
use candor_records::ids::RawDedupe;
use candor_service::config::{
    invalid, nonzero_u32, not_blank, parse_duration, parse_duration_or_zero, parse_toml,
    socket_addr,
};
use serde::Deserialize;

use crate::access::{RawWeb, WebSettings};
use crate::model::ModelSettings;
use crate::notify::Webhook;
use crate::reconcile::Schedule;
use crate::rules::Limits;
use crate::state::Staleness;

/// The shared configuration error ([`candor_service::config::ConfigError`]).
pub use candor_service::config::ConfigError;

/// The Kafka settings the dashboards set from their own keys, with who sets them: refused in
/// `[kafka.extra]` and `[kafka.extra_env]` besides the brokers and the readers' own
/// ([`Role::Reader`]).
pub const KAFKA_OWNED: &[(&str, &str)] = &[("group.id", "set by kafka.group_id (--group)")];

/// What each `[kafka]` key left out means: the reader's defaults, as in the table on
/// [`RawConfig`], with the settings the dashboards set themselves ([`KAFKA_OWNED`]).
pub const KAFKA_DEFAULTS: ReaderDefaults<'static> = ReaderDefaults {
    program: "candor-dashboards",
    brokers: "127.0.0.1:9092",
    group_id: "candor-dashboards",
    owned: KAFKA_OWNED,
};

/// The configuration file as written. Every key may be left out; this table is the one place the
/// defaults are documented (`deploy/dashboards.example.toml` repeats them, checked by a test).
/// Each key with a flag (`candor-dashboards --help`) is overridden by that flag or its variable
/// when given.
///
/// | key | default | meaning |
/// |---|---|---|
/// | `listen` | `"127.0.0.1:3000"` | where the web UI, the JSON API, `/metrics`, `/healthz` and `/readyz` listen (IP and port) |
/// | `tables` | `"data/tables"` | the tables' root, read-only: a local directory or an object store URL (`s3://bucket/prefix`) |
/// | `state_dir` | `"data/dashboards"` | a local directory of the dashboards' own: the alert instances, their notifications and the served counters are kept there (`state.redb`, [`crate::persist`]) across restarts |
/// | `rules` | unset: the shipped rules (`dashboards/rules.toml`, compiled in) | the alert rules file (TOML) |
/// | `external_url` | unset: `http://<listen>` | the dashboards' own address, sent as each alert's `generatorURL` |
/// | `otlp_endpoint` | unset: no export | export the notifier's telemetry over OTLP/gRPC to this endpoint, so that a failed notification reaches the pipeline |
/// | `table_poll` | `"15s"` | how often the tables' Delta logs are read |
/// | `kafka.brokers` | `"127.0.0.1:9092"` | bootstrap brokers, comma separated `host:port` (IPv6 hosts in brackets) |
/// | `kafka.group_id` | `"candor-dashboards"` | the consumer group the dashboards commit their offsets under; never the compactor's |
/// | `kafka.extra`, `kafka.extra_env` | empty | more librdkafka settings (TLS, SASL), as for the collector; refused there: the brokers, `group.id` and the readers' own settings ([`Role::Reader`]). `--kafka-config FILE` replaces both tables with a settings file's |
/// | `dedupe.window` | `"10m"` | how long after a record a copy with its id is a client's retried copy, counted once: set it as the compactor's `dedupe.window` |
/// | `panels.history` | `"6h"` | how far back the panels keep data; at least one `panels.step` |
/// | `panels.step` | `"1m"` | the panels' bucket width |
/// | `staleness.collector` | `"30s"` | the collector hop is STALE after this long without a heartbeat (or three of the heartbeats' own interval, if that is longer) |
/// | `staleness.kafka` | `"30s"` | the Kafka hop is STALE after this long without contact |
/// | `staleness.table` | `"5m"` | the table hop is STALE after this long without the watermark moving |
/// | `alerts.webhooks` | `[]` | receivers of alerts (Alertmanager API v2 format), `http://` or `https://` URLs; one that is Alertmanager's `…/api/v2/alerts` is read for silences, which acknowledge the alerts they cover ([`crate::silences`]) |
/// | `alerts.webhook_ca_file` | unset: the system's CA certificates | PEM CA certificates an `https://` webhook is verified against instead (a private CA) |
/// | `alerts.webhook_headers_file` | unset: none | a file of `Name: value` lines sent with every notification (`Authorization: Bearer …`), read at start; never printed |
/// | `alerts.escalation_webhooks` | `[]` | receivers a firing alert goes to as well when nobody acknowledged it within `alerts.escalate_after` of firing; once escalated, its repeats and its resolve reach them too |
/// | `alerts.escalate_after` | `"15m"` | how long a firing alert may go unacknowledged before it is escalated |
/// | `alerts.webhook_attempts` | `3` | attempts per notification, retries included |
/// | `alerts.webhook_timeout` | `"5s"` | time per notification attempt |
/// | `alerts.resend` | `"1m"` | how often a firing alert is sent again, also after an undelivered notification |
/// | `alerts.evaluate_every` | `"10s"` | how often the rules are evaluated |
/// | `reconcile.every` | `"1m"` | how often the adapters' `tool.outcomes` counter is reconciled against the failure events stored |
/// | `reconcile.range` | `"1h"` | how far back each reconciliation reaches; longer than `reconcile.settle` |
/// | `reconcile.settle` | `"2m"` | each reconciliation's window ends this long before now (may be `"0s"`), so that the events of the calls it counts have arrived |
/// | `web.tls_cert_path`, `web.tls_key_path` | unset: plain HTTP | PEM certificate chain and private key of the listener; both or neither |
/// | `web.users` | `[]` | users of HTTP basic authentication: `name`, `role` (`read`, `operate` or `metrics`) and one of `password_hash_file` or `password_hash_env`, where a bcrypt hash is (`candor-dashboards hash-password`) ([`crate::access`]) |
/// | `web.tokens` | `[]` | bearer tokens: `name`, `role` and one of `token_file` or `token_env`, where the token is. With any user or token, every request but `/healthz` and `/readyz` needs one |
///
/// Durations are numbers with units, added up: `250ms`, `5s`, `2m`, `1h 30m`, `2d`
/// ([`candor_schema::duration`]); every one is above zero except `reconcile.settle`.
///
/// **Secrets are never in the file**: `kafka.extra_env` names the environment variables that
/// hold them, read at start ([`ExtraSettings::resolve`]); `[web]` names the files or variables
/// of its hashes and tokens ([`WebSettings::access`]).
///
/// `[kafka]` is the section every service shares ([`KafkaSection`]), validated for a reader with
/// the defaults above ([`KAFKA_DEFAULTS`]): the collector's and the compactor's keys are refused,
/// saying why (`kafka.partitions`: candor-dashboards does not create topics;
/// `kafka.session_timeout`: it never joins its consumer group).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawConfig {
    /// `listen`.
    pub listen: String,
    /// `tables`.
    pub tables: String,
    /// `state_dir`.
    pub state_dir: String,
    /// `rules`.
    pub rules: Option<String>,
    /// `external_url`.
    pub external_url: Option<String>,
    /// `otlp_endpoint`.
    pub otlp_endpoint: Option<String>,
    /// `table_poll`.
    pub table_poll: String,
    /// The `[kafka]` section, validated for a reader.
    pub kafka: KafkaSection,
    /// The `[dedupe]` section, the compactor's.
    pub dedupe: RawDedupe,
    /// The `[panels]` section.
    pub panels: RawPanels,
    /// The `[staleness]` section.
    pub staleness: RawStaleness,
    /// The `[alerts]` section.
    pub alerts: RawAlerts,
    /// The `[reconcile]` section.
    pub reconcile: RawReconcile,
    /// The `[web]` section.
    pub web: RawWeb,
}

impl Default for RawConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:3000".into(),
            tables: "data/tables".into(),
            state_dir: "data/dashboards".into(),
            rules: None,
            external_url: None,
            otlp_endpoint: None,
            table_poll: "15s".into(),
            kafka: KafkaSection::default(),
            dedupe: RawDedupe::default(),
            panels: RawPanels::default(),
            staleness: RawStaleness::default(),
            alerts: RawAlerts::default(),
            reconcile: RawReconcile::default(),
            web: RawWeb::default(),
        }
    }
}

/// `[panels]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawPanels {
    /// `panels.history`.
    pub history: String,
    /// `panels.step`.
    pub step: String,
}

impl Default for RawPanels {
    fn default() -> Self {
        Self {
            history: "6h".into(),
            step: "1m".into(),
        }
    }
}

/// `[staleness]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawStaleness {
    /// `staleness.collector`.
    pub collector: String,
    /// `staleness.kafka`.
    pub kafka: String,
    /// `staleness.table`.
    pub table: String,
}

impl Default for RawStaleness {
    fn default() -> Self {
        Self {
            collector: "30s".into(),
            kafka: "30s".into(),
            table: "5m".into(),
        }
    }
}

/// `[alerts]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawAlerts {
    /// `alerts.webhooks`.
    pub webhooks: Vec<String>,
    /// `alerts.escalation_webhooks`.
    pub escalation_webhooks: Vec<String>,
    /// `alerts.escalate_after`.
    pub escalate_after: String,
    /// `alerts.webhook_attempts`.
    pub webhook_attempts: i64,
    /// `alerts.webhook_timeout`.
    pub webhook_timeout: String,
    /// `alerts.webhook_ca_file`.
    pub webhook_ca_file: Option<String>,
    /// `alerts.webhook_headers_file`.
    pub webhook_headers_file: Option<String>,
    /// `alerts.resend`.
    pub resend: String,
    /// `alerts.evaluate_every`.
    pub evaluate_every: String,
}

impl Default for RawAlerts {
    fn default() -> Self {
        Self {
            webhooks: Vec::new(),
            escalation_webhooks: Vec::new(),
            escalate_after: "15m".into(),
            webhook_attempts: 3,
            webhook_timeout: "5s".into(),
            webhook_ca_file: None,
            webhook_headers_file: None,
            resend: "1m".into(),
            evaluate_every: "10s".into(),
        }
    }
}

/// `[reconcile]` as written; keys and defaults in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawReconcile {
    /// `reconcile.every`.
    pub every: String,
    /// `reconcile.range`.
    pub range: String,
    /// `reconcile.settle`.
    pub settle: String,
}

impl Default for RawReconcile {
    fn default() -> Self {
        Self {
            every: "1m".into(),
            range: "1h".into(),
            settle: "2m".into(),
        }
    }
}

/// A readers' Kafka client settings file (`--kafka-config`, the file `candor` takes too:
/// [`SettingsFile`]), parsed and checked against the dashboards' Kafka rules, so that a refusal
/// is reported with the file it is in. Pure: the variables are not read. Given, it replaces the
/// configuration's two tables ([`RawConfig::set_kafka_settings`]).
pub fn kafka_settings_file(text: &str) -> Result<SettingsFile, ConfigError> {
    let file: SettingsFile = parse_toml(text)?;
    kafka_extra(file.kafka.extra.clone(), file.kafka.extra_env.clone())?;
    Ok(file)
}

/// A validated configuration; meanings in the table on [`RawConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where the web UI, the API and `/metrics` listen.
    pub listen: SocketAddr,
    /// The tables' root, read-only.
    pub tables: String,
    /// Where the dashboards keep their own state.
    pub state_dir: PathBuf,
    /// The alert rules file; `None` for the shipped rules.
    pub rules: Option<PathBuf>,
    /// The dashboards' own address (`http://<listen>` unless set).
    pub external_url: String,
    /// Where the notifier's telemetry is exported; `None`: nowhere.
    pub otlp_endpoint: Option<String>,
    /// Time between two reads of the tables' logs.
    pub table_poll: Duration,
    /// `[kafka]`.
    pub kafka: ReaderConfig,
    /// `dedupe.window`.
    pub dedupe_window: Duration,
    /// `[panels]`.
    pub panels: PanelsConfig,
    /// `[staleness]`.
    pub staleness: StalenessConfig,
    /// `[alerts]`.
    pub alerts: AlertsConfig,
    /// `[reconcile]`: it has passed [`Schedule::check`]'s conditions.
    pub reconcile: Schedule,
    /// `[web]`: TLS and who may read.
    pub web: WebSettings,
}

/// Validated `[panels]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanelsConfig {
    /// How far back the panels keep data; at least one step.
    pub history: Duration,
    /// Bucket width; above zero.
    pub step: Duration,
}

/// Validated `[staleness]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StalenessConfig {
    /// The collector hop's threshold.
    pub collector: Duration,
    /// The Kafka hop's threshold.
    pub kafka: Duration,
    /// The table hop's threshold.
    pub table: Duration,
}

/// Validated `[alerts]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertsConfig {
    /// The receivers, named `webhook-1`, `webhook-2`, … in the order written.
    pub webhooks: Vec<Webhook>,
    /// The escalation receivers, named `escalation-1`, … in the order written.
    pub escalation_webhooks: Vec<Webhook>,
    /// How long a firing alert may go unacknowledged before it is escalated.
    pub escalate_after: Duration,
    /// Attempts per notification, retries included.
    pub webhook_attempts: NonZeroU32,
    /// Time per attempt.
    pub webhook_timeout: Duration,
    /// The CA certificates an `https://` webhook is verified against; the system's without.
    pub webhook_ca_file: Option<PathBuf>,
    /// The file of headers sent with every notification.
    pub webhook_headers_file: Option<PathBuf>,
    /// Time before a firing alert is sent again.
    pub resend: Duration,
    /// Time between two evaluations of the rules.
    pub evaluate_every: Duration,
}

impl RawConfig {
    /// Parses TOML text; unknown keys and values of the wrong type are refused.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// Replaces `[kafka.extra]` and `[kafka.extra_env]` with a settings file's (`--kafka-config`
    /// wins over the configuration file's tables, as a flag wins over a key).
    pub fn set_kafka_settings(&mut self, file: SettingsFile) {
        self.kafka.extra = file.kafka.extra;
        self.kafka.extra_env = file.kafka.extra_env;
    }

    /// Checks every value and converts it to its real type. Pure: no file, network or
    /// environment is read. The first invalid value is refused, naming its key and value.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let listen = socket_addr("listen", &self.listen)?;
        not_blank("tables", &self.tables)?;
        not_blank("state_dir", &self.state_dir)?;
        if let Some(rules) = &self.rules {
            not_blank("rules", rules)?;
        }
        let external_url = match self.external_url {
            Some(written) => {
                if url::Url::parse(&written).is_err() {
                    let reason = "expected a URL, e.g. https://candor.example.com";
                    return Err(invalid("external_url", written, reason));
                }
                written
            }
            None => format!("http://{listen}"),
        };
        if let Some(endpoint) = &self.otlp_endpoint {
            not_blank("otlp_endpoint", endpoint)?;
        }
        let dedupe_window = self
            .dedupe
            .validate()
            .map_err(|err| invalid(RawDedupe::WINDOW_KEY, err.text, err.reason))?;
        Ok(Config {
            listen,
            tables: self.tables,
            state_dir: PathBuf::from(self.state_dir),
            rules: self.rules.map(PathBuf::from),
            external_url,
            otlp_endpoint: self.otlp_endpoint,
            table_poll: parse_duration("table_poll", &self.table_poll)?,
            kafka: self.kafka.reader(&KAFKA_DEFAULTS)?,
            dedupe_window,
            panels: self.panels.validate()?,
            staleness: StalenessConfig {
                collector: parse_duration("staleness.collector", &self.staleness.collector)?,
                kafka: parse_duration("staleness.kafka", &self.staleness.kafka)?,
                table: parse_duration("staleness.table", &self.staleness.table)?,
            },
            alerts: self.alerts.validate()?,
            reconcile: self.reconcile.validate()?,
            web: self.web.validate()?,
        })
    }
}

/// `kafka.extra` and `kafka.extra_env` checked by the readers' rules, with the settings the
/// dashboards set themselves ([`KAFKA_OWNED`]).
fn kafka_extra(
    extra: BTreeMap<String, String>,
    extra_env: BTreeMap<String, String>,
) -> Result<ExtraSettings, ConfigError> {
    let role = Role::Reader { owned: KAFKA_OWNED };
    Ok(ExtraSettings::validate(role, extra, extra_env)?)
}

impl RawPanels {
    fn validate(self) -> Result<PanelsConfig, ConfigError> {
        let step = parse_duration("panels.step", &self.step)?;
        let history = parse_duration("panels.history", &self.history)?;
        if history < step {
            let reason = format!("must be at least panels.step ({})", self.step);
            return Err(invalid("panels.history", &self.history, reason));
        }
        Ok(PanelsConfig { history, step })
    }
}

const WEBHOOK_URL: &str = "expected an http:// or https:// URL with a host";

/// The receivers written under `key`, each an `http://` or `https://` URL, named `<name>-1`, …
fn webhooks(key: &str, name: &str, written: Vec<String>) -> Result<Vec<Webhook>, ConfigError> {
    let mut webhooks = Vec::with_capacity(written.len());
    for (index, written) in written.into_iter().enumerate() {
        let parsed = url::Url::parse(&written).ok();
        if !parsed
            .is_some_and(|parsed| matches!(parsed.scheme(), "http" | "https") && parsed.has_host())
        {
            return Err(invalid(key, written, WEBHOOK_URL));
        }
        webhooks.push(Webhook {
            name: format!("{name}-{}", index + 1),
            url: written,
        });
    }
    Ok(webhooks)
}

/// A key that names a file: not blank when given.
fn file_key(key: &str, written: Option<String>) -> Result<Option<PathBuf>, ConfigError> {
    written
        .map(|path| not_blank(key, &path).map(|()| PathBuf::from(path)))
        .transpose()
}

impl RawAlerts {
    fn validate(self) -> Result<AlertsConfig, ConfigError> {
        Ok(AlertsConfig {
            webhooks: webhooks("alerts.webhooks", "webhook", self.webhooks)?,
            escalation_webhooks: webhooks(
                "alerts.escalation_webhooks",
                "escalation",
                self.escalation_webhooks,
            )?,
            escalate_after: parse_duration("alerts.escalate_after", &self.escalate_after)?,
            webhook_attempts: nonzero_u32("alerts.webhook_attempts", self.webhook_attempts)?,
            webhook_timeout: parse_duration("alerts.webhook_timeout", &self.webhook_timeout)?,
            webhook_ca_file: file_key("alerts.webhook_ca_file", self.webhook_ca_file)?,
            webhook_headers_file: file_key(
                "alerts.webhook_headers_file",
                self.webhook_headers_file,
            )?,
            resend: parse_duration("alerts.resend", &self.resend)?,
            evaluate_every: parse_duration("alerts.evaluate_every", &self.evaluate_every)?,
        })
    }
}

impl RawReconcile {
    fn validate(self) -> Result<Schedule, ConfigError> {
        let every = parse_duration("reconcile.every", &self.every)?;
        let range = parse_duration("reconcile.range", &self.range)?;
        let settle = parse_duration_or_zero("reconcile.settle", &self.settle)?;
        if range <= settle {
            let reason = format!(
                "must be longer than reconcile.settle ({}): the window between them is what \
                 each run checks",
                self.settle
            );
            return Err(invalid("reconcile.range", &self.range, reason));
        }
        Ok(Schedule {
            every,
            range,
            settle,
        })
    }
}

impl Config {
    /// Parses and validates TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        RawConfig::from_toml_str(text)?.validate()
    }

    /// What the rules are checked against: the panels' step and history.
    pub fn limits(&self) -> Limits {
        Limits {
            step: micros_of(self.panels.step),
            history: micros_of(self.panels.history),
        }
    }

    /// The model's settings: the panels' history and step, and the dedupe window.
    pub fn model_settings(&self) -> ModelSettings {
        ModelSettings {
            history: micros_of(self.panels.history),
            step: micros_of(self.panels.step),
            dedupe_window: micros_of(self.dedupe_window),
        }
    }

    /// The hops' staleness thresholds.
    pub fn staleness(&self) -> Staleness {
        Staleness {
            collector: micros_of(self.staleness.collector),
            kafka: micros_of(self.staleness.kafka),
            table: micros_of(self.staleness.table),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        Config::from_toml_str(text).unwrap_err().to_string()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn empty_file_validates_to_the_documented_defaults() {
        let c = Config::from_toml_str("").unwrap();
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 3000)));
        assert_eq!(c.tables, "data/tables");
        assert_eq!((c.rules.as_ref(), c.otlp_endpoint.as_ref()), (None, None));
        assert_eq!(c.external_url, "http://127.0.0.1:3000");
        assert_eq!(c.table_poll, secs(15));
        assert_eq!(c.kafka.bootstrap_servers(), "127.0.0.1:9092");
        assert_eq!(c.kafka.group_id, "candor-dashboards");
        assert!(c.kafka.extra.is_empty());
        assert_eq!(c.dedupe_window, candor_records::ids::DEDUPE_WINDOW);
        assert_eq!(
            c.panels,
            PanelsConfig {
                history: secs(6 * 3600),
                step: secs(60)
            }
        );
        assert_eq!(
            c.staleness,
            StalenessConfig {
                collector: secs(30),
                kafka: secs(30),
                table: secs(300)
            }
        );
        assert_eq!(c.staleness(), Staleness::default());
        assert_eq!(c.model_settings(), ModelSettings::default());
        assert!(c.alerts.webhooks.is_empty());
        assert_eq!(c.alerts.webhook_attempts.get(), 3);
        assert_eq!(c.alerts.webhook_timeout, secs(5));
        assert_eq!(c.alerts.resend, secs(60));
        assert_eq!(c.alerts.evaluate_every, secs(10));
        assert_eq!(
            c.reconcile,
            Schedule {
                every: secs(60),
                range: secs(3600),
                settle: secs(120)
            }
        );
        assert!(c.reconcile.check().is_ok());
    }

    #[test]
    fn example_file_validates_to_the_defaults() {
        let example = include_str!("../../deploy/dashboards.example.toml");
        assert_eq!(
            Config::from_toml_str(example).unwrap(),
            Config::from_toml_str("").unwrap()
        );
    }

    #[test]
    fn refusals_name_the_key_and_the_value() {
        let typo = refusal("[panels]\nhistroy = \"6h\"\n");
        assert!(
            typo.starts_with("cannot parse the configuration at line 2: unknown field `histroy`"),
            "{typo}"
        );
        for line in [
            "listen = \"localhost:3000\"",
            "tables = \" \"",
            "table_poll = \"0s\"",
            "kafka.brokers = \"k1\"",
            "kafka.group_id = \"\"",
            "dedupe.window = \"10\"",
            "panels.step = \"0s\"",
            "panels.history = \"30s\"",
            "staleness.table = \"soon\"",
            "alerts.webhook_attempts = 0",
            "alerts.resend = \"-1m\"",
            "reconcile.every = \"0s\"",
            "reconcile.range = \"1m\"",
            "external_url = \"not a url\"",
        ] {
            let (key, value) = line.split_once(" = ").unwrap();
            let text = match key.split_once('.') {
                Some((section, field)) => format!("[{section}]\n{field} = {value}\n"),
                None => format!("{key} = {value}\n"),
            };
            let err = refusal(&text);
            let want = format!("invalid {key} = {:?}: ", value.trim_matches('"'));
            assert!(err.starts_with(&want), "{line}: {err}");
        }
    }

    #[test]
    fn webhooks_are_http_or_https_urls_named_in_order() {
        let c = Config::from_toml_str(
            "[alerts]\nwebhooks = [\"http://am:9093/api/v2/alerts\", \"https://10.0.0.1/x\"]\n",
        )
        .unwrap();
        let names: Vec<&str> = c.alerts.webhooks.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["webhook-1", "webhook-2"]);
        assert_eq!(c.alerts.webhooks[0].url, "http://am:9093/api/v2/alerts");
        for bad in ["", "am:9093", "ftp://am/api", "http://"] {
            let err = refusal(&format!("[alerts]\nwebhooks = [{bad:?}]\n"));
            assert!(
                err.starts_with(&format!("invalid alerts.webhooks = {bad:?}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_reconciliation_may_settle_for_zero_but_its_range_must_be_longer() {
        let c = Config::from_toml_str("[reconcile]\nsettle = \"0s\"\n").unwrap();
        assert_eq!(c.reconcile.settle, Duration::ZERO);
        let err = refusal("[reconcile]\nrange = \"2m\"\nsettle = \"2m\"\n");
        assert!(err.contains("longer than reconcile.settle (2m)"), "{err}");
    }

    #[test]
    fn kafka_settings_follow_the_readers_rules() {
        let env = "[kafka.extra_env]\n\"sasl.password\" = \"CANDOR_KAFKA_SASL_PASSWORD\"\n";
        let c = Config::from_toml_str(env).unwrap();
        assert_eq!(c.kafka.extra.extra_env().len(), 1);
        let secret = refusal("[kafka.extra]\n\"sasl.password\" = \"hunter2\"\n");
        assert!(
            secret.contains("sasl.password") && !secret.contains("hunter2"),
            "{secret}"
        );
        let group = refusal("[kafka.extra]\n\"group.id\" = \"g\"\n");
        assert!(group.contains("set by kafka.group_id (--group)"), "{group}");
        let brokers = refusal("[kafka.extra]\n\"bootstrap.servers\" = \"h:1\"\n");
        assert!(brokers.contains("bootstrap.servers"), "{brokers}");
        let commits = refusal("[kafka.extra]\n\"enable.auto.commit\" = \"true\"\n");
        assert!(commits.contains("set by the reader"), "{commits}");
    }

    #[test]
    fn the_other_services_kafka_keys_are_refused_with_why() {
        assert_eq!(
            refusal("[kafka]\npartitions = 3\n"),
            "invalid kafka.partitions = \"3\": candor-dashboards does not create topics"
        );
        assert_eq!(
            refusal("[kafka]\ndelivery_timeout = \"5s\"\n"),
            "invalid kafka.delivery_timeout = \"5s\": candor-dashboards does not produce records"
        );
        let session = refusal("[kafka]\nsession_timeout = \"6s\"\n");
        assert!(
            session.starts_with("invalid kafka.session_timeout = \"6s\": candor-dashboards never"),
            "{session}"
        );
        let unknown = refusal("[kafka]\ngroup = \"g\"\n");
        assert!(
            unknown.contains("at line 2: unknown field `group`"),
            "{unknown}"
        );
    }

    #[test]
    fn a_kafka_settings_file_replaces_the_configurations_tables() {
        let file = kafka_settings_file(
            "[kafka.extra]\n\"security.protocol\" = \"SASL_SSL\"\n\
             [kafka.extra_env]\n\"sasl.password\" = \"CANDOR_KAFKA_SASL_PASSWORD\"\n",
        )
        .unwrap();
        let mut raw = RawConfig::from_toml_str("[kafka.extra]\n\"client.rack\" = \"a\"\n").unwrap();
        raw.set_kafka_settings(file);
        let extra = raw.validate().unwrap().kafka.extra;
        assert_eq!(
            extra.extra().keys().collect::<Vec<_>>(),
            ["security.protocol"]
        );
        assert_eq!(extra.extra_env().len(), 1);
        for refused in [
            "[kafka]\nbrokers = \"h:1\"\n",
            "[kafka.extra]\n\"group.id\" = \"g\"\n",
            "listen = \"127.0.0.1:3000\"\n",
        ] {
            assert!(kafka_settings_file(refused).is_err(), "{refused}");
        }
    }
}
