//! The Kafka client settings Candor's programs take beyond their own: the `[kafka.extra]` and
//! `[kafka.extra_env]` tables (TLS, SASL and the like) of the collector's and the compactor's
//! configuration files and of the readers' settings file (`candor`, `candor-dashboards`), with
//! one set of rules, one message per rule and one reading of the environment.
//!
//! - [`ExtraSettings::validate`] (pure) refuses in either table a setting the client's [`Role`]
//!   sets itself or that its guarantee depends on; in `kafka.extra` a secret
//!   ([`is_secret_setting`]); in `kafka.extra_env` a setting `kafka.extra` sets too and anything
//!   but a portable variable name ([`env_var_name`]).
//! - [`ExtraSettings::resolve`] reads every variable `kafka.extra_env` names, once; an unset or
//!   empty one is an error that names it, so a program stops at start rather than at its first
//!   connection.
//! - [`ClientSettings::apply`] sets the result on an rdkafka [`ClientConfig`]. Its `Debug` never
//!   shows a value read from the environment.
//! - The builders set the rest, one per kind of client: [`ProducerSettings`] (the collector's
//!   producer), [`GroupConsumerSettings`] (the compactor's consumer) and [`Reader`] (`candor`'s
//!   tail, the dashboards' stream, `candor-collector read`). What a builder sets after the
//!   extra settings is what its [`Role`] refuses in them.
//! - [`KafkaSection`] is the one `[kafka]` section of the configuration files (brokers, the
//!   producer's and the group's keys, the two tables), validated per role with the role's
//!   defaults ([`KafkaSection::producer`], [`KafkaSection::group_consumer`],
//!   [`KafkaSection::reader`]); a key of another role is refused, saying why. The brokers are
//!   read by [`parse_brokers`].
//!
//! **Secrets are never in a file.** A configuration file is committed, baked into images, copied
//! into ConfigMaps and printed when debugging; it names the environment variables that hold
//! secrets instead, which a secret store fills and rotates without touching the file. Every
//! [`SettingsError`] names the key and the value, except a value that may be a secret, shown as
//! `(not shown)`.
//!
//! ```
//! use std::collections::BTreeMap;
//! use candor_kafka::{ExtraSettings, Role};
//!
//! let extra = BTreeMap::from([("security.protocol".to_owned(), "SASL_SSL".to_owned())]);
//! let extra_env = BTreeMap::from([("sasl.password".to_owned(), "KAFKA_PASSWORD".to_owned())]);
//! let settings = ExtraSettings::validate(Role::Producer, extra, extra_env)?;
//! // The environment, as `resolve` would read it.
//! let resolved = settings.resolve_with(|var| (var == "KAFKA_PASSWORD").then(|| "hunter2".into()))?;
//! let mut config = rdkafka::ClientConfig::new();
//! resolved.apply(&mut config);
//! assert_eq!(config.get("sasl.password"), Some("hunter2"));
//! assert!(!format!("{resolved:?}").contains("hunter2"));
//!
//! // The producer's delivery guarantee cannot be turned off from the file.
//! let acks = BTreeMap::from([("acks".to_owned(), "1".to_owned())]);
//! let refused = ExtraSettings::validate(Role::Producer, acks, BTreeMap::new()).unwrap_err();
//! assert!(refused.to_string().starts_with("invalid kafka.extra.\"acks\" = \"1\": cannot be overridden"));
//! # Ok::<(), candor_kafka::SettingsError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rdkafka::config::ClientConfig;

mod brokers;
mod clients;
mod section;

pub use brokers::{BrokerAddr, bootstrap_servers, parse_brokers};
pub use clients::{Compression, GroupConsumerSettings, OffsetReset, ProducerSettings, Reader};
pub use section::{
    GroupConsumerConfig, GroupConsumerDefaults, InvalidValue, KafkaSection, ProducerConfig,
    ProducerDefaults, ReaderConfig, ReaderDefaults, SectionError,
};

/// Shown in place of a value that may be a secret.
const NOT_SHOWN: &str = "(not shown)";

/// Which client the settings are for; each sets some settings itself, which the file may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role<'a> {
    /// The collector's ingest producer (the collector's `[kafka]`): idempotent, `acks=all`, with
    /// brokers, compression and delivery timeout from typed keys.
    Producer,
    /// The compactor's consumer (the compactor's `[kafka]`): its offsets live in the tables, it
    /// reads committed records, assigns partitions itself and sets its group from typed keys.
    Consumer,
    /// A reader: the `candor` CLI's Kafka tail and the dashboards' stream (the readers' settings
    /// file, `--kafka-config`). How a reader reads is what its coverage statement relies on.
    Reader {
        /// More settings this program sets itself, each with who sets it, e.g.
        /// `("group.id", "set by --group")`; that reason is given for them.
        owned: &'a [(&'a str, &'a str)],
    },
}

const GUARANTEE: &str = "cannot be overridden: clients get an answer only after an idempotent, \
                         acks=all delivery";
const OFFSETS: &str =
    "cannot be overridden: the compactor's offsets live in the table, Kafka's are a hint";

/// Settings every reader sets itself: assigned partitions, no commits by librdkafka and
/// end-of-partition events are what its coverage statement relies on.
const READER_OWNED: &[&str] = &[
    "group.id",
    "client.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.partition.eof",
    "auto.offset.reset",
    "fetch.wait.max.ms",
];
const READER_REASON: &str =
    "set by the reader itself: its coverage statement relies on how it reads";

impl<'a> Role<'a> {
    /// Why the settings file may not set `name` for this client, if it may not.
    pub fn reserved(self, name: &str) -> Option<&'a str> {
        match self {
            Self::Producer => match name {
                "enable.idempotence" | "acks" | "request.required.acks" => Some(GUARANTEE),
                "bootstrap.servers" | "metadata.broker.list" => Some("set by kafka.brokers"),
                "client.id" => Some("set from collector_id"),
                "compression.type" | "compression.codec" => Some("set by kafka.compression"),
                "compression.level" => Some("set by kafka.compression_level"),
                "delivery.timeout.ms" | "message.timeout.ms" => {
                    Some("set by kafka.delivery_timeout")
                }
                "queue.buffering.max.messages" => Some("set by kafka.queue_max_messages"),
                _ => None,
            },
            Self::Consumer => match name {
                "enable.auto.commit" | "enable.auto.offset.store" | "auto.offset.reset" => {
                    Some(OFFSETS)
                }
                "isolation.level" => {
                    Some("cannot be overridden: the compactor reads committed records")
                }
                "partition.assignment.strategy" | "group.protocol" => Some(
                    "cannot be overridden: the compactor assigns with the eager protocol at the \
                     tables' positions",
                ),
                "client.id" => Some("set from compactor_id"),
                "statistics.interval.ms" => Some("set by the compactor (its lag metric)"),
                "bootstrap.servers" | "metadata.broker.list" => Some("set by kafka.brokers"),
                "group.id" => Some("set by kafka.group_id"),
                "session.timeout.ms" => Some("set by kafka.session_timeout"),
                _ => None,
            },
            Self::Reader { owned } => match name {
                "bootstrap.servers" | "metadata.broker.list" => Some("set by --kafka"),
                _ => owned
                    .iter()
                    .find(|(setting, _)| *setting == name)
                    .map(|(_, by)| *by)
                    .or_else(|| READER_OWNED.contains(&name).then_some(READER_REASON)),
            },
        }
    }
}

/// Why Kafka client settings were refused. Each message names the key and the value as written,
/// except a value that may be a secret, shown as `(not shown)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A setting the client sets itself, or that its guarantee depends on ([`Role::reserved`]).
    #[error("invalid {key} = {value:?}: {reason}")]
    Reserved {
        /// The table and setting, e.g. `kafka.extra."acks"`.
        key: String,
        /// The value as written, or `(not shown)`.
        value: String,
        /// Why, and who sets it.
        reason: String,
    },
    /// A secret written in `kafka.extra` ([`is_secret_setting`]).
    #[error(
        "invalid kafka.extra.{setting:?} = {NOT_SHOWN:?}: a secret: name the variable holding it \
         in kafka.extra_env instead"
    )]
    Secret {
        /// The librdkafka setting, e.g. `sasl.password`.
        setting: String,
    },
    /// A setting named in both `kafka.extra` and `kafka.extra_env`.
    #[error(
        "invalid kafka.extra_env.{setting:?} = {variable:?}: kafka.extra.{setting:?} is set too"
    )]
    SetTwice {
        /// The librdkafka setting.
        setting: String,
        /// The variable named for it, or `(not shown)` when that is no variable name.
        variable: String,
    },
    /// Not a portable environment variable name ([`env_var_name`]); not echoed, since a mistaken
    /// value there is most likely the secret itself.
    #[error(
        "invalid {key} = {NOT_SHOWN:?}: expected the name of an environment variable (letters, \
         digits, _)"
    )]
    NotAVariableName {
        /// Where the name was written, e.g. `kafka.extra_env."sasl.password"`.
        key: String,
    },
    /// A variable named in `kafka.extra_env` is unset (or not UTF-8) or empty.
    #[error("kafka.extra_env.{setting:?} names {variable}, which is unset or empty")]
    UnsetVariable {
        /// The librdkafka setting.
        setting: String,
        /// The variable.
        variable: String,
    },
}

/// librdkafka settings that hold a secret (`sasl.password`, `ssl.key.password`,
/// `sasl.oauthbearer.client.secret`, an inline private key, ...): they may only be named by an
/// environment variable, in `kafka.extra_env`.
pub fn is_secret_setting(name: &str) -> bool {
    name.ends_with("password") || name.contains("secret") || name == "ssl.key.pem"
}

/// Refuses anything but a portable environment variable name (ASCII letters, digits and `_`,
/// not starting with a digit), naming `key`, the dotted path it was written at.
pub fn env_var_name(key: &str, name: &str) -> Result<(), SettingsError> {
    if is_env_var_name(name) {
        Ok(())
    } else {
        Err(SettingsError::NotAVariableName {
            key: key.to_owned(),
        })
    }
}

fn is_env_var_name(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// A variable name as shown in a message: itself when it is one, else perhaps a secret.
fn shown_variable(name: &str) -> String {
    if is_env_var_name(name) {
        name
    } else {
        NOT_SHOWN
    }
    .to_owned()
}

/// `kafka.extra` and `kafka.extra_env` as written, validated for a [`Role`]: no reserved setting,
/// no secret in `kafka.extra`, no setting in both, only portable variable names. Holds no secret
/// (the variables are not read yet), so its `Debug` shows everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraSettings {
    extra: BTreeMap<String, String>,
    extra_env: BTreeMap<String, String>,
}

impl ExtraSettings {
    /// Checks `extra` (librdkafka setting → value) and `extra_env` (setting → name of the
    /// variable holding its value) for `role`. Pure: the environment is not read. The first
    /// refusal is returned.
    pub fn validate(
        role: Role<'_>,
        extra: BTreeMap<String, String>,
        extra_env: BTreeMap<String, String>,
    ) -> Result<Self, SettingsError> {
        for (name, value) in &extra {
            if let Some(reason) = role.reserved(name) {
                let value = if is_secret_setting(name) {
                    NOT_SHOWN
                } else {
                    value
                };
                return Err(SettingsError::Reserved {
                    key: format!("kafka.extra.{name:?}"),
                    value: value.to_owned(),
                    reason: reason.to_owned(),
                });
            }
            if is_secret_setting(name) {
                return Err(SettingsError::Secret {
                    setting: name.clone(),
                });
            }
        }
        for (name, variable) in &extra_env {
            let key = format!("kafka.extra_env.{name:?}");
            if let Some(reason) = role.reserved(name) {
                return Err(SettingsError::Reserved {
                    key,
                    value: shown_variable(variable),
                    reason: reason.to_owned(),
                });
            }
            if extra.contains_key(name) {
                return Err(SettingsError::SetTwice {
                    setting: name.clone(),
                    variable: shown_variable(variable),
                });
            }
            env_var_name(&key, variable)?;
        }
        Ok(Self { extra, extra_env })
    }

    /// `kafka.extra`: librdkafka setting → value.
    pub fn extra(&self) -> &BTreeMap<String, String> {
        &self.extra
    }

    /// `kafka.extra_env`: librdkafka setting → name of the variable holding its value.
    pub fn extra_env(&self) -> &BTreeMap<String, String> {
        &self.extra_env
    }

    /// Whether neither table sets anything.
    pub fn is_empty(&self) -> bool {
        self.extra.is_empty() && self.extra_env.is_empty()
    }

    /// The settings with the value of every variable `kafka.extra_env` names read from the
    /// process's environment, each once.
    pub fn resolve(&self) -> Result<ClientSettings, SettingsError> {
        self.resolve_with(|variable| std::env::var(variable).ok())
    }

    /// [`Self::resolve`] with `lookup` standing for the environment. An unset or empty variable
    /// is refused, naming the setting and the variable.
    pub fn resolve_with(
        &self,
        mut lookup: impl FnMut(&str) -> Option<String>,
    ) -> Result<ClientSettings, SettingsError> {
        let mut settings = self.extra.clone();
        let mut from_env = BTreeSet::new();
        for (name, variable) in &self.extra_env {
            let Some(value) = lookup(variable).filter(|value| !value.is_empty()) else {
                return Err(SettingsError::UnsetVariable {
                    setting: name.clone(),
                    variable: variable.clone(),
                });
            };
            settings.insert(name.clone(), value);
            from_env.insert(name.clone());
        }
        Ok(ClientSettings { settings, from_env })
    }
}

/// The settings a client gets beyond its own, variables read: what [`ClientSettings::apply`]
/// sets. Its `Debug` shows `<redacted>` for every value read from the environment.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    /// librdkafka setting → value.
    settings: BTreeMap<String, String>,
    /// The settings whose values came from the environment: never shown.
    from_env: BTreeSet<String>,
}

impl ClientSettings {
    /// Sets every setting on `config`. A client sets its own settings on the same config, before
    /// or after: the file may not name them.
    pub fn apply<'c>(&self, config: &'c mut ClientConfig) -> &'c mut ClientConfig {
        for (name, value) in &self.settings {
            config.set(name, value);
        }
        config
    }

    /// Whether there is no setting.
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
    }
}

impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<(&str, &str)> = self
            .settings
            .iter()
            .map(|(name, value)| {
                let value = if self.from_env.contains(name) {
                    "<redacted>"
                } else {
                    value.as_str()
                };
                (name.as_str(), value)
            })
            .collect();
        f.debug_struct("ClientSettings")
            .field("settings", &shown)
            .finish()
    }
}

#[cfg(test)]
mod tests;
