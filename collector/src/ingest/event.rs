//! One valid `tool.outcome` event on its way to Kafka: the fields of its record, borrowed from
//! the request, and their protobuf encoding.

use std::borrow::Cow;

use candor_records::proto::{OutcomeEvent, RECORD_SCHEMA_VERSION};
use candor_schema::{FailureKind, OutcomeClass, RetryAction};
use prost::encoding::{WireType, encode_key, encode_varint};

/// A valid `tool.outcome` event: the fields of its [`OutcomeEvent`] record, with the texts
/// borrowed from the request (or owned, where redaction or a bound changed them) and the ids
/// still binary. [`OutcomeEventRef::encode`] writes the record's bytes; `OutcomeEvent::from`
/// makes the owned record.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeEventRef<'a> {
    /// Deterministic from the OTLP content: a client's retry of the same export gets the same
    /// id.
    pub event_id: [u8; 16],
    /// The span's trace id, 16 bytes.
    pub trace_id: &'a [u8],
    /// The span's id, 8 bytes.
    pub span_id: &'a [u8],
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
    /// `tool.retry.action`.
    pub retry_action: RetryAction,
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
}

impl From<&OutcomeEventRef<'_>> for OutcomeEvent {
    fn from(event: &OutcomeEventRef<'_>) -> Self {
        let text = |value: &Option<Cow<'_, str>>| value.as_deref().map(str::to_owned);
        OutcomeEvent {
            schema_version: RECORD_SCHEMA_VERSION,
            event_id: hex(&event.event_id),
            trace_id: hex(event.trace_id),
            span_id: hex(event.span_id),
            event_time_unix_nano: event.event_time_unix_nano,
            service_name: event.service_name.clone().into_owned(),
            service_instance_id: event.service_instance_id.clone().into_owned(),
            outcome_class: event.outcome_class.as_str().to_owned(),
            tool_name: event.tool_name.to_owned(),
            tool_target: event.tool_target.clone().into_owned(),
            failure_kind: event.failure_kind.as_str().to_owned(),
            retry_action: event.retry_action.as_str().to_owned(),
            retry_attempt: event.retry_attempt,
            retry_max_attempts: event.retry_max_attempts,
            retry_backoff_ms: event.retry_backoff_ms,
            http_status_code: event.http_status_code,
            error_type: text(&event.error_type),
            partial_returned: event.partial_returned,
            partial_expected: event.partial_expected,
            coverage: text(&event.coverage),
            dropped: text(&event.dropped),
            authority: text(&event.authority),
            received_time_unix_nano: event.received_time_unix_nano,
            collector_id: event.collector_id.to_owned(),
        }
    }
}

impl OutcomeEventRef<'_> {
    /// The [`OutcomeEvent`] record's protobuf, written field by field from the borrowed event:
    /// byte for byte what prost writes for the owned record (tested below), without first
    /// copying every text into a record of its own.
    pub fn encode(&self) -> Vec<u8> {
        let texts = [
            self.service_name.len(),
            self.service_instance_id.len(),
            self.tool_name.len(),
            self.tool_target.len(),
            self.collector_id.len(),
        ];
        let optional = [
            &self.error_type,
            &self.coverage,
            &self.dropped,
            &self.authority,
        ];
        // The fixed fields and the tags take under 200 bytes; with the texts, one allocation.
        let capacity = 200
            + texts.iter().sum::<usize>()
            + optional
                .iter()
                .flat_map(|text| text.as_deref())
                .map(str::len)
                .sum::<usize>();
        let mut out = Fields(Vec::with_capacity(capacity));
        out.varint(1, u64::from(RECORD_SCHEMA_VERSION));
        out.hex(2, &self.event_id);
        out.hex(3, self.trace_id);
        out.hex(4, self.span_id);
        out.fixed64(5, self.event_time_unix_nano);
        out.string(6, &self.service_name);
        out.string(7, &self.service_instance_id);
        out.string(8, self.outcome_class.as_str());
        out.string(9, self.tool_name);
        out.string(10, &self.tool_target);
        out.string(11, self.failure_kind.as_str());
        out.string(12, self.retry_action.as_str());
        out.varint(13, u64::from(self.retry_attempt));
        out.varint(14, u64::from(self.retry_max_attempts));
        out.optional_varint(15, self.retry_backoff_ms);
        out.optional_varint(16, self.http_status_code.map(u64::from));
        out.optional_string(17, self.error_type.as_deref());
        out.optional_varint(18, self.partial_returned);
        out.optional_varint(19, self.partial_expected);
        out.optional_string(20, self.coverage.as_deref());
        out.optional_string(21, self.dropped.as_deref());
        out.optional_string(22, self.authority.as_deref());
        out.fixed64(23, self.received_time_unix_nano);
        out.string(24, self.collector_id);
        out.0
    }
}

/// A protobuf message written field by field, in tag order, as prost writes it: a plain proto3
/// field at its default value (zero, empty) is left out, an `optional` one is written whenever
/// present.
struct Fields(Vec<u8>);

impl Fields {
    fn varint(&mut self, tag: u32, value: u64) {
        if value != 0 {
            self.optional_varint(tag, Some(value));
        }
    }

    fn optional_varint(&mut self, tag: u32, value: Option<u64>) {
        if let Some(value) = value {
            encode_key(tag, WireType::Varint, &mut self.0);
            encode_varint(value, &mut self.0);
        }
    }

    fn fixed64(&mut self, tag: u32, value: u64) {
        if value != 0 {
            encode_key(tag, WireType::SixtyFourBit, &mut self.0);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn string(&mut self, tag: u32, value: &str) {
        if !value.is_empty() {
            self.optional_string(tag, Some(value));
        }
    }

    fn optional_string(&mut self, tag: u32, value: Option<&str>) {
        if let Some(value) = value {
            encode_key(tag, WireType::LengthDelimited, &mut self.0);
            encode_varint(value.len() as u64, &mut self.0);
            self.0.extend_from_slice(value.as_bytes());
        }
    }

    /// `bytes` as a lowercase hex string.
    fn hex(&mut self, tag: u32, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        encode_key(tag, WireType::LengthDelimited, &mut self.0);
        encode_varint(2 * bytes.len() as u64, &mut self.0);
        self.0.extend(hex_digits(bytes));
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
            trace_id: &[1; 16],
            span_id: &[2; 8],
            event_time_unix_nano: 1_800_000_000_123_456_789,
            service_name: Cow::Borrowed("checkout"),
            service_instance_id: Cow::Owned(String::new()),
            outcome_class: OutcomeClass::Partial,
            tool_name: "search",
            tool_target: Cow::Borrowed(target),
            failure_kind: FailureKind::TruncationMarker,
            retry_action: RetryAction::AcceptPartial,
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
                event.retry_action = RetryAction::Retry;
            }
            let payload = event.encode();
            prop_assert_eq!(payload, OutcomeEvent::from(&event).encode_to_vec());
        }
    }
}
