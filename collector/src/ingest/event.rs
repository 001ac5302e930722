//! One valid `tool.outcome` event on its way to Kafka: the fields of its record, borrowed from
//! the request, and their protobuf encoding.

use std::borrow::Cow;

use candor_records::proto::OutcomeSource;
use candor_records::proto::{EventFields, OutcomeEvent, RECORD_SCHEMA_VERSION};
use candor_records::record::wire::WireText;
use candor_schema::{EvidenceKind, FailureKind, OutcomeClass, RetryAction};

/// A valid `tool.outcome` event: the fields of its [`OutcomeEvent`] record, with the texts
/// borrowed from the request (or owned, where redaction or a bound changed them) and the ids
/// still binary. [`OutcomeEventRef::encode`] writes the record's bytes; `OutcomeEvent::from`
/// makes the owned record.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeEventRef<'a> {
    /// Deterministic from the OTLP content: a client's retry of the same export gets the same
    /// id.
    pub event_id: [u8; 16],
    /// The span's trace id.
    pub trace_id: [u8; 16],
    /// The span's id.
    pub span_id: [u8; 8],
    /// The event's time, Unix nanoseconds.
    pub event_time_unix_nano: u64,
    /// The resource's `service.name`, bounded.
    pub service_name: Cow<'a, str>,
    /// The resource's `service.instance.id`, bounded; empty when absent.
    pub service_instance_id: Cow<'a, str>,
    /// `access_failure` or `partial`.
    pub outcome_class: OutcomeClass,
    /// `tool.name`.
    pub tool_name: &'a str,
    /// `tool.target`, credentials removed.
    pub tool_target: Cow<'a, str>,
    /// `tool.failure.kind`.
    pub failure_kind: FailureKind,
    /// `tool.retry.action`; `None` for a derived call, whose span does not say.
    pub retry_action: Option<RetryAction>,
    /// `tool.retry.attempt`.
    pub retry_attempt: u32,
    /// `tool.retry.max_attempts`.
    pub retry_max_attempts: u32,
    /// `tool.retry.backoff_ms`.
    pub retry_backoff_ms: Option<u64>,
    /// `http.response.status_code`.
    pub http_status_code: Option<u32>,
    /// `error.type`, credentials removed.
    pub error_type: Option<Cow<'a, str>>,
    /// `tool.partial.returned`.
    pub partial_returned: Option<u64>,
    /// `tool.partial.expected`.
    pub partial_expected: Option<u64>,
    /// `tool.coverage`, credentials removed.
    pub coverage: Option<Cow<'a, str>>,
    /// `tool.dropped`, credentials removed.
    pub dropped: Option<Cow<'a, str>>,
    /// `tool.authority`, credentials removed.
    pub authority: Option<Cow<'a, str>>,
    /// When the collector received the request, Unix nanoseconds.
    pub received_time_unix_nano: u64,
    /// The collector's id.
    pub collector_id: &'a str,
    /// Where the outcome came from.
    pub source: OutcomeSource,
    /// What the failure said, credentials removed and bounded.
    pub error_message: Option<Cow<'a, str>>,
    /// A derived call's `exception.type`.
    pub exception_type: Option<Cow<'a, str>>,
    /// A derived call's `rpc.response.status_code`, as sent.
    pub rpc_status_code: Option<Cow<'a, str>>,
    /// The GenAI tool call's id.
    pub tool_call_id: Option<Cow<'a, str>>,
    /// The kind of the evidence of the outcome.
    pub evidence_kind: Option<EvidenceKind>,
    /// The evidence itself, credentials removed.
    pub evidence_value: Option<Cow<'a, str>>,
    /// The convention a derived call was recognised by; `None` for an adapter's event.
    pub convention: Option<Cow<'a, str>>,
    /// The system that answered an adapter's call (`tool.provenance.source_system`).
    pub source_system: Option<Cow<'a, str>>,
    /// Who an adapter's call acted for (`tool.provenance.actor`), credentials removed.
    pub actor: Option<Cow<'a, str>>,
    /// The adapter and its version (`tool.provenance.adapter`).
    pub adapter: Option<Cow<'a, str>>,
}

impl From<&OutcomeEventRef<'_>> for OutcomeEvent {
    fn from(event: &OutcomeEventRef<'_>) -> Self {
        event.fields().map_texts(Text::into_string).into_record()
    }
}

impl OutcomeEventRef<'_> {
    /// The [`OutcomeEvent`] record's protobuf, written from the borrowed event: byte for byte
    /// what prost writes for the owned record, without first copying every text into a record
    /// of its own.
    pub fn encode(&self) -> Vec<u8> {
        self.fields().encode()
    }

    /// The record's fields, borrowed from the event.
    fn fields(&self) -> EventFields<Text<'_>> {
        fn text(text: &str) -> Text<'_> {
            Text::Plain(text.as_bytes())
        }
        fn optional<'t>(value: &'t Option<Cow<'_, str>>) -> Option<Text<'t>> {
            value.as_deref().map(text)
        }
        EventFields {
            schema_version: RECORD_SCHEMA_VERSION,
            event_id: Text::Hex(&self.event_id),
            trace_id: Text::Hex(&self.trace_id),
            span_id: Text::Hex(&self.span_id),
            event_time_unix_nano: self.event_time_unix_nano,
            service_name: text(&self.service_name),
            service_instance_id: text(&self.service_instance_id),
            outcome_class: text(self.outcome_class.as_str()),
            tool_name: text(self.tool_name),
            tool_target: text(&self.tool_target),
            failure_kind: text(self.failure_kind.as_str()),
            retry_action: text(self.retry_action.map_or("", RetryAction::as_str)),
            retry_attempt: self.retry_attempt,
            retry_max_attempts: self.retry_max_attempts,
            retry_backoff_ms: self.retry_backoff_ms,
            http_status_code: self.http_status_code,
            error_type: optional(&self.error_type),
            partial_returned: self.partial_returned,
            partial_expected: self.partial_expected,
            coverage: optional(&self.coverage),
            dropped: optional(&self.dropped),
            authority: optional(&self.authority),
            received_time_unix_nano: self.received_time_unix_nano,
            collector_id: text(self.collector_id),
            source: Some(text(self.source.as_str())),
            error_message: optional(&self.error_message),
            exception_type: optional(&self.exception_type),
            rpc_status_code: optional(&self.rpc_status_code),
            tool_call_id: optional(&self.tool_call_id),
            evidence_kind: self.evidence_kind.map(|kind| text(kind.as_str())),
            evidence_value: optional(&self.evidence_value),
            convention: optional(&self.convention),
            source_system: optional(&self.source_system),
            actor: optional(&self.actor),
            adapter: optional(&self.adapter),
        }
    }
}

/// A text of the record as the event holds it: UTF-8 bytes, or binary bytes the record holds as
/// lowercase hex digits (the ids), written digit by digit without a copy in between.
#[derive(Debug, Clone, Copy)]
enum Text<'a> {
    /// A text, as its bytes.
    Plain(&'a [u8]),
    /// Binary bytes, written as hex digits.
    Hex(&'a [u8]),
}

impl Text<'_> {
    fn into_string(self) -> String {
        match self {
            Self::Plain(text) => String::from_utf8_lossy(text).into_owned(),
            Self::Hex(bytes) => hex(bytes),
        }
    }
}

impl WireText for Text<'_> {
    #[inline]
    fn wire_len(&self) -> usize {
        match self {
            Self::Plain(text) => text.len(),
            Self::Hex(bytes) => 2 * bytes.len(),
        }
    }

    #[inline]
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Self::Plain(text) => out.extend_from_slice(text),
            Self::Hex(bytes) => out.extend(hex_digits(bytes)),
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
    use proptest::prelude::*;
    use prost::Message as _;

    use super::*;

    /// An event with every field set, the optional ones to `texts` and `numbers`.
    pub(crate) fn event<'a>(
        target: &'a str,
        texts: Option<&'a str>,
        numbers: Option<u64>,
    ) -> OutcomeEventRef<'a> {
        OutcomeEventRef {
            event_id: [0xab; 16],
            trace_id: [1; 16],
            span_id: [2; 8],
            event_time_unix_nano: 1_800_000_000_123_456_789,
            service_name: Cow::Borrowed("checkout"),
            service_instance_id: Cow::Owned(String::new()),
            outcome_class: OutcomeClass::Partial,
            tool_name: "search",
            tool_target: Cow::Borrowed(target),
            failure_kind: FailureKind::TruncationMarker,
            retry_action: Some(RetryAction::AcceptPartial),
            retry_attempt: 1,
            retry_max_attempts: 3,
            retry_backoff_ms: numbers,
            http_status_code: numbers.map(|n| (n % 600) as u32),
            error_type: texts.map(Cow::Borrowed),
            partial_returned: numbers,
            partial_expected: numbers.map(|n| n.saturating_mul(2)),
            coverage: texts.map(|t| Cow::Owned(t.to_owned())),
            dropped: texts.map(Cow::Borrowed),
            authority: texts.map(Cow::Borrowed),
            received_time_unix_nano: 1_800_000_000_200_000_000,
            collector_id: "c-1",
            source: OutcomeSource::Adapter,
            error_message: texts.map(Cow::Borrowed),
            exception_type: texts.map(Cow::Borrowed),
            rpc_status_code: texts.map(Cow::Borrowed),
            tool_call_id: texts.map(Cow::Borrowed),
            evidence_kind: numbers.map(|_| EvidenceKind::RequestId),
            evidence_value: texts.map(Cow::Borrowed),
            convention: texts.map(Cow::Borrowed),
            source_system: texts.map(Cow::Borrowed),
            actor: texts.map(Cow::Borrowed),
            adapter: texts.map(Cow::Borrowed),
        }
    }

    #[test]
    fn an_event_decodes_to_its_record() {
        let event = event("../../etc/passwd", Some("timeout"), Some(250));
        let decoded = OutcomeEvent::decode(event.encode().as_slice()).unwrap();
        assert_eq!(decoded, OutcomeEvent::from(&event));
        assert_eq!(decoded.event_id, "ab".repeat(16));
        assert_eq!(decoded.trace_id, "01".repeat(16));
        assert_eq!(decoded.span_id, "02".repeat(8));
        assert_eq!(decoded.tool_target, "../../etc/passwd");
        assert_eq!(decoded.failure_kind, "truncation_marker");
    }

    proptest! {
        /// The hand-written encoding is prost's, byte for byte: empty texts and zeros left out,
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
                event.outcome_class = OutcomeClass::AccessFailure;
                event.failure_kind = FailureKind::Timeout;
                event.retry_action = Some(RetryAction::Retry);
            }
            let payload = event.encode();
            prop_assert_eq!(payload.len(), event.fields().encoded_len());
            prop_assert_eq!(payload, OutcomeEvent::from(&event).encode_to_vec());
        }
    }
}
