//! The one way Candor reads a duration, wherever it is written: a setting in a TOML file, a
//! command-line flag, a query parameter of the dashboards.
//!
//! A duration is one or more numbers, each with a unit, added up: `250ms`, `90s`, `15m`, `1h`,
//! `1h 30m`, `1.5h`, `2d`, `1w`. The units are `ns`, `us`, `ms`, `s`, `m`, `h`, `d` (24 h) and `w`
//! (with their longer spellings, `sec`, `min`, `hours`, `days`, …); a number without a unit is
//! refused, so `10` is never read as seconds by one reader and milliseconds by another.
//!
//! ```
//! use std::time::Duration;
//! use candor_schema::duration;
//!
//! assert_eq!(duration::parse("1h 30m"), Ok(Duration::from_secs(5_400)));
//! assert_eq!(duration::parse_positive(" 2d "), Ok(Duration::from_secs(172_800)));
//! assert!(duration::parse("10").is_err());
//! assert!(duration::parse_positive("0s").is_err());
//! ```

use std::time::Duration;

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a duration: {reason}; write e.g. 90s, 15m, 1h 30m or 2d")]
pub struct DurationError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a duration (surrounding spaces ignored); zero is one.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    humantime::parse_duration(text.trim()).map_err(|err| DurationError {
        text: text.to_owned(),
        reason: err.to_string(),
    })
}

/// Parses a duration that must be above zero.
pub fn parse_positive(text: &str) -> Result<Duration, DurationError> {
    match parse(text)? {
        duration if duration.is_zero() => Err(DurationError {
            text: text.to_owned(),
            reason: "it must be above zero".to_owned(),
        }),
        duration => Ok(duration),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_add_up_and_a_bare_number_or_an_unknown_unit_is_refused() {
        let secs = |s| Ok(Duration::from_secs(s));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("90s"), secs(90));
        assert_eq!(parse("15m"), secs(900));
        assert_eq!(parse("1h"), secs(3_600));
        assert_eq!(parse("1h 30m"), secs(5_400));
        assert_eq!(parse("1d"), secs(86_400));
        assert_eq!(parse("1w"), secs(604_800));
        assert_eq!(parse("0s"), secs(0));
        assert_eq!(parse("1.5h"), secs(5_400));
        for bad in ["", "10", "5 parsecs", "-5s", "s"] {
            let err = parse(bad).expect_err(bad);
            assert_eq!(err.text, bad);
            assert!(err.to_string().contains("write e.g."), "{err}");
        }
        assert_eq!(
            parse_positive("0m").map_err(|err| err.reason),
            Err("it must be above zero".to_owned())
        );
    }
}
