//! Wall-clock timestamps as they appear on the wire: RFC 3339, UTC.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How many of its own intervals a sender may go without a sign of life before it is judged
/// silent: a collector's heartbeats, an adapter instance's exports (the contract's section
/// 10.6) and a sender seen only by its spans (section 10.7) alike.
pub const SILENT_AFTER_INTERVALS: i64 = 3;

/// The longest gap a sender whose interval is `interval` (in any unit) may leave between two
/// signs of life and not be silent: [`SILENT_AFTER_INTERVALS`] of them.
pub const fn silent_after(interval: i64) -> i64 {
    interval.saturating_mul(SILENT_AFTER_INTERVALS)
}

/// How many of the collector's heartbeat intervals an answer that read the Kafka tail up to its
/// end counts as covered past the newest heartbeat, since the next heartbeat may not be due yet
/// (`candor`'s coverage).
pub const TAIL_SLACK_INTERVALS: i64 = 2;

/// How many minutes an accepted operation may stay open before it is stuck when nobody says
/// otherwise: the default of `candor operations --stuck-after` and of the dashboards'
/// `stuck_operations` rule.
pub const STUCK_AFTER_MINUTES: i64 = 15;

/// A point in wall-clock time, serialised as RFC 3339 in UTC with microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(SystemTime);

impl Timestamp {
    /// Wraps a `SystemTime`.
    pub const fn new(at: SystemTime) -> Self {
        Self(at)
    }

    /// The wrapped `SystemTime`.
    pub const fn system_time(self) -> SystemTime {
        self.0
    }

    /// Time since the Unix epoch, or zero for times before it.
    pub fn since_epoch(self) -> Duration {
        self.0
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }

    /// The time elapsed from `earlier` to `self`, or zero when `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        self.0.duration_since(earlier.0).unwrap_or(Duration::ZERO)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(at: SystemTime) -> Self {
        Self(at)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_micros(self.0))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Cow::<'de, str>::deserialize(deserializer)?;
        humantime::parse_rfc3339(&raw)
            .map(Self)
            .map_err(|err| serde::de::Error::custom(format!("invalid timestamp {raw:?}: {err}")))
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "RFC 3339 in UTC",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json_with_microseconds() {
        let at =
            Timestamp::new(SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456));
        let json = serde_json::to_string(&at).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20.123456Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), at);
    }

    #[test]
    fn rejects_a_malformed_timestamp_by_value() {
        let err = serde_json::from_str::<Timestamp>("\"yesterday\"").unwrap_err();
        assert!(err.to_string().contains("yesterday"), "{err}");
    }
}
