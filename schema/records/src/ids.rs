//! The records' ids as numbers: `event_id` and `point_id` are 128 bits written as 32 lower-case
//! hex digits, and every reader that remembers ids (the compactor's deduplication, the query
//! side's, the dashboards') keys them by the number they spell rather than by their text.
//!
//! A client that retries an export sends the same content again, so its records carry the same
//! ids; each reader drops a copy that arrives within [`DEDUPE_WINDOW`] of the first (the
//! compactor's `dedupe.window`, `candor --dedupe-window`, `candor-dashboards --dedupe-window`).

use std::time::Duration;

/// How long after a record a copy with its id is still recognised as a retried copy, unless set
/// otherwise: the default of all three settings above, which should be set alike.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(600);

/// [`DEDUPE_WINDOW`] as a setting's text.
pub const DEDUPE_WINDOW_TEXT: &str = "10m";

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
