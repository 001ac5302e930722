//! The time window of a question: `--since` and `--until` as a relative duration (`1h`, `30m`,
//! `now`) or an RFC 3339 time. Pure; "now" is passed in.
//!
//! ```
//! use candor_query::window::{Window, TimeArg};
//! let now = 1_000_000_000_000; // micros
//! let window = Window::resolve(Some(TimeArg::parse("1h").unwrap()), None, now).unwrap();
//! assert_eq!(window.until, now);
//! assert_eq!(window.since, now - 3_600_000_000);
//! ```

use std::time::Duration;

use chrono::{DateTime, SecondsFormat};
use serde::Serialize;

/// Microseconds since the Unix epoch, UTC.
pub type Micros = i64;

/// How far back a question looks when `--since` is not given.
pub const DEFAULT_SINCE: Duration = Duration::from_secs(3600);

/// A time argument as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// That long before now (`now` is zero).
    Ago(Duration),
    /// An absolute time.
    At(Micros),
}

/// A time argument or window that cannot be used; the message names the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// Neither a duration nor an RFC 3339 time.
    #[error(
        "{0:?} is neither a duration (like 15m, 1h, 2d or now) nor an RFC 3339 time (like \
         2026-11-30T08:00:00Z)"
    )]
    Unparsable(String),
    /// A duration that is not a positive length.
    #[error("{flag} {raw:?}: {reason}; expected a positive duration like 30s, 5m or 1h")]
    BadDuration {
        /// The flag it was given to.
        flag: &'static str,
        /// As given.
        raw: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The window ends before it begins.
    #[error("the window ends ({until}) at or before it begins ({since}); swap --since and --until")]
    Empty {
        /// Start, RFC 3339.
        since: String,
        /// End, RFC 3339.
        until: String,
    },
}

impl TimeArg {
    /// Parses `now`, a duration before now (`90s`, `15m`, `1h 30m`, `2d`), or an RFC 3339 time.
    pub fn parse(raw: &str) -> Result<Self, WindowError> {
        let trimmed = raw.trim();
        if trimmed.eq_ignore_ascii_case("now") {
            return Ok(Self::Ago(Duration::ZERO));
        }
        if let Ok(ago) = candor_schema::duration::parse(trimmed) {
            return Ok(Self::Ago(ago));
        }
        DateTime::parse_from_rfc3339(trimmed)
            .map(|at| Self::At(at.timestamp_micros()))
            .map_err(|_| WindowError::Unparsable(raw.to_owned()))
    }

    /// The time it names, given now.
    pub fn resolve(self, now: Micros) -> Micros {
        match self {
            Self::Ago(ago) => now.saturating_sub(micros_of(ago)),
            Self::At(at) => at,
        }
    }
}

/// Parses a positive duration given to `flag` (`--step`, `--window`, …).
pub fn parse_duration(flag: &'static str, raw: &str) -> Result<Duration, WindowError> {
    candor_schema::duration::parse_positive(raw).map_err(|err| WindowError::BadDuration {
        flag,
        raw: raw.to_owned(),
        reason: err.reason,
    })
}

/// A half-open time window `[since, until)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Start, inclusive.
    #[serde(serialize_with = "serialize_micros")]
    pub since: Micros,
    /// End, exclusive.
    #[serde(serialize_with = "serialize_micros")]
    pub until: Micros,
}

impl Window {
    /// The window of `--since` (default [`DEFAULT_SINCE`] ago) and `--until` (default now).
    pub fn resolve(
        since: Option<TimeArg>,
        until: Option<TimeArg>,
        now: Micros,
    ) -> Result<Self, WindowError> {
        let since = since.unwrap_or(TimeArg::Ago(DEFAULT_SINCE)).resolve(now);
        let until = until.unwrap_or(TimeArg::Ago(Duration::ZERO)).resolve(now);
        if until <= since {
            return Err(WindowError::Empty {
                since: rfc3339(since),
                until: rfc3339(until),
            });
        }
        Ok(Self { since, until })
    }

    /// Whether `at` falls inside.
    pub fn contains(&self, at: Micros) -> bool {
        self.since <= at && at < self.until
    }
}

/// A duration in microseconds, saturating.
pub fn micros_of(duration: Duration) -> Micros {
    Micros::try_from(duration.as_micros()).unwrap_or(Micros::MAX)
}

/// RFC 3339 in UTC with microseconds, or the raw number when it is out of chrono's range.
pub fn rfc3339(at: Micros) -> String {
    DateTime::from_timestamp_micros(at).map_or_else(
        || format!("{at}µs"),
        |at| at.to_rfc3339_opts(SecondsFormat::Micros, true),
    )
}

/// Serde helper: a time in microseconds as RFC 3339.
pub fn serialize_micros<S: serde::Serializer>(
    at: &Micros,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&rfc3339(*at))
}

/// Serde helper: an optional time in microseconds as RFC 3339 or null.
pub fn serialize_opt_micros<S: serde::Serializer>(
    at: &Option<Micros>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => serializer.serialize_str(&rfc3339(*at)),
        None => serializer.serialize_none(),
    }
}

/// Now, from the system clock, in microseconds.
pub fn now() -> Micros {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, micros_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Micros = 1_764_489_600_000_000; // 2025-11-30T08:00:00Z

    #[test]
    fn relative_and_absolute_times_resolve() {
        assert_eq!(TimeArg::parse("now"), Ok(TimeArg::Ago(Duration::ZERO)));
        assert_eq!(
            TimeArg::parse("1h 30m"),
            Ok(TimeArg::Ago(Duration::from_secs(5400)))
        );
        assert_eq!(TimeArg::parse("2025-11-30T08:00:00Z"), Ok(TimeArg::At(NOW)));
        assert_eq!(
            TimeArg::parse("2025-11-30T09:00:00+01:00"),
            Ok(TimeArg::At(NOW))
        );
        let window = Window::resolve(Some(TimeArg::parse("2h").unwrap()), None, NOW).unwrap();
        assert_eq!(window.since, NOW - 7_200_000_000);
        assert_eq!(window.until, NOW);
        assert_eq!(rfc3339(NOW), "2025-11-30T08:00:00.000000Z");
    }

    #[test]
    fn bad_times_name_the_fix() {
        let err = TimeArg::parse("yesterday").unwrap_err();
        assert!(err.to_string().contains("RFC 3339"), "{err}");
        let err =
            Window::resolve(Some(TimeArg::At(NOW)), Some(TimeArg::At(NOW - 1)), NOW).unwrap_err();
        assert!(
            err.to_string().contains("swap --since and --until"),
            "{err}"
        );
        assert!(parse_duration("--step", "0s").is_err());
        assert!(parse_duration("--step", "5 parsecs").is_err());
        assert_eq!(parse_duration("--step", "5m"), Ok(Duration::from_secs(300)));
    }
}
