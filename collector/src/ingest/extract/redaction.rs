//! Credentials removed from every free-form value before anything is recorded: targets, texts,
//! and the copies of refused input.

use std::borrow::Cow;

use candor_records::proto::{OperationEvent, OutcomeCount};
use candor_schema::redact;

use super::OutcomeEventRef;

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

/// Removes credentials from the free-form values of an event before it is recorded: the target
/// (a URL more often than not) and the texts. Returns how many values changed.
pub fn redact_event(event: &mut OutcomeEventRef<'_>) -> u64 {
    let mut redacted = 0;
    scrub_borrowed(&mut event.tool_target, true, &mut redacted);
    for text in [
        &mut event.error_type,
        &mut event.coverage,
        &mut event.dropped,
        &mut event.authority,
        &mut event.error_message,
        &mut event.exception_type,
        &mut event.rpc_status_code,
        &mut event.tool_call_id,
        &mut event.evidence_value,
        &mut event.source_system,
        &mut event.actor,
    ]
    .into_iter()
    .flatten()
    {
        scrub_borrowed(text, false, &mut redacted);
    }
    redacted
}

/// Removes credentials from a count's target, as [`redact_event`] does for an event's, so that a
/// counter and its events keep one target. Returns how many values changed.
pub fn redact_count(count: &mut OutcomeCount) -> u64 {
    let mut redacted = 0;
    scrub(&mut count.tool_target, true, &mut redacted);
    redacted
}

/// Removes credentials from an operation event's free-form values: the target as a URL, and
/// its id, texts, evidence and resource as text. Returns how many values changed.
pub fn redact_operation(event: &mut OperationEvent) -> u64 {
    let mut redacted = 0;
    scrub(&mut event.tool_target, true, &mut redacted);
    scrub(&mut event.operation_id, false, &mut redacted);
    for text in [
        &mut event.reason,
        &mut event.coverage,
        &mut event.evidence_value,
        &mut event.resource_id,
        &mut event.actor,
        &mut event.authority,
    ]
    .into_iter()
    .flatten()
    {
        scrub(text, false, &mut redacted);
    }
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
