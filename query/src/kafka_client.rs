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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rdkafka::config::ClientConfig;
use serde::Deserialize;

/// Settings a reader's consumers get beyond the brokers and their own fixed ones.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaClientSettings {
    /// `(setting, value)`, values from `[kafka.extra_env]` already read from the environment.
    settings: Vec<(String, String)>,
    /// The settings whose values are secrets: never shown.
    secret: Vec<String>,
}

impl std::fmt::Debug for KafkaClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<(&str, &str)> = self
            .settings
            .iter()
            .map(|(name, value)| {
                let value = if self.secret.contains(name) {
                    "<redacted>"
                } else {
                    value.as_str()
                };
                (name.as_str(), value)
            })
            .collect();
        f.debug_struct("KafkaClientSettings")
            .field("settings", &shown)
            .finish()
    }
}

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
    /// A setting that may not be given here.
    #[error("{path}: {key} is refused: {reason}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// The table and setting, e.g. `kafka.extra."sasl.password"`.
        key: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A variable named in `[kafka.extra_env]` has no value.
    #[error(
        "{path}: kafka.extra_env.{setting:?} names the environment variable {variable}, which is unset or empty"
    )]
    MissingVariable {
        /// The file.
        path: PathBuf,
        /// The librdkafka setting.
        setting: String,
        /// The variable.
        variable: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    kafka: Tables,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Tables {
    #[serde(default)]
    extra: BTreeMap<String, String>,
    #[serde(default)]
    extra_env: BTreeMap<String, String>,
}

impl KafkaClientSettings {
    /// Loads `path`, refusing the settings `owned` lists (`(setting, who sets it)`, e.g.
    /// `("group.id", "set by --group")`) besides the brokers, and reading every variable
    /// `[kafka.extra_env]` names from the environment.
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
        let file: File = toml::from_str(text).map_err(|err| KafkaConfigError::Parse {
            path: path.to_path_buf(),
            message: err.message().to_owned(),
        })?;
        let refused = |key: String, reason: &str| KafkaConfigError::Refused {
            path: path.to_path_buf(),
            key,
            reason: reason.to_owned(),
        };
        let reserved = |name: &str| match name {
            "bootstrap.servers" | "metadata.broker.list" => Some("set by --kafka"),
            _ => owned
                .iter()
                .find(|(setting, _)| *setting == name)
                .map(|(_, by)| *by)
                .or_else(|| READER_OWNED.contains(&name).then_some(READER_REASON)),
        };
        let Tables { extra, extra_env } = file.kafka;
        let mut settings = Self::default();
        for (name, value) in extra {
            let key = format!("kafka.extra.{name:?}");
            if let Some(reason) = reserved(&name) {
                return Err(refused(key, reason));
            }
            if is_secret_setting(&name) {
                let reason = "a secret: name the variable holding it in [kafka.extra_env] instead";
                return Err(refused(key, reason));
            }
            settings.settings.push((name, value));
        }
        for (name, variable) in extra_env {
            let key = format!("kafka.extra_env.{name:?}");
            if let Some(reason) = reserved(&name) {
                return Err(refused(key, reason));
            }
            if settings.settings.iter().any(|(set, _)| *set == name) {
                return Err(refused(key, "also set in [kafka.extra]"));
            }
            let portable = variable
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                && variable.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
            if !portable {
                let reason = "expected the name of an environment variable (letters, digits, _)";
                return Err(refused(key, reason));
            }
            let Some(value) = lookup(&variable).filter(|value| !value.is_empty()) else {
                return Err(KafkaConfigError::MissingVariable {
                    path: path.to_path_buf(),
                    setting: name,
                    variable,
                });
            };
            settings.secret.push(name.clone());
            settings.settings.push((name, value));
        }
        Ok(settings)
    }

    /// Adds the settings to a fresh client configuration, before the reader's own (which the
    /// file may not name).
    pub fn apply<'a>(&self, config: &'a mut ClientConfig) -> &'a mut ClientConfig {
        for (name, value) in &self.settings {
            config.set(name, value);
        }
        config
    }

    /// Whether no setting was given.
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
    }
}

/// Settings every reader sets itself: how it reads (assigned partitions, no commits by
/// librdkafka, end-of-partition events) is what its coverage statement relies on.
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

/// librdkafka settings that hold a secret (`sasl.password`, `ssl.key.password`,
/// `sasl.oauthbearer.client.secret`, an inline private key, ...): the same test as the services'.
fn is_secret_setting(name: &str) -> bool {
    name.ends_with("password") || name.contains("secret") || name == "ssl.key.pem"
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
        let mut config = ClientConfig::new();
        settings.apply(&mut config);
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
        assert!(twice.contains("also set"), "{twice}");
        let unknown = refusal("[kafka]\nbrokers = \"h:1\"\n");
        assert!(unknown.contains("brokers"), "{unknown}");
    }
}
