//! An `outcome_events` row: the record's bytes as read from Kafka, checked once, and read again
//! field by field, without copying a text, when its batch is built.
//!
//! Decoding an `OutcomeEvent` with prost copies each of its texts into a string of its own, and
//! dropping the buffered rows frees them again (docs/adr/0001-hand-written-codec.md).
//! [`EventView::parse`] reads the wire format directly, for the records the collector writes:
//! the known fields, each with its own wire type. A record it does not take (an unknown field, a
//! group, a wrong wire type, a text that is not UTF-8, anything cut short) goes to prost instead,
//! which skips or refuses exactly as before; a record prost takes is then kept as prost encodes
//! it again, which [`EventView::parse`] always takes.

use std::ops::Range;

use prost::Message as _;

use super::{Refusal, long, micros, refuse, source_of, version};
use crate::proto::{OutcomeEvent, OutcomeSource};
use crate::rejection::RejectReason;
use candor_schema::vocab::{EvidenceKind, FailureKind, OutcomeClass, RetryAction, UnknownValue};

pub use crate::proto::EventFields;

/// An event's fields with its texts as `&str`.
pub type EventView<'a> = EventFields<&'a str>;

/// An event's fields with its texts as the bytes they are stored as, for code that checks them
/// as UTF-8 itself: a row's ([`Event::fields`]), checked when the row was made, or a whole
/// column's at once. Checking each text on its own cost more than building its column.
pub type EventBytes<'a> = EventFields<&'a [u8]>;

/// Where the two texts a row is looked up and sorted by lie in its record's bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Keys {
    event_id: Range<usize>,
    tool_target: Range<usize>,
}

impl Keys {
    /// Where `fields`, read from `bytes`, found the keys.
    fn of(bytes: &[u8], fields: &EventBytes<'_>) -> Self {
        Self {
            event_id: within(bytes, fields.event_id),
            tool_target: within(bytes, fields.tool_target),
        }
    }
}

/// Where `part`, a slice of `whole`, lies in it.
fn within(whole: &[u8], part: &[u8]) -> Range<usize> {
    if part.is_empty() {
        // An absent text is no slice of `whole`.
        return 0..0;
    }
    // `part` was read from `whole`, so its address lies within `whole`'s.
    let start = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    start..start + part.len()
}

impl<T: AsRef<[u8]>> EventFields<T> {
    /// The contract's checks, again: a reader does not trust that the writer validated. (A
    /// text that is not UTF-8 is not a known class, kind or action either.)
    fn check(&self) -> Result<(), Refusal> {
        version(self.schema_version)?;
        let unknown = |reason| move |err: UnknownValue| refuse(reason, err.to_string());
        let class = OutcomeClass::from_bytes(self.outcome_class.as_ref())
            .map_err(unknown(RejectReason::UnknownClass))?;
        FailureKind::from_bytes(self.failure_kind.as_ref())
            .map_err(unknown(RejectReason::UnknownKind))?;
        let source = match &self.source {
            Some(source) => source_of(source.as_ref())?,
            None => OutcomeSource::Adapter,
        };
        // A derived call is an event only when it failed, and no span says how it was retried:
        // its action is empty.
        if source.is_derived() {
            if class != OutcomeClass::AccessFailure {
                let detail = format!("a {} event of class {class}", source.as_str());
                return Err(refuse(RejectReason::UnknownClass, detail));
            }
            if !self.retry_action.as_ref().is_empty() {
                RetryAction::from_bytes(self.retry_action.as_ref())
                    .map_err(unknown(RejectReason::UnknownAction))?;
            }
        } else {
            RetryAction::from_bytes(self.retry_action.as_ref())
                .map_err(unknown(RejectReason::UnknownAction))?;
        }
        for (field, value) in [
            ("retry_backoff_ms", self.retry_backoff_ms),
            ("partial_returned", self.partial_returned),
            ("partial_expected", self.partial_expected),
        ] {
            if let Some(value) = value {
                long(field, value)?;
            }
        }
        if let Some(kind) = &self.evidence_kind {
            EvidenceKind::from_bytes(kind.as_ref()).map_err(unknown(RejectReason::UnknownKind))?;
        }
        if let Some(code) = self.http_status_code {
            i32::try_from(code).map_err(|_| {
                refuse(
                    RejectReason::ValueOutOfRange,
                    format!("http_status_code = {code}"),
                )
            })?;
        }
        if self.event_id.as_ref().is_empty() {
            return Err(refuse(RejectReason::MissingId, "event_id is empty"));
        }
        Ok(())
    }
}

/// An `outcome_events` row: the record's bytes, which met the contract when read, with its id,
/// target and time at hand for deduplication and sorting.
#[derive(Clone, PartialEq, Eq)]
pub struct Event {
    bytes: Box<[u8]>,
    keys: Keys,
    time_micros: i64,
    schema_version: u32,
}

impl Event {
    /// Decodes and checks a record; a refused record's bytes come back with the refusal.
    pub(super) fn decode(bytes: Vec<u8>) -> Result<Self, (Refusal, Vec<u8>)> {
        if let Some(fields) = EventBytes::parse(&bytes)
            && fields.texts_are_utf8()
        {
            let keys = Keys::of(&bytes, &fields);
            let (time_micros, schema_version) =
                (micros(fields.event_time_unix_nano), fields.schema_version);
            return match fields.check() {
                Ok(()) => Ok(Self {
                    bytes: bytes.into_boxed_slice(),
                    keys,
                    time_micros,
                    schema_version,
                }),
                Err(refusal) => Err((refusal, bytes)),
            };
        }
        let record = match OutcomeEvent::decode(bytes.as_slice()) {
            Ok(record) => record,
            Err(err) => return Err((refuse(RejectReason::Undecodable, err.to_string()), bytes)),
        };
        if let Err(refusal) = EventView::of(&record).check() {
            return Err((refusal, bytes));
        }
        Ok(Self::from_record(&record))
    }

    /// The row of an owned record, kept as prost encodes it. The record is not checked.
    pub fn from_record(record: &OutcomeEvent) -> Self {
        let bytes = record.encode_to_vec();
        // prost writes known fields with their own wire types and UTF-8 texts, all of which
        // `parse` takes (`prost_encodings_always_parse`): the default is never used.
        let keys = EventBytes::parse(&bytes)
            .map(|fields| Keys::of(&bytes, &fields))
            .unwrap_or_default();
        Self {
            bytes: bytes.into_boxed_slice(),
            keys,
            time_micros: micros(record.event_time_unix_nano),
            schema_version: record.schema_version,
        }
    }

    /// The record's fields.
    pub fn view(&self) -> EventView<'_> {
        // The bytes parsed when the row was made (`decode`, `from_record`), and parsing depends
        // on nothing else: the default is never returned.
        EventView::parse(&self.bytes).unwrap_or_default()
    }

    /// The record's fields with its texts as bytes, which were checked as UTF-8 when the row
    /// was made: for code that checks a whole column of them at once.
    pub fn fields(&self) -> EventBytes<'_> {
        // As in `view`: the default is never returned.
        EventBytes::parse(&self.bytes).unwrap_or_default()
    }

    /// The owned record.
    pub fn record(&self) -> OutcomeEvent {
        self.view().to_record()
    }

    /// `event_id`.
    pub fn id(&self) -> &str {
        self.text(&self.keys.event_id)
    }

    /// `tool_target`.
    pub fn target(&self) -> &str {
        self.text(&self.keys.tool_target)
    }

    /// `tool_target` as the bytes it is stored as (UTF-8, checked when the row was made).
    pub(super) fn target_bytes(&self) -> &[u8] {
        // The range lies within these bytes, found by `Keys::of`.
        self.bytes
            .get(self.keys.tool_target.clone())
            .unwrap_or_default()
    }

    /// `event_time_unix_nano` in microseconds.
    pub fn time_micros(&self) -> i64 {
        self.time_micros
    }

    /// `schema_version`.
    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    /// The record's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn text(&self, range: &Range<usize>) -> &str {
        // The range is a UTF-8 text of these bytes, found by `parse`: the default is never
        // returned.
        self.bytes
            .get(range.clone())
            .and_then(|text| std::str::from_utf8(text).ok())
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Event").field(&self.view()).finish()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Any record, the optional fields present or not, the texts any unicode.
    fn records() -> impl Strategy<Value = OutcomeEvent> {
        let texts = || ".{0,12}";
        let numbers = || prop_oneof![Just(0_u64), any::<u64>()];
        (
            (any::<u32>(), texts(), texts(), texts(), numbers(), texts()),
            (texts(), texts(), texts(), texts(), texts(), texts()),
            (any::<u32>(), any::<u32>(), proptest::option::of(numbers())),
            (
                proptest::option::of(any::<u32>()),
                proptest::option::of(texts()),
                proptest::option::of(numbers()),
                proptest::option::of(numbers()),
            ),
            (
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                numbers(),
                texts(),
                proptest::option::of(texts()),
            ),
            (
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
            ),
            (
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
                proptest::option::of(texts()),
            ),
        )
            .prop_map(|(a, b, c, d, e, f, g)| OutcomeEvent {
                schema_version: a.0,
                event_id: a.1,
                trace_id: a.2,
                span_id: a.3,
                event_time_unix_nano: a.4,
                service_name: a.5,
                service_instance_id: b.0,
                outcome_class: b.1,
                tool_name: b.2,
                tool_target: b.3,
                failure_kind: b.4,
                retry_action: b.5,
                retry_attempt: c.0,
                retry_max_attempts: c.1,
                retry_backoff_ms: c.2,
                http_status_code: d.0,
                error_type: d.1,
                partial_returned: d.2,
                partial_expected: d.3,
                coverage: e.0,
                dropped: e.1,
                authority: e.2,
                received_time_unix_nano: e.3,
                collector_id: e.4,
                source: e.5,
                error_message: f.0,
                exception_type: f.1,
                rpc_status_code: f.2,
                tool_call_id: f.3,
                evidence_kind: f.4,
                evidence_value: f.5,
                convention: g.0,
                source_system: g.1,
                actor: g.2,
                adapter: g.3,
            })
    }

    fn valid() -> OutcomeEvent {
        OutcomeEvent {
            schema_version: 1,
            event_id: "0123456789abcdef0123456789abcdef".into(),
            outcome_class: "partial".into(),
            tool_target: "../../etc/passwd".into(),
            failure_kind: "truncation_marker".into(),
            retry_action: "accept_partial".into(),
            event_time_unix_nano: 1_800_000_000_123_456_789,
            coverage: Some(String::new()),
            ..Default::default()
        }
    }

    proptest! {
        /// Whatever prost writes, `parse` takes, and reads the record prost wrote.
        #[test]
        fn prost_encodings_always_parse(record in records()) {
            let bytes = record.encode_to_vec();
            let view = EventView::parse(&bytes);
            prop_assert!(view.is_some());
            prop_assert_eq!(view.map(|v| v.to_record()), Some(record));
        }

        /// Where `parse` answers at all, prost decodes the same record: on records put together
        /// (a field occurring twice), cut short, or with bytes changed, inserted or appended.
        #[test]
        fn where_parse_answers_prost_decodes_the_same(
            first in records(),
            second in records(),
            join in any::<bool>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0_u8..4), 0..4),
        ) {
            let mut bytes = first.encode_to_vec();
            if join {
                bytes.extend(second.encode_to_vec());
            }
            for (at, byte, how) in edits {
                let at = at.index(bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    2 => bytes.truncate(at),
                    _ => bytes.push(byte),
                }
            }
            if let Some(view) = EventView::parse(&bytes) {
                let decoded = OutcomeEvent::decode(bytes.as_slice());
                prop_assert!(decoded.is_ok(), "prost refused what parse took: {:?}", decoded);
                prop_assert_eq!(Ok(view.to_record()), decoded);
            }
        }
    }

    proptest! {
        /// `Event::decode` keeps a record exactly when prost decodes it and it meets the
        /// contract, and then holds prost's record; otherwise it refuses for the same reason and
        /// gives the bytes back. On the edited records above, half of them valid to begin with
        /// and their texts any unicode.
        #[test]
        fn decode_keeps_what_prost_and_the_checks_keep(
            first in records(),
            make_valid in any::<bool>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0_u8..4), 0..3),
        ) {
            let first = if make_valid {
                let valid = valid();
                OutcomeEvent {
                    schema_version: valid.schema_version,
                    outcome_class: valid.outcome_class,
                    failure_kind: valid.failure_kind,
                    retry_action: valid.retry_action,
                    event_id: format!("{}{}", valid.event_id, first.event_id),
                    http_status_code: first.http_status_code.map(|code| code % 600),
                    retry_backoff_ms: first.retry_backoff_ms.map(|ms| ms >> 1),
                    partial_returned: first.partial_returned.map(|n| n >> 1),
                    partial_expected: first.partial_expected.map(|n| n >> 1),
                    source: first.source.as_ref().map(|_| "adapter".to_owned()),
                    evidence_kind: first.evidence_kind.as_ref().map(|_| "request_id".to_owned()),
                    ..first
                }
            } else {
                first
            };
            let mut bytes = first.encode_to_vec();
            for (at, byte, how) in edits {
                let at = at.index(bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    2 => bytes.truncate(at),
                    _ => bytes.push(byte),
                }
            }
            let expected = OutcomeEvent::decode(bytes.as_slice())
                .map_err(|_| RejectReason::Undecodable)
                .and_then(|record| match EventView::of(&record).check() {
                    Ok(()) => Ok(record),
                    Err(refusal) => Err(refusal.reason),
                });
            match (Event::decode(bytes.clone()), expected) {
                (Ok(event), Ok(record)) => {
                    prop_assert_eq!(event.id(), record.event_id.as_str());
                    prop_assert_eq!(event.target(), record.tool_target.as_str());
                    prop_assert_eq!(event.record(), record);
                }
                (Err((refusal, back)), Err(reason)) => {
                    prop_assert_eq!(refusal.reason, reason);
                    prop_assert_eq!(back, bytes);
                }
                (got, expected) => prop_assert!(false, "decode gave {:?}, expected {:?}", got.map(|e| e.record()), expected),
            }
        }
    }

    #[test]
    fn a_field_that_occurs_twice_keeps_its_last_value_as_prost_does() {
        let mut bytes = valid().encode_to_vec();
        let later = OutcomeEvent {
            tool_target: "b".into(),
            retry_backoff_ms: Some(7),
            ..Default::default()
        };
        bytes.extend(later.encode_to_vec());
        let view = EventView::parse(&bytes).expect("parses");
        assert_eq!((view.tool_target, view.retry_backoff_ms), ("b", Some(7)));
        assert_eq!(
            view.to_record(),
            OutcomeEvent::decode(bytes.as_slice()).expect("prost")
        );
    }

    #[test]
    fn a_record_with_an_unknown_field_is_decoded_by_prost_and_kept_as_prost_writes_it() {
        let mut bytes = valid().encode_to_vec();
        // Field 99, a varint: a later writer's addition that this build does not know.
        bytes.extend([0x98, 0x06, 0x2a]);
        assert_eq!(EventView::parse(&bytes), None);
        let event = Event::decode(bytes).expect("decoded");
        assert_eq!(event.record(), valid());
        assert_eq!(event.bytes(), valid().encode_to_vec());
        assert_eq!(event.target(), "../../etc/passwd");
        assert_eq!(event.id(), "0123456789abcdef0123456789abcdef");
        assert_eq!(event.time_micros(), 1_800_000_000_123_456);
    }

    #[test]
    fn refusals_name_their_reason_and_give_the_bytes_back() {
        let mut not_utf8 = valid().encode_to_vec();
        let at = not_utf8
            .windows(6)
            .position(|w| w == b"passwd")
            .expect("the target is in the bytes");
        not_utf8[at] = 0xff;
        let cases = [
            (not_utf8, "undecodable"),
            (
                OutcomeEvent {
                    outcome_class: "maybe".into(),
                    ..valid()
                }
                .encode_to_vec(),
                "unknown_class",
            ),
            (
                OutcomeEvent {
                    http_status_code: Some(u32::MAX),
                    ..valid()
                }
                .encode_to_vec(),
                "value_out_of_range",
            ),
            (
                OutcomeEvent {
                    event_id: String::new(),
                    ..valid()
                }
                .encode_to_vec(),
                "missing_id",
            ),
        ];
        for (bytes, reason) in cases {
            let Err((refusal, back)) = Event::decode(bytes.clone()) else {
                panic!("{reason}: accepted");
            };
            assert_eq!(refusal.reason.as_str(), reason);
            assert_eq!(back, bytes, "{reason}");
        }
    }
}
