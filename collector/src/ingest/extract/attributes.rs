//! The contract's attributes of one event or data point, read once into a slot per key and
//! checked against the request's limits.

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};

use super::{Limits, Refusal, RejectReason, bounded, refuse};
use candor_schema::names::attr;

/// The contract's attribute keys of events and data points, each with a slot in [`Attributes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    OutcomeClass,
    ToolName,
    ToolTarget,
    FailureKind,
    RetryAction,
    RetryAttempt,
    RetryMaxAttempts,
    RetryBackoffMs,
    HttpStatusCode,
    ErrorType,
    PartialReturned,
    PartialExpected,
    Coverage,
    Dropped,
    Authority,
    EvidenceKind,
    EvidenceValue,
    LifecycleState,
    OperationId,
    LifecycleReason,
    ResourceId,
    ResourceVersion,
    ProvenanceSourceSystem,
    ProvenanceActor,
    ProvenanceAdapter,
}

impl Key {
    /// Every key, in slot order.
    const ALL: [Key; 25] = [
        Key::OutcomeClass,
        Key::ToolName,
        Key::ToolTarget,
        Key::FailureKind,
        Key::RetryAction,
        Key::RetryAttempt,
        Key::RetryMaxAttempts,
        Key::RetryBackoffMs,
        Key::HttpStatusCode,
        Key::ErrorType,
        Key::PartialReturned,
        Key::PartialExpected,
        Key::Coverage,
        Key::Dropped,
        Key::Authority,
        Key::EvidenceKind,
        Key::EvidenceValue,
        Key::LifecycleState,
        Key::OperationId,
        Key::LifecycleReason,
        Key::ResourceId,
        Key::ResourceVersion,
        Key::ProvenanceSourceSystem,
        Key::ProvenanceActor,
        Key::ProvenanceAdapter,
    ];

    /// The attribute's name on the wire.
    #[inline]
    pub(super) const fn name(self) -> &'static str {
        match self {
            Key::OutcomeClass => attr::OUTCOME_CLASS,
            Key::ToolName => attr::TOOL_NAME,
            Key::ToolTarget => attr::TOOL_TARGET,
            Key::FailureKind => attr::FAILURE_KIND,
            Key::RetryAction => attr::RETRY_ACTION,
            Key::RetryAttempt => attr::RETRY_ATTEMPT,
            Key::RetryMaxAttempts => attr::RETRY_MAX_ATTEMPTS,
            Key::RetryBackoffMs => attr::RETRY_BACKOFF_MS,
            Key::HttpStatusCode => attr::HTTP_STATUS_CODE,
            Key::ErrorType => attr::ERROR_TYPE,
            Key::PartialReturned => attr::PARTIAL_RETURNED,
            Key::PartialExpected => attr::PARTIAL_EXPECTED,
            Key::Coverage => attr::COVERAGE,
            Key::Dropped => attr::DROPPED,
            Key::Authority => attr::AUTHORITY,
            Key::EvidenceKind => attr::EVIDENCE_KIND,
            Key::EvidenceValue => attr::EVIDENCE_VALUE,
            Key::LifecycleState => attr::LIFECYCLE_STATE,
            Key::OperationId => attr::OPERATION_ID,
            Key::LifecycleReason => attr::LIFECYCLE_REASON,
            Key::ResourceId => attr::RESOURCE_ID,
            Key::ResourceVersion => attr::RESOURCE_VERSION,
            Key::ProvenanceSourceSystem => attr::PROVENANCE_SOURCE_SYSTEM,
            Key::ProvenanceActor => attr::PROVENANCE_ACTOR,
            Key::ProvenanceAdapter => attr::PROVENANCE_ADAPTER,
        }
    }

    /// The key named `name`, when it is one of the contract's. The last bytes are compared
    /// before the whole names: keys of one length differ there (but for `returned` and
    /// `expected`), so most candidates are passed over without a string comparison.
    #[inline]
    pub(super) fn named(name: &str) -> Option<Key> {
        let last = name.as_bytes().last();
        Key::ALL.into_iter().find(|key| {
            let candidate = key.name();
            candidate.len() == name.len()
                && candidate.as_bytes().last() == last
                && candidate == name
        })
    }
}

/// The contract's attributes of one event or data point, checked against the limits, one slot
/// per [`Key`]. Other attributes are checked for size and otherwise ignored.
pub(super) struct Attributes<'a> {
    values: [Option<&'a any_value::Value>; Key::ALL.len()],
}

impl<'a> Attributes<'a> {
    #[inline]
    pub(super) fn read(kvs: &'a [KeyValue], limits: &Limits) -> Result<Self, Refusal> {
        if kvs.len() > limits.max_attributes_per_event {
            return Err(refuse(
                RejectReason::TooManyAttributes,
                format!(
                    "{} attributes; the limit is {}",
                    kvs.len(),
                    limits.max_attributes_per_event
                ),
            ));
        }
        let mut values = [None; Key::ALL.len()];
        for kv in kvs {
            let Some(value) = kv.value.as_ref().and_then(|v| v.value.as_ref()) else {
                continue;
            };
            let length = match value {
                any_value::Value::StringValue(s) => s.len(),
                any_value::Value::BytesValue(b) => b.len(),
                _ => 0,
            };
            if length > limits.max_value_bytes || kv.key.len() > limits.max_value_bytes {
                return Err(refuse(
                    RejectReason::ValueTooLong,
                    format!(
                        "{} is {length} bytes; the limit is {}",
                        bounded(&kv.key, 128),
                        limits.max_value_bytes
                    ),
                ));
            }
            let Some(key) = Key::named(&kv.key) else {
                continue;
            };
            let slot = &mut values[key as usize];
            if slot.is_some() {
                return Err(refuse(
                    RejectReason::DuplicateAttribute,
                    format!("{} appears twice", key.name()),
                ));
            }
            *slot = Some(value);
        }
        Ok(Self { values })
    }

    #[inline]
    pub(super) fn get(&self, key: Key) -> Option<&'a any_value::Value> {
        self.values[key as usize]
    }

    #[inline]
    pub(super) fn string(&self, key: Key) -> Result<Option<&'a str>, Refusal> {
        match self.get(key) {
            None => Ok(None),
            Some(any_value::Value::StringValue(value)) => Ok(Some(value)),
            Some(other) => Err(refuse(
                RejectReason::WrongType,
                format!("{} must be a string, got {}", key.name(), value_type(other)),
            )),
        }
    }

    #[inline]
    pub(super) fn required_string(&self, key: Key) -> Result<&'a str, Refusal> {
        self.string(key)?.ok_or_else(|| missing(key))
    }

    #[inline]
    pub(super) fn int(&self, key: Key) -> Result<Option<i64>, Refusal> {
        match self.get(key) {
            None => Ok(None),
            Some(any_value::Value::IntValue(value)) => Ok(Some(*value)),
            Some(other) => Err(refuse(
                RejectReason::WrongType,
                format!("{} must be an int, got {}", key.name(), value_type(other)),
            )),
        }
    }

    #[inline]
    pub(super) fn unsigned<T: TryFrom<i64>>(&self, key: Key) -> Result<Option<T>, Refusal> {
        match self.int(key)? {
            None => Ok(None),
            Some(value) => T::try_from(value).map(Some).map_err(|_| {
                refuse(
                    RejectReason::OutOfRange,
                    format!("{} = {value} is out of range", key.name()),
                )
            }),
        }
    }

    #[inline]
    pub(super) fn required_unsigned<T: TryFrom<i64>>(&self, key: Key) -> Result<T, Refusal> {
        self.unsigned(key)?.ok_or_else(|| missing(key))
    }
}

pub(super) fn missing(key: Key) -> Refusal {
    refuse(
        RejectReason::MissingAttribute,
        format!("{} is missing", key.name()),
    )
}

pub(super) fn value_type(value: &any_value::Value) -> &'static str {
    match value {
        any_value::Value::StringValue(_) => "a string",
        any_value::Value::BoolValue(_) => "a bool",
        any_value::Value::IntValue(_) => "an int",
        any_value::Value::DoubleValue(_) => "a double",
        any_value::Value::ArrayValue(_) => "an array",
        any_value::Value::KvlistValue(_) => "a key-value list",
        any_value::Value::BytesValue(_) => "bytes",
        #[allow(unreachable_patterns)]
        _ => "another type",
    }
}
