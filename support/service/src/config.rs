//! Configuration files: the error type and the value rules every service's TOML shares, and the
//! loader that names the file.
//!
//! Each service declares its own sections: TOML → `Raw…` structs (serde, `deny_unknown_fields`,
//! a default for every key) → `validate()` (pure: no file, network or environment is read) → a
//! validated type with real types. What those steps have in common is here, so that a mistake is
//! refused with the same words by the collector's roles and the dashboards:
//!
//! - [`parse_toml`]: TOML text into a `Raw…` struct; an unknown key or a value of the wrong type
//!   is a [`ConfigError::Parse`] naming its line.
//! - [`invalid`] and the value rules ([`parse_duration`], [`socket_addr`], [`nonzero_usize`],
//!   [`parse_brokers`], …): a value that is read but not acceptable is a
//!   [`ConfigError::Invalid`] naming the key's dotted path and the value as written. Nothing is
//!   ever clamped.
//! - The `[kafka]` section is candor-kafka's ([`candor_kafka::KafkaSection`], validated per
//!   client role); its refusals convert into a [`ConfigError`] with the same words.
//! - [`load`], [`load_or_default`]: the file read and parsed, an error naming the file.
//!
//! ```
//! use std::time::Duration;
//! use candor_service::config::{self, ConfigError};
//!
//! #[derive(Debug, Default, serde::Deserialize)]
//! #[serde(default, deny_unknown_fields)]
//! struct RawSchedule {
//!     every: String,
//! }
//!
//! let raw: RawSchedule = config::parse_toml("every = \"1h 30m\"\n")?;
//! assert_eq!(config::parse_duration("every", &raw.every)?, Duration::from_secs(5_400));
//!
//! let typo = config::parse_toml::<RawSchedule>("evrey = \"1h\"\n").unwrap_err();
//! assert!(typo.to_string().starts_with("cannot parse the configuration at line 1: unknown field `evrey`"));
//! let zero = config::parse_duration("every", "0s").unwrap_err();
//! assert!(zero.to_string().starts_with("invalid every = \"0s\": "));
//! # Ok::<(), ConfigError>(())
//! ```

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;

// One Kafka bootstrap broker, and brokers as librdkafka's `bootstrap.servers`: candor-kafka's,
// which owns the `[kafka]` section.
pub use candor_kafka::{BrokerAddr, bootstrap_servers};

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, an unknown key or a value of the wrong type. The message names an unknown key
    /// and the line of any other fault; the source's `Display` shows that line.
    #[error("cannot parse the configuration{}: {}", at_line(.line), .source.message())]
    Parse {
        /// 1-based line of the fault, when the parser knows where it is.
        line: Option<usize>,
        /// The parser's error.
        source: toml::de::Error,
    },
    /// A value was read but is not acceptable.
    #[error("invalid {key} = {value:?}: {reason}")]
    Invalid {
        /// Dotted path of the key, e.g. `kafka.partitions`.
        key: String,
        /// The value as written (never a secret: those are replaced by `(not shown)`).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `kafka.extra` or `kafka.extra_env` (or an environment variable's name, such as
    /// `otlp.auth_token_env`) refused by the Kafka client settings' rules, shared by every
    /// service ([`candor_kafka`]).
    #[error(transparent)]
    Kafka(#[from] candor_kafka::SettingsError),
}

/// A value the `[kafka]` section's rules refused is [`ConfigError::Invalid`], with the same key,
/// value and reason.
impl From<candor_kafka::InvalidValue> for ConfigError {
    fn from(err: candor_kafka::InvalidValue) -> Self {
        let candor_kafka::InvalidValue { key, value, reason } = err;
        Self::Invalid { key, value, reason }
    }
}

/// A `[kafka]` section refused for a role ([`candor_kafka::KafkaSection`]): a value is
/// [`ConfigError::Invalid`], `kafka.extra` or `kafka.extra_env` is [`ConfigError::Kafka`].
impl From<candor_kafka::SectionError> for ConfigError {
    fn from(err: candor_kafka::SectionError) -> Self {
        match err {
            candor_kafka::SectionError::Invalid(invalid) => invalid.into(),
            candor_kafka::SectionError::Settings(settings) => Self::Kafka(settings),
        }
    }
}

fn at_line(line: &Option<usize>) -> String {
    line.map(|n| format!(" at line {n}")).unwrap_or_default()
}

/// A [`ConfigError::Invalid`]: `key` (the dotted path) holds `value` (as written), refused for
/// `reason`.
pub fn invalid(
    key: impl Into<String>,
    value: impl ToString,
    reason: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parses TOML text into a configuration struct as written. Unknown keys (with
/// `deny_unknown_fields`) and values of the wrong type are refused with the 1-based line of the
/// fault.
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|source| {
        let line = source.span().map(|span| line_of(text, span.start));
        ConfigError::Parse { line, source }
    })
}

/// The 1-based line of the byte at `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.bytes().take(offset).filter(|b| *b == b'\n').count() + 1
}

/// Parses a duration above zero in Candor's one grammar ([`candor_schema::duration`]: "250ms",
/// "5s", "2m", "1h 30m", "2d"); a mistake is refused with an error naming `key` (the dotted path
/// the value came from) and the value.
pub fn parse_duration(key: &str, value: &str) -> Result<Duration, ConfigError> {
    candor_schema::duration::parse_positive(value).map_err(|err| invalid(key, value, err.reason))
}

/// [`parse_duration`] for a key where zero has a meaning (e.g. "do not wait").
pub fn parse_duration_or_zero(key: &str, value: &str) -> Result<Duration, ConfigError> {
    candor_schema::duration::parse(value).map_err(|err| invalid(key, value, err.reason))
}

/// An IP address and a port, e.g. `127.0.0.1:8888` or `[::1]:3000`; a host name is refused
/// (a listen address is bound, not resolved).
pub fn socket_addr(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "expected an IP address and a port"))
}

/// A count of at least 1.
pub fn nonzero_usize(key: &str, value: i64) -> Result<NonZeroUsize, ConfigError> {
    usize::try_from(value)
        .ok()
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| invalid(key, value, "must be at least 1"))
}

/// A count of at least 1 that fits a `u32`.
pub fn nonzero_u32(key: &str, value: i64) -> Result<NonZeroU32, ConfigError> {
    u32::try_from(value)
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or_else(|| invalid(key, value, format!("must be between 1 and {}", u32::MAX)))
}

/// Refuses a value that is empty or only white space.
pub fn not_blank(key: &str, value: &str) -> Result<(), ConfigError> {
    if value.trim().is_empty() {
        return Err(invalid(key, value, "must not be blank"));
    }
    Ok(())
}

/// Bootstrap brokers written as `host:port`, comma separated (spaces around an entry ignored, an
/// IPv6 host in brackets); at least one. The first bad entry is refused, naming `key`
/// ([`candor_kafka::parse_brokers`], which the `[kafka]` section's validation uses too).
pub fn parse_brokers(key: &str, value: &str) -> Result<Vec<BrokerAddr>, ConfigError> {
    candor_kafka::parse_brokers(key, value).map_err(ConfigError::from)
}

/// Why a configuration file was not loaded. The message names the file; its source says what is
/// wrong (shown by `{:#}` and by `anyhow`'s report).
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("reading {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file was read, and refused.
    #[error("in {}", .path.display())]
    Refused {
        /// The file.
        path: PathBuf,
        /// What is wrong with it (boxed: a parse error is large, and this error travels far).
        source: Box<ConfigError>,
    },
}

impl ConfigFileError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Read { path, .. } | Self::Refused { path, .. } => path.as_path(),
        }
    }
}

/// The text of the configuration file `path`.
pub fn read_file(path: &Path) -> Result<String, ConfigFileError> {
    std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads the configuration file `path` and parses it with `parse` (a service's
/// `Raw…::from_toml_str`, or one that validates as well).
pub fn load<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, ConfigError>,
) -> Result<T, ConfigFileError> {
    let text = read_file(path)?;
    parse(&text).map_err(|source| ConfigFileError::Refused {
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

/// [`load`] when a file is named; the defaults (every key left out) when none is.
pub fn load_or_default<T: Default>(
    path: Option<&Path>,
    parse: impl FnOnce(&str) -> Result<T, ConfigError>,
) -> Result<T, ConfigFileError> {
    match path {
        Some(path) => load(path, parse),
        None => Ok(T::default()),
    }
}

/// Ends a `--check`: prints the configuration as the process would run with it, or prints why
/// it would not start (with its causes, `{:#}`) and exits with status 2.
pub fn report_check<E: std::fmt::Display>(checked: Result<String, E>) {
    match checked {
        Ok(shown) => {
            println!("{shown}");
            println!("configuration OK");
        }
        Err(err) => {
            eprintln!("configuration refused: {err:#}");
            std::process::exit(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::error::Error as _;

    use serde::Deserialize;

    use super::*;

    /// A service's file in miniature: a top-level key and a section, every key defaulted.
    #[derive(Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct RawExample {
        listen: String,
        section: RawSection,
    }

    #[derive(Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct RawSection {
        count: i64,
        extra: BTreeMap<String, String>,
    }

    fn refusal(text: &str) -> String {
        parse_toml::<RawExample>(text).unwrap_err().to_string()
    }

    #[test]
    fn an_empty_text_is_every_default() {
        assert_eq!(parse_toml::<RawExample>("").unwrap(), RawExample::default());
        let raw: RawExample = parse_toml("listen = \"a\"\n[section]\ncount = 3\n").unwrap();
        assert_eq!((raw.listen.as_str(), raw.section.count), ("a", 3));
    }

    #[test]
    fn an_unknown_key_is_refused_naming_it_and_its_line() {
        let top = refusal("listen = \"a\"\nlisten_addr = \"b\"\n");
        assert!(
            top.starts_with(
                "cannot parse the configuration at line 2: unknown field `listen_addr`"
            ),
            "{top}"
        );
        let nested = refusal("[section]\ncount = 1\n\ncuont = 2\n");
        assert!(
            nested.starts_with("cannot parse the configuration at line 4: unknown field `cuont`"),
            "{nested}"
        );
        let section = refusal("[sektion]\n");
        assert!(section.contains("unknown field `sektion`"), "{section}");
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_line_and_keeps_the_parsers_error() {
        let err = parse_toml::<RawExample>("\n[section]\ncount = \"3\"\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Parse { line: Some(3), .. }),
            "{err:?}"
        );
        assert!(err.source().is_some(), "the toml error is the source");
        let broken = refusal("listen = \n");
        assert!(
            broken.starts_with("cannot parse the configuration at line "),
            "{broken}"
        );
    }

    #[test]
    fn durations_have_one_grammar_and_refusals_name_the_key_and_value() {
        for (text, ms) in [
            ("250ms", 250),
            ("5s", 5_000),
            ("2m", 120_000),
            ("1h 30m", 5_400_000),
            ("1d", 86_400_000),
            (" 5s", 5_000),
            ("1.5s", 1_500),
        ] {
            assert_eq!(
                parse_duration("k", text).unwrap(),
                Duration::from_millis(ms)
            );
        }
        for text in ["0s", "5", "5x", "", "-5s"] {
            let err = parse_duration("heartbeat.interval", text)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("invalid heartbeat.interval = {text:?}: ")),
                "{err}"
            );
        }
        assert_eq!(
            parse_duration_or_zero("reconcile.settle", "0s").unwrap(),
            Duration::ZERO
        );
        assert!(parse_duration_or_zero("reconcile.settle", "5").is_err());
    }

    #[test]
    fn socket_addresses_are_an_ip_and_a_port() {
        assert_eq!(
            socket_addr("listen", "127.0.0.1:3000").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 3000))
        );
        assert_eq!(socket_addr("listen", "[::1]:3000").unwrap().port(), 3000);
        for bad in ["localhost:3000", "127.0.0.1", "127.0.0.1:70000", ""] {
            let err = socket_addr("listen", bad).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("invalid listen = {bad:?}: expected an IP address and a port")
            );
        }
    }

    #[test]
    fn counts_are_refused_below_one_never_clamped() {
        assert_eq!(nonzero_usize("n", 5).unwrap().get(), 5);
        assert_eq!(nonzero_u32("n", 1).unwrap().get(), 1);
        for bad in [0, -1] {
            let err = nonzero_usize("files.max_rows", bad)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("invalid files.max_rows = "), "{err}");
        }
        assert!(nonzero_u32("n", 0).is_err());
        assert!(nonzero_u32("n", i64::from(u32::MAX) + 1).is_err());
        assert!(not_blank("kafka.group", " ").is_err());
        assert!(not_blank("kafka.group", "g").is_ok());
    }

    #[test]
    fn brokers() {
        let brokers = parse_brokers("kafka.brokers", "a:1, [::1]:2").unwrap();
        assert_eq!(
            brokers[1],
            BrokerAddr {
                host: "[::1]".into(),
                port: 2
            }
        );
        assert_eq!(bootstrap_servers(&brokers), "a:1,[::1]:2");
        for bad in ["a", "", "a:1,", "a:0", "::1:2", "a b:1"] {
            let err = parse_brokers("kafka.brokers", bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid kafka.brokers = "), "{err}");
        }
    }

    #[test]
    fn a_file_that_cannot_be_read_or_is_refused_is_named() {
        let missing = Path::new("/nonexistent/candor/service.toml");
        let err = load(missing, parse_toml::<RawExample>).unwrap_err();
        assert!(matches!(err, ConfigFileError::Read { .. }), "{err:?}");
        assert_eq!(err.to_string(), "reading /nonexistent/candor/service.toml");
        assert_eq!(err.path(), missing);

        let path = std::env::temp_dir().join(format!(
            "candor-service-config-test-{}.toml",
            std::process::id()
        ));
        std::fs::write(&path, "[section]\ncuont = 2\n").unwrap();
        let err = load(&path, parse_toml::<RawExample>).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(err.to_string(), format!("in {}", path.display()));
        let cause = err.source().map(ToString::to_string).unwrap_or_default();
        assert!(
            cause.contains("at line 2: unknown field `cuont`"),
            "{cause}"
        );

        let defaults: RawExample = load_or_default(None, parse_toml).unwrap();
        assert_eq!(defaults, RawExample::default());
    }
}
