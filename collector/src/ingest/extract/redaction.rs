//! Credentials removed from every free-form value before anything is recorded: targets, texts,
//! and the copies of refused input.

use std::borrow::Cow;

use candor_records::proto::{OperationEvent, OutcomeCount};
use candor_records::record::Redaction;
use candor_schema::redact;

use super::{EventText, OutcomeEventRef};

/// Replaces `value` with its redacted form (credentials removed from a URL or free text), and
/// counts it in `redacted` when anything was removed.
pub(super) fn scrub(value: &mut String, url: bool, redacted: &mut u64) {
    if let Some(clean) = redacted_form(value, url) {
        *value = clean;
        *redacted += 1;
    }
}

/// [`scrub`] for a text borrowed from the request: it is copied only when a credential is
/// removed.
pub(super) fn scrub_borrowed(value: &mut Cow<'_, str>, url: bool, redacted: &mut u64) {
    if let Some(clean) = redacted_form(value, url) {
        *value = Cow::Owned(clean);
        *redacted += 1;
    }
}

/// `value` with its credentials removed, or `None` when it has none.
pub(super) fn redacted_form(value: &str, url: bool) -> Option<String> {
    let clean = if url {
        redact::redact_url(value)
    } else {
        redact::redact_text(value)
    };
    match clean {
        Cow::Owned(clean) => Some(clean),
        Cow::Borrowed(_) => None,
    }
}

/// Removes credentials from the texts of an event that its record declares redacted
/// (`#[redact(..)]` in `candor_records::proto`): the target as a URL, the others as free text.
/// Returns how many values changed.
pub fn redact_event(event: &mut OutcomeEventRef<'_>) -> u64 {
    let mut redacted = 0;
    event.for_each_redacted(|how, value| {
        if let EventText::Text(text) = value {
            scrub_borrowed(text, how == Redaction::Url, &mut redacted);
        }
    });
    redacted
}

/// Removes credentials from a count's target, as [`redact_event`] does for an event's, so that a
/// counter and its events keep one target. Returns how many values changed.
pub fn redact_count(count: &mut OutcomeCount) -> u64 {
    redact_record(|visit| count.for_each_redacted(visit))
}

/// Removes credentials from the texts of an operation event that its record declares redacted:
/// the target as a URL, its id, texts, evidence and resource as free text. Returns how many
/// values changed.
pub fn redact_operation(event: &mut OperationEvent) -> u64 {
    redact_record(|visit| event.for_each_redacted(visit))
}

/// Scrubs each text an owned record's `for_each_redacted` passes; returns how many changed.
fn redact_record(for_each: impl FnOnce(&mut dyn FnMut(Redaction, &mut String))) -> u64 {
    let mut redacted = 0;
    for_each(&mut |how, value| scrub(value, how == Redaction::Url, &mut redacted));
    redacted
}

/// Removes credentials from every string of a JSON value; counts each string changed.
pub(super) fn redact_json(value: &mut serde_json::Value, redacted: &mut u64) {
    match value {
        serde_json::Value::String(text) => scrub(text, false, redacted),
        serde_json::Value::Array(items) => {
            for item in items {
                redact_json(item, redacted);
            }
        }
        serde_json::Value::Object(fields) => {
            for field in fields.values_mut() {
                redact_json(field, redacted);
            }
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
}

/// Removes credentials from the raw bytes of a request that could not be decoded: each run of
/// valid UTF-8 is redacted as free text; other bytes are kept as they are. Returns the bytes
/// and how many runs changed.
pub fn redact_bytes(body: &[u8]) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(body.len());
    let mut redacted = 0;
    for chunk in body.utf8_chunks() {
        let mut text = chunk.valid().to_owned();
        scrub(&mut text, false, &mut redacted);
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(chunk.invalid());
    }
    (out, redacted)
}

#[cfg(test)]
mod tests {
    use candor_records::proto::OutcomeEvent;

    use super::*;
    use crate::ingest::event::tests::event;

    /// The fields declared `#[redact(..)]` lose a credential, and only they: the others keep
    /// the text as sent.
    #[test]
    fn an_event_loses_credentials_in_exactly_the_fields_its_record_declares_redacted() {
        let secret = "abc123";
        let text = format!("failed with access_token={secret} at noon");
        let target = format!("https://user:{secret}@api.internal/v1/search?sig={secret}");
        let mut event = event(&target, Some(&text), Some(1));
        let changed = redact_event(&mut event);
        let record = serde_json::to_value(event.into_record()).expect("a record serialises");
        let mut declared = 0;
        for field in OutcomeEvent::DECLARATION.fields {
            let Some(value) = record[field.name].as_str() else {
                continue;
            };
            if field.redaction.is_some() {
                declared += 1;
                assert!(!value.contains(secret), "{}: {value}", field.name);
            } else if value.contains("access_token") {
                assert!(
                    value.contains(secret),
                    "{} was not declared redacted",
                    field.name
                );
            }
        }
        assert_eq!(changed, declared, "each redacted field counted once");
        assert_eq!(record["convention"], text.as_str(), "not declared: kept");
    }
}
