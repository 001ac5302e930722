//! One valid `tool.outcome` event on its way to Kafka: the generated view of its record
//! ([`EventFields`] of an `OutcomeEvent`), its texts borrowed from the request and its ids
//! still binary.

use std::borrow::Cow;

use candor_records::proto::EventFields;
use candor_records::record::wire::WireText;

/// A valid `tool.outcome` event: the fields of its `OutcomeEvent` record as the record
/// declares them, with [`EventText`] texts. `encode` writes the record's bytes byte for byte as
/// prost writes the owned record; `into_record` makes the owned record.
pub type OutcomeEventRef<'a> = EventFields<EventText<'a>>;

/// A text of an event on its way to Kafka: borrowed from the request (or owned, where
/// redaction or a bound changed it), or an id still binary, which the record holds as
/// lowercase hex digits and which is written digit by digit without a copy in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventText<'a> {
    /// A text.
    Text(Cow<'a, str>),
    /// A trace id or an event id: 16 bytes.
    Id16([u8; 16]),
    /// A span id: 8 bytes.
    Id8([u8; 8]),
}

impl EventText<'_> {
    /// The text's bytes, or the id's binary bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Text(text) => text.as_bytes(),
            Self::Id16(bytes) => bytes,
            Self::Id8(bytes) => bytes,
        }
    }
}

impl<'a> From<Cow<'a, str>> for EventText<'a> {
    fn from(text: Cow<'a, str>) -> Self {
        Self::Text(text)
    }
}

impl<'a> From<&'a str> for EventText<'a> {
    fn from(text: &'a str) -> Self {
        Self::Text(Cow::Borrowed(text))
    }
}

impl From<String> for EventText<'_> {
    fn from(text: String) -> Self {
        Self::Text(Cow::Owned(text))
    }
}

impl From<[u8; 16]> for EventText<'_> {
    fn from(id: [u8; 16]) -> Self {
        Self::Id16(id)
    }
}

impl From<[u8; 8]> for EventText<'_> {
    fn from(id: [u8; 8]) -> Self {
        Self::Id8(id)
    }
}

impl From<EventText<'_>> for String {
    fn from(text: EventText<'_>) -> Self {
        match text {
            EventText::Text(text) => text.into_owned(),
            EventText::Id16(bytes) => hex(&bytes),
            EventText::Id8(bytes) => hex(&bytes),
        }
    }
}

impl WireText for EventText<'_> {
    #[inline]
    fn wire_len(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Id16(bytes) => 2 * bytes.len(),
            Self::Id8(bytes) => 2 * bytes.len(),
        }
    }

    #[inline]
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Self::Text(text) => out.extend_from_slice(text.as_bytes()),
            Self::Id16(bytes) => out.extend(hex_digits(bytes)),
            Self::Id8(bytes) => out.extend(hex_digits(bytes)),
        }
    }
}

/// `bytes` as a lowercase hex string.
pub(crate) fn hex(bytes: &[u8]) -> String {
    hex_digits(bytes).map(char::from).collect()
}

/// The lowercase hex digits of `bytes`, two per byte.
fn hex_digits(bytes: &[u8]) -> impl Iterator<Item = u8> + '_ {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|byte| {
        [
            DIGITS[usize::from(byte >> 4)],
            DIGITS[usize::from(byte & 0x0f)],
        ]
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use candor_records::proto::{OutcomeEvent, OutcomeSource, RECORD_SCHEMA_VERSION};
    use candor_schema::{EvidenceKind, FailureKind, OutcomeClass, RetryAction};
    use proptest::prelude::*;
    use prost::Message as _;

    use super::*;

    /// An event with every field set, the optional ones to `texts` and `numbers`.
    pub(crate) fn event<'a>(
        target: &'a str,
        texts: Option<&'a str>,
        numbers: Option<u64>,
    ) -> OutcomeEventRef<'a> {
        let text = || texts.map(EventText::from);
        OutcomeEventRef {
            schema_version: RECORD_SCHEMA_VERSION,
            event_id: [0xab; 16].into(),
            trace_id: [1; 16].into(),
            span_id: [2; 8].into(),
            event_time_unix_nano: 1_800_000_000_123_456_789,
            service_name: "checkout".into(),
            service_instance_id: String::new().into(),
            outcome_class: OutcomeClass::Partial.as_str().into(),
            tool_name: "search".into(),
            tool_target: target.into(),
            failure_kind: FailureKind::TruncationMarker.as_str().into(),
            retry_action: RetryAction::AcceptPartial.as_str().into(),
            retry_attempt: 1,
            retry_max_attempts: 3,
            retry_backoff_ms: numbers,
            http_status_code: numbers.map(|n| (n % 600) as u32),
            error_type: text(),
            partial_returned: numbers,
            partial_expected: numbers.map(|n| n.saturating_mul(2)),
            coverage: texts.map(|t| EventText::from(t.to_owned())),
            dropped: text(),
            authority: text(),
            received_time_unix_nano: 1_800_000_000_200_000_000,
            collector_id: "c-1".into(),
            source: Some(OutcomeSource::Adapter.as_str().into()),
            error_message: text(),
            exception_type: text(),
            rpc_status_code: text(),
            tool_call_id: text(),
            evidence_kind: numbers.map(|_| EvidenceKind::RequestId.as_str().into()),
            evidence_value: text(),
            convention: text(),
            source_system: text(),
            actor: text(),
            adapter: text(),
        }
    }

    #[test]
    fn an_event_decodes_to_its_record() {
        let event = event("../../etc/passwd", Some("timeout"), Some(250));
        let decoded = OutcomeEvent::decode(event.encode().as_slice()).unwrap();
        assert_eq!(decoded, event.clone().into_record());
        assert_eq!(decoded.event_id, "ab".repeat(16));
        assert_eq!(decoded.trace_id, "01".repeat(16));
        assert_eq!(decoded.span_id, "02".repeat(8));
        assert_eq!(decoded.tool_target, "../../etc/passwd");
        assert_eq!(decoded.failure_kind, "truncation_marker");
    }

    proptest! {
        /// The view's encoding is prost's, byte for byte: empty texts and zeros left out,
        /// optional fields kept whenever present, even when zero or empty.
        #[test]
        fn events_are_encoded_byte_for_byte_as_prost_encodes_their_records(
            target in ".{0,40}",
            texts in proptest::option::of(".{0,20}"),
            numbers in proptest::option::of(prop_oneof![Just(0u64), any::<u64>()]),
            time in prop_oneof![Just(0u64), any::<u64>()],
            attempt in 0u32..5,
            access_failure in any::<bool>(),
        ) {
            let mut event = event(&target, texts.as_deref(), numbers);
            event.event_time_unix_nano = time;
            event.retry_attempt = attempt;
            if access_failure {
                event.outcome_class = OutcomeClass::AccessFailure.as_str().into();
                event.failure_kind = FailureKind::Timeout.as_str().into();
                event.retry_action = RetryAction::Retry.as_str().into();
            }
            let payload = event.encode();
            prop_assert_eq!(payload.len(), event.encoded_len());
            prop_assert_eq!(payload, event.clone().into_record().encode_to_vec());
        }
    }
}
