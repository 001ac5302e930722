//! One `tool.outcome` span event into an [`OutcomeEventRef`], one `tool.outcomes` data point into
//! an [`OutcomeCount`]: the contract's checks, the deterministic ids.

use candor_records::proto::OutcomeSource;
use candor_records::proto::{CountClass, OutcomeCount, RECORD_SCHEMA_VERSION, Temporality};
use candor_schema::names::{self, attr};
use candor_schema::{
    AccessFailureKind, EvidenceKind, LifecycleState, OutcomeClass, PartialKind, RetryAction,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::{NumberDataPoint, number_data_point};
use opentelemetry_proto::tonic::trace::v1::{Span, span, status};
use prost::Message as _;
use sha2::{Digest, Sha256};

use super::attributes::{Attributes, Key, member};
use super::{
    EventText, Limits, OutcomeEventRef, Received, Refusal, RejectReason, Service, bounded,
    content_id, refuse,
};

/// A `tool.outcome` or `tool.lifecycle` event as it came: a span event with its span's ids, or a
/// log record with the event's name and the ids of the span it was recorded in.
#[derive(Clone, Copy)]
pub(super) struct EventInput<'a> {
    pub trace_id: &'a [u8],
    pub span_id: &'a [u8],
    /// The event's name (`tool.outcome` or `tool.lifecycle`).
    pub name: &'a str,
    pub time_unix_nano: u64,
    pub dropped_attributes_count: u32,
    pub attributes: &'a [KeyValue],
    /// The description of the span's status, when the event is a span's and its status is
    /// ERROR: the failure's message, by the contract's rule `TELEMETRY-SPAN`.
    pub status_message: Option<&'a str>,
}

impl<'a> EventInput<'a> {
    /// A span event of the span with these ids.
    pub fn span_event(span: &'a Span, event: &'a span::Event) -> Self {
        Self {
            trace_id: &span.trace_id,
            span_id: &span.span_id,
            name: &event.name,
            time_unix_nano: event.time_unix_nano,
            dropped_attributes_count: event.dropped_attributes_count,
            attributes: &event.attributes,
            status_message: status_message(span),
        }
    }

    /// A log record with an event name. Its time is when the event happened, else when it was
    /// observed (the log data model makes the first optional).
    pub fn log_record(record: &'a LogRecord) -> Self {
        Self {
            trace_id: &record.trace_id,
            span_id: &record.span_id,
            name: &record.event_name,
            time_unix_nano: if record.time_unix_nano != 0 {
                record.time_unix_nano
            } else {
                record.observed_time_unix_nano
            },
            dropped_attributes_count: record.dropped_attributes_count,
            attributes: &record.attributes,
            status_message: None,
        }
    }

    /// What every event must carry before its own attributes are read: valid trace and span ids,
    /// a time, and attributes within the request's limits.
    pub(super) fn checked(
        self,
        limits: &Limits,
    ) -> Result<([u8; 16], [u8; 8], Attributes<'a>), Refusal> {
        let (trace, span) = span_ids(self.trace_id, self.span_id)?;
        if self.time_unix_nano == 0 {
            return Err(refuse(RejectReason::MissingTime, "the event has no time"));
        }
        Ok((trace, span, Attributes::read(self.attributes, limits)?))
    }
}

/// The description of a span's status, when the status is ERROR and has one.
pub(super) fn status_message(span: &Span) -> Option<&str> {
    span.status
        .as_ref()
        .filter(|status| status.code == status::StatusCode::Error as i32)
        .map(|status| status.message.as_str())
        .filter(|message| !message.is_empty())
}

/// The trace and span ids a record is made in, which must be valid: of their length, and not all
/// zero.
pub(super) fn span_ids(trace_id: &[u8], span_id: &[u8]) -> Result<([u8; 16], [u8; 8]), Refusal> {
    Ok((
        valid_id(trace_id, RejectReason::InvalidTraceId, "trace id")?,
        valid_id(span_id, RejectReason::InvalidSpanId, "span id")?,
    ))
}

/// An id of `N` bytes, not all zero; else refused as `reason`, saying how long it was.
fn valid_id<const N: usize>(
    id: &[u8],
    reason: RejectReason,
    what: &str,
) -> Result<[u8; N], Refusal> {
    match <[u8; N]>::try_from(id) {
        Ok(valid) if valid != [0; N] => Ok(valid),
        _ => Err(refuse(reason, format!("{what} of {} bytes", id.len()))),
    }
}

pub(super) fn outcome_event<'a>(
    event: EventInput<'a>,
    service: &Service<'a>,
    received: &Received<'a>,
    scratch: &mut Vec<u8>,
) -> Result<OutcomeEventRef<'a>, Refusal> {
    let (trace, span, attributes) = event.checked(received.limits)?;
    let class: OutcomeClass =
        attributes.required_member(Key::OutcomeClass, RejectReason::UnknownClass)?;
    let kind_text = attributes.required_string(Key::FailureKind)?;
    let kind: candor_schema::FailureKind =
        member(Key::FailureKind, kind_text, RejectReason::UnknownKind)?;
    let action: RetryAction =
        attributes.required_member(Key::RetryAction, RejectReason::UnknownAction)?;
    let consistent = match class {
        OutcomeClass::AccessFailure => {
            kind_text.parse::<AccessFailureKind>().is_ok() && action != RetryAction::AcceptPartial
        }
        OutcomeClass::Partial => {
            kind_text.parse::<PartialKind>().is_ok() && action == RetryAction::AcceptPartial
        }
        OutcomeClass::Success | OutcomeClass::Empty => {
            return Err(refuse(
                RejectReason::ClassNotAllowed,
                format!(
                    "{} event with class {class}: only access_failure and partial are events",
                    names::OUTCOME_EVENT
                ),
            ));
        }
    };
    if !consistent {
        return Err(refuse(
            RejectReason::Inconsistent,
            format!("class {class} with kind {kind} and action {action}"),
        ));
    }
    let attempt: u32 = attributes.required_unsigned(Key::RetryAttempt)?;
    let max_attempts: u32 = attributes.required_unsigned(Key::RetryMaxAttempts)?;
    if attempt == 0 || attempt > max_attempts {
        return Err(refuse(
            RejectReason::OutOfRange,
            format!(
                "{} = {attempt} with {} = {max_attempts}",
                attr::RETRY_ATTEMPT,
                attr::RETRY_MAX_ATTEMPTS
            ),
        ));
    }
    let backoff: Option<u64> = attributes.unsigned(Key::RetryBackoffMs)?;
    if action == RetryAction::Retry && backoff.is_none() {
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!("{} is missing for action retry", attr::RETRY_BACKOFF_MS),
        ));
    }
    let tool_name = attributes.required_string(Key::ToolName)?;
    let tool_target = attributes.required_string(Key::ToolTarget)?;
    let text = |key| {
        attributes
            .string(key)
            .map(|value| value.map(EventText::from))
    };
    let (evidence_kind, evidence_value) = evidence(&attributes)?;
    // The span's status describes the call's end: only the event that ends a failed call
    // carries it.
    let ends_failed_call = class == OutcomeClass::AccessFailure && action != RetryAction::Retry;
    let error_message = event
        .status_message
        .filter(|_| ends_failed_call)
        .map(|message| bounded(message, received.limits.max_value_bytes));
    Ok(OutcomeEventRef {
        schema_version: RECORD_SCHEMA_VERSION,
        event_id: event_id(service, event, scratch).into(),
        trace_id: trace.into(),
        span_id: span.into(),
        event_time_unix_nano: event.time_unix_nano,
        service_name: service.name.clone().into(),
        service_instance_id: service.instance.clone().into(),
        outcome_class: class.as_str().into(),
        tool_name: tool_name.into(),
        tool_target: tool_target.into(),
        failure_kind: kind.as_str().into(),
        retry_action: action.as_str().into(),
        retry_attempt: attempt,
        retry_max_attempts: max_attempts,
        retry_backoff_ms: backoff,
        // A status fits 16 bits; wider values would pass here and be refused by the compactor
        // (the table's column is a 32-bit signed int).
        http_status_code: attributes
            .unsigned::<u16>(Key::HttpStatusCode)?
            .map(u32::from),
        error_type: text(Key::ErrorType)?,
        partial_returned: attributes.unsigned(Key::PartialReturned)?,
        partial_expected: attributes.unsigned(Key::PartialExpected)?,
        coverage: text(Key::Coverage)?,
        dropped: text(Key::Dropped)?,
        authority: text(Key::Authority)?,
        received_time_unix_nano: received.time_unix_nano,
        collector_id: received.collector_id.into(),
        source: Some(OutcomeSource::Adapter.as_str().into()),
        error_message: error_message.map(EventText::from),
        exception_type: None,
        rpc_status_code: None,
        // Set by the caller when the request shows the GenAI or MCP call the adapter ran in.
        tool_call_id: None,
        evidence_kind: evidence_kind.map(|kind| kind.as_str().into()),
        evidence_value: evidence_value.map(EventText::from),
        convention: None,
        source_system: text(Key::ProvenanceSourceSystem)?,
        actor: text(Key::ProvenanceActor)?,
        adapter: text(Key::ProvenanceAdapter)?,
    })
}

/// An event's evidence, `tool.evidence.kind` (one of the vocabulary's) and
/// `tool.evidence.value`: both or neither.
pub(super) fn evidence<'a>(
    attributes: &Attributes<'a>,
) -> Result<(Option<EvidenceKind>, Option<&'a str>), Refusal> {
    let kind = attributes
        .string(Key::EvidenceKind)?
        .map(|kind| member::<EvidenceKind>(Key::EvidenceKind, kind, RejectReason::UnknownKind))
        .transpose()?;
    let value = attributes.string(Key::EvidenceValue)?;
    if kind.is_some() != value.is_some() {
        let (present, absent) = if kind.is_some() {
            (attr::EVIDENCE_KIND, attr::EVIDENCE_VALUE)
        } else {
            (attr::EVIDENCE_VALUE, attr::EVIDENCE_KIND)
        };
        return Err(refuse(
            RejectReason::MissingAttribute,
            format!("{absent} is missing where {present} is present"),
        ));
    }
    Ok((kind, value))
}

/// An event's id: the SHA-256 of its service, span and content, cut to 128 bits. The content is
/// written out field by field into `scratch` (a buffer reused from event to event), each
/// variable part after its length, so that two different events never hash alike while the
/// same event always does, whether it came as protobuf or JSON, as a span event or as a log
/// record, and however often a client retried it.
pub(super) fn event_id(
    service: &Service<'_>,
    event: EventInput<'_>,
    scratch: &mut Vec<u8>,
) -> [u8; 16] {
    scratch.clear();
    let mut feed = Feed(scratch);
    feed.bytes(service.name.as_bytes());
    feed.bytes(service.instance.as_bytes());
    feed.bytes(event.trace_id);
    feed.bytes(event.span_id);
    feed.bytes(event.name.as_bytes());
    feed.varint(event.time_unix_nano);
    feed.varint(u64::from(event.dropped_attributes_count));
    feed.varint(event.attributes.len() as u64);
    for kv in event.attributes {
        feed.bytes(kv.key.as_bytes());
        feed.value(kv.value.as_ref().and_then(|v| v.value.as_ref()));
    }
    let digest = Sha256::digest(scratch.as_slice());
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// What an id is computed from, written as prefix-free parts: varints, and byte strings after
/// their length.
pub(super) struct Feed<'s>(&'s mut Vec<u8>);

impl Feed<'_> {
    pub(super) fn varint(&mut self, value: u64) {
        prost::encoding::encode_varint(value, self.0);
    }

    pub(super) fn bytes(&mut self, bytes: &[u8]) {
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A value after a tag of its type. Arrays and key-value lists, which the contract's
    /// attributes never are, are written as their protobuf encoding.
    pub(super) fn value(&mut self, value: Option<&any_value::Value>) {
        match value {
            None => self.varint(0),
            Some(any_value::Value::StringValue(text)) => {
                self.varint(1);
                self.bytes(text.as_bytes());
            }
            Some(any_value::Value::BoolValue(flag)) => {
                self.varint(2);
                self.varint(u64::from(*flag));
            }
            Some(any_value::Value::IntValue(number)) => {
                self.varint(3);
                self.varint(*number as u64);
            }
            Some(any_value::Value::DoubleValue(number)) => {
                self.varint(4);
                self.varint(number.to_bits());
            }
            Some(any_value::Value::BytesValue(bytes)) => {
                self.varint(5);
                self.bytes(bytes);
            }
            Some(other) => {
                self.varint(6);
                self.varint(other.encoded_len() as u64);
                other.encode(self.0);
            }
        }
    }
}

/// What a `tool.outcomes` point counts: a class, or, with `tool.lifecycle.state` `accepted` and
/// no class, acceptances (the contract's rule `TELEMETRY-COUNTER`).
fn count_class(attributes: &Attributes<'_>) -> Result<CountClass, Refusal> {
    let class = attributes.string(Key::OutcomeClass)?;
    let state = attributes.string(Key::LifecycleState)?;
    match (class, state) {
        (Some(class), None) => {
            member(Key::OutcomeClass, class, RejectReason::UnknownClass).map(CountClass::Outcome)
        }
        (None, Some(state)) => {
            let state: LifecycleState =
                member(Key::LifecycleState, state, RejectReason::UnknownKind)?;
            if state == LifecycleState::Accepted {
                Ok(CountClass::Accepted)
            } else {
                Err(refuse(
                    RejectReason::ClassNotAllowed,
                    format!(
                        "{} = {state} without a class: only an acceptance is counted so",
                        attr::LIFECYCLE_STATE
                    ),
                ))
            }
        }
        (Some(class), Some(state)) => Err(refuse(
            RejectReason::Inconsistent,
            format!(
                "{} = {class} with {} = {state}: a call is counted by its class or as an \
                 acceptance, not both",
                attr::OUTCOME_CLASS,
                attr::LIFECYCLE_STATE
            ),
        )),
        (None, None) => Err(super::attributes::missing(Key::OutcomeClass)),
    }
}

pub(super) fn outcome_count(
    point: &NumberDataPoint,
    temporality: Temporality,
    service: &Service<'_>,
    received: &Received<'_>,
) -> Result<OutcomeCount, Refusal> {
    if point.time_unix_nano == 0 {
        return Err(refuse(
            RejectReason::MissingTime,
            "the data point has no time",
        ));
    }
    let attributes = Attributes::read(&point.attributes, received.limits)?;
    let class = count_class(&attributes)?;
    let value = match point.value {
        Some(number_data_point::Value::AsInt(value)) => u64::try_from(value).map_err(|_| {
            refuse(
                RejectReason::OutOfRange,
                format!("the count is negative: {value}"),
            )
        })?,
        Some(number_data_point::Value::AsDouble(value)) => {
            return Err(refuse(
                RejectReason::WrongType,
                format!("the count must be an int, got the double {value}"),
            ));
        }
        None => {
            return Err(refuse(
                RejectReason::MissingAttribute,
                "the data point has no value",
            ));
        }
    };
    let point_id = content_id(&[
        service.name.as_bytes(),
        service.instance.as_bytes(),
        names::OUTCOMES_COUNTER.as_bytes(),
        &point.encode_to_vec(),
    ]);
    Ok(OutcomeCount {
        schema_version: RECORD_SCHEMA_VERSION,
        point_id,
        service_name: service.name.clone().into_owned(),
        service_instance_id: service.instance.clone().into_owned(),
        tool_name: attributes.required_string(Key::ToolName)?.to_owned(),
        tool_target: attributes.required_string(Key::ToolTarget)?.to_owned(),
        outcome_class: class.as_str().to_owned(),
        start_time_unix_nano: point.start_time_unix_nano,
        time_unix_nano: point.time_unix_nano,
        value,
        temporality: temporality.into(),
        received_time_unix_nano: received.time_unix_nano,
        collector_id: received.collector_id.to_owned(),
        // Set by the caller from the export's gauge, which is not part of the point.
        export_interval_ms: None,
        source: Some(OutcomeSource::Adapter.as_str().to_owned()),
        convention: None,
        sampling: None,
    })
}
