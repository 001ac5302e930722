//! Extra librdkafka settings for the readers' Kafka consumers (`candor`, `candor-dashboards`):
//! TLS, SASL and the like, from a TOML file in the same shape as the services' own
//! `[kafka.extra]` / `[kafka.extra_env]` tables.
//!
//! ```toml
//! [kafka.extra]
//! "security.protocol" = "SASL_SSL"
//! "sasl.mechanism" = "SCRAM-SHA-512"
//! "sasl.username" = "candor-dashboards"
//! "ssl.ca.location" = "/etc/candor/kafka-ca/ca.crt"
//!
//! [kafka.extra_env]
//! "sasl.password" = "CANDOR_KAFKA_SASL_PASSWORD"
//! ```
//!
//! A secret is never written in the file: a setting that looks like one is refused in
//! `[kafka.extra]` and must name the environment variable holding it in `[kafka.extra_env]`.
//! Variables are read once, when the file is loaded; an unset or empty one stops the program
//! there, naming the variable, rather than at the first read.
//!
//! The rules and their messages are the services' own, from [`candor_kafka`] (the readers'
//! refused settings are [`Role::Reader`]'s); an error names the file first. A program that
//! reads the same tables from its own configuration file (the dashboards' `[kafka]`) validates
//! them under the same role and converts the result (`From<ClientSettings>`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candor_kafka::{ClientSettings, ExtraSettings, Reader, Role, SettingsError};
use rdkafka::config::ClientConfig;
use serde::Deserialize;

/// Settings a reader's consumers get beyond the brokers and their own fixed ones, values from
/// `[kafka.extra_env]` already read from the environment. Its `Debug` does not show those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaClientSettings(ClientSettings);

/// Why a Kafka client settings file was refused.
#[derive(Debug, thiserror::Error)]
pub enum KafkaConfigError {
    /// The file could not be read.
    #[error("reading the Kafka client settings {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not TOML of the expected shape.
    #[error(
        "{path} is not a Kafka client settings file ([kafka.extra], [kafka.extra_env]): {message}"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A setting the readers' rules refuse ([`Role::Reader`]), or a variable named in
    /// `[kafka.extra_env]` that has no value.
    #[error("{path}: {error}")]
    Settings {
        /// The file.
        path: PathBuf,
        /// Which rule, naming the key.
        error: SettingsError,
    },
}

/// A Kafka client settings file as written: `[kafka.extra]` and `[kafka.extra_env]`, nothing
/// else. [`KafkaClientSettings::load`] reads, checks and resolves one; a program that takes the
/// same file into its own configuration (the dashboards) parses this shape and checks it there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SettingsFile {
    /// Its `[kafka]` table.
    pub kafka: SettingsTables,
}

/// The `[kafka]` table of a [`SettingsFile`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SettingsTables {
    /// `kafka.extra`: settings as written.
    pub extra: BTreeMap<String, String>,
    /// `kafka.extra_env`: settings whose values are read from the named variables.
    pub extra_env: BTreeMap<String, String>,
}

impl KafkaClientSettings {
    /// Loads `path`, refusing the settings `owned` lists (`(setting, who sets it)`, e.g.
    /// `("group.id", "set by --group")`) besides the brokers and the readers' own, and reading
    /// every variable `[kafka.extra_env]` names from the environment.
    pub fn load(path: &Path, owned: &[(&str, &str)]) -> Result<Self, KafkaConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| KafkaConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text, owned, |name| std::env::var(name).ok())
    }

    /// [`Self::load`] on the text of the file, with `lookup` standing for the environment.
    pub fn parse(
        path: &Path,
        text: &str,
        owned: &[(&str, &str)],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, KafkaConfigError> {
        let file: SettingsFile = toml::from_str(text).map_err(|err| KafkaConfigError::Parse {
            path: path.to_path_buf(),
            message: err.message().to_owned(),
        })?;
        let refused = |error| KafkaConfigError::Settings {
            path: path.to_path_buf(),
            error,
        };
        let SettingsTables { extra, extra_env } = file.kafka;
        let settings =
            ExtraSettings::validate(Role::Reader { owned }, extra, extra_env).map_err(refused)?;
        settings.resolve_with(lookup).map(Self).map_err(refused)
    }

    /// The configuration of `reader`, with these settings under its own (which the file may
    /// not name).
    pub fn reader_config(&self, reader: &Reader<'_>) -> ClientConfig {
        reader.config(&self.0)
    }

    /// Whether no setting was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<ClientSettings> for KafkaClientSettings {
    /// Settings validated and resolved elsewhere under the readers' rules ([`Role::Reader`]),
    /// e.g. the `[kafka]` tables of the dashboards' configuration file.
    fn from(settings: ClientSettings) -> Self {
        Self(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNED: &[(&str, &str)] = &[("group.id", "set by --group")];

    fn parse(text: &str) -> Result<KafkaClientSettings, KafkaConfigError> {
        KafkaClientSettings::parse(Path::new("kafka.toml"), text, OWNED, |name| {
            (name == "PASSWORD_VAR").then(|| "hunter2".to_owned())
        })
    }

    #[test]
    fn settings_and_variables_reach_the_client_and_secrets_are_not_shown() {
        let text = "[kafka.extra]\n\"security.protocol\" = \"SASL_SSL\"\n\
                    [kafka.extra_env]\n\"sasl.password\" = \"PASSWORD_VAR\"\n";
        let settings = parse(text).unwrap();
        let config = settings.reader_config(&Reader {
            bootstrap_servers: "k:9092",
            id: "reader",
            reset: candor_kafka::OffsetReset::Earliest,
            stops_at_end: false,
        });
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("sasl.password"), Some("hunter2"));
        let shown = format!("{settings:?}");
        assert!(
            shown.contains("SASL_SSL") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn an_empty_file_adds_nothing() {
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn refusals_name_the_key_and_never_echo_a_secret() {
        let refusal = |text: &str| parse(text).unwrap_err().to_string();
        let inline = refusal("[kafka.extra]\n\"sasl.password\" = \"hunter3\"\n");
        assert!(
            inline.contains("sasl.password") && !inline.contains("hunter3"),
            "{inline}"
        );
        let brokers = refusal("[kafka.extra]\n\"bootstrap.servers\" = \"h:1\"\n");
        assert!(brokers.contains("set by --kafka"), "{brokers}");
        let group = refusal("[kafka.extra]\n\"group.id\" = \"g\"\n");
        assert!(group.contains("set by --group"), "{group}");
        let commits = refusal("[kafka.extra]\n\"enable.auto.commit\" = \"true\"\n");
        assert!(commits.contains("set by the reader"), "{commits}");
        let unset = refusal("[kafka.extra_env]\n\"sasl.password\" = \"UNSET_VAR\"\n");
        assert!(
            unset.contains("UNSET_VAR") && unset.contains("unset"),
            "{unset}"
        );
        let not_a_name = refusal("[kafka.extra_env]\n\"sasl.password\" = \"hunter 4\"\n");
        assert!(!not_a_name.contains("hunter 4"), "{not_a_name}");
        let twice = refusal(
            "[kafka.extra]\n\"sasl.username\" = \"u\"\n\
             [kafka.extra_env]\n\"sasl.username\" = \"PASSWORD_VAR\"\n",
        );
        assert!(twice.contains("is set too"), "{twice}");
        let unknown = refusal("[kafka]\nbrokers = \"h:1\"\n");
        assert!(unknown.contains("brokers"), "{unknown}");
    }
}
