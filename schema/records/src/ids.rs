//! The records' ids as numbers: `event_id` and `point_id` are 128 bits written as 32 lower-case
//! hex digits, and every reader that remembers ids (the compactor's deduplication, the query
//! side's, the dashboards') keys them by the number they spell rather than by their text.
//!
//! A client that retries an export sends the same content again, so its records carry the same
//! ids; each reader drops a copy that arrives within [`DEDUPE_WINDOW`] of the first (the
//! `dedupe.window` of the compactor's and the dashboards' configuration files, one section for
//! both: [`RawDedupe`]; `candor --dedupe-window`, `candor-dashboards --dedupe-window`).

use std::time::Duration;

use candor_schema::duration::DurationError;
use serde::Deserialize;

/// How long after a record a copy with its id is still recognised as a retried copy, unless set
/// otherwise: the default of all the settings above, which should be set alike.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(600);

/// [`DEDUPE_WINDOW`] as a setting's text.
pub const DEDUPE_WINDOW_TEXT: &str = "10m";

/// The `[dedupe]` section of a configuration file as written, the same in every file that has
/// one (the compactor's and the dashboards'), so that the window is set with the same key, the
/// same default and the same rule wherever ids are remembered:
///
/// ```toml
/// [dedupe]
/// window = "10m"   # a duration above zero; DEDUPE_WINDOW unless set
/// ```
///
/// ```
/// use std::time::Duration;
/// use candor_records::ids::{DEDUPE_WINDOW, RawDedupe};
///
/// assert_eq!(RawDedupe::default().validate(), Ok(DEDUPE_WINDOW));
/// let written = RawDedupe { window: "30m".into() };
/// assert_eq!(written.validate(), Ok(Duration::from_secs(1_800)));
/// assert!(RawDedupe { window: "0s".into() }.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawDedupe {
    /// `dedupe.window`: how long after a record a copy with its id is dropped as a retried copy.
    pub window: String,
}

impl Default for RawDedupe {
    fn default() -> Self {
        Self {
            window: DEDUPE_WINDOW_TEXT.into(),
        }
    }
}

impl RawDedupe {
    /// The dotted path of the window's key, for an error that names it.
    pub const WINDOW_KEY: &'static str = "dedupe.window";

    /// The window as a duration above zero ([`candor_schema::duration`]). Pure; a refusal holds
    /// the text as written and the reason, for the caller's error naming [`Self::WINDOW_KEY`].
    pub fn validate(&self) -> Result<Duration, DurationError> {
        candor_schema::duration::parse_positive(&self.window)
    }
}

/// The value of exactly 32 lower-case hex digits; `None` for anything else (an id written by
/// something other than the collector). Without a branch per digit: a table gives each byte's
/// value, or a flag in its high bits when it is no digit.
pub fn hex_128(text: &str) -> Option<u128> {
    const NOT_A_DIGIT: u8 = 0xf0;
    const DIGITS: [u8; 256] = {
        let mut table = [NOT_A_DIGIT; 256];
        let mut digit = 0;
        while digit < 16 {
            table[b"0123456789abcdef"[digit] as usize] = digit as u8;
            digit += 1;
        }
        table
    };
    let bytes: &[u8; 32] = text.as_bytes().try_into().ok()?;
    let mut flags = 0u8;
    let mut half = |digits: &[u8]| {
        digits.iter().fold(0u64, |value, &byte| {
            let digit = DIGITS[usize::from(byte)];
            flags |= digit;
            (value << 4) | u64::from(digit & 0x0f)
        })
    };
    let high = half(&bytes[..16]);
    let low = half(&bytes[16..]);
    (flags & NOT_A_DIGIT == 0).then(|| (u128::from(high) << 64) | u128::from(low))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_window_and_its_text_agree() {
        assert_eq!(
            candor_schema::duration::parse(DEDUPE_WINDOW_TEXT),
            Ok(DEDUPE_WINDOW)
        );
    }

    #[test]
    fn the_dedupe_section_defaults_to_the_window_and_refuses_what_is_not_one() {
        let parse = |json: &str| serde_json::from_str::<RawDedupe>(json);
        assert_eq!(parse("{}").unwrap(), RawDedupe::default());
        assert_eq!(parse("{}").unwrap().validate(), Ok(DEDUPE_WINDOW));
        assert_eq!(
            parse(r#"{"window": "1h 30m"}"#).unwrap().validate(),
            Ok(Duration::from_secs(5_400))
        );
        assert!(parse(r#"{"windw": "1h"}"#).is_err(), "an unknown key");
        for refused in ["0s", "10", "soon", ""] {
            let err = RawDedupe {
                window: refused.into(),
            }
            .validate()
            .unwrap_err();
            assert_eq!(err.text, refused);
        }
    }

    proptest! {
        /// Exactly the texts `u128`'s own parser reads as 32 lower-case digits have a value, and
        /// it is that parser's.
        #[test]
        fn only_32_lower_case_digits_spell_a_number(text in "[0-9a-fA-F]{30,33}|.{0,40}") {
            let expected = (text.len() == 32
                && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
                .then(|| u128::from_str_radix(&text, 16).ok())
                .flatten();
            prop_assert_eq!(hex_128(&text), expected);
        }
    }
}
