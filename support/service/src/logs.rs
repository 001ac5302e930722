//! The logging setup: `tracing` events to stderr, as text or JSON lines.

use clap::ValueEnum;
use clap::builder::PossibleValue;

/// Our own logs at info; the Delta Lake libraries log every snapshot at info, so theirs start at
/// warn; DataFusion warns for each column of a scan whose files carry no statistics to prune by
/// (it then reads them all, as it should), so its pruning starts at error. `RUST_LOG` replaces
/// all of it.
pub const DEFAULT_LOG_FILTER: &str = "info,deltalake_core=warn,buoyant_kernel=warn,delta_kernel=warn,\
     datafusion_common::pruning=error";

/// How log lines are written: a `--log-format` value (`text` or `json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per event.
    Json,
}

impl LogFormat {
    /// The value as written on the command line.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
        }
    }
}

// Written out rather than derived: a derived `ValueEnum` would turn the variants' doc comments
// into help for each value and change the `--help` text.
impl ValueEnum for LogFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::Text, Self::Json]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.as_str()))
    }
}

/// Why the logs could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// A global `tracing` subscriber was installed before.
    #[error("cannot set up the logs: {0}")]
    AlreadySet(String),
}

/// Sends `tracing` events to stderr in `format`, filtered by `RUST_LOG` when it is set and valid,
/// else by [`DEFAULT_LOG_FILTER`]. Call it once, at start.
///
/// # Errors
///
/// [`LogsError::AlreadySet`] when a global subscriber was installed before.
pub fn init_logs(format: LogFormat) -> Result<(), LogsError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    }
    .map_err(|err| LogsError::AlreadySet(err.to_string()))
}
