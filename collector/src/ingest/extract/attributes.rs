//! The contract's attributes of one event or data point, read once into a slot per key and
//! checked against the request's limits.

use std::fmt::Display;
use std::str::FromStr;

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};

use super::{Limits, Refusal, RejectReason, bounded, refuse};
use candor_schema::names::attr;

/// Declares [`Key`], its slot order ([`Key::ALL`]) and its wire names from one list.
macro_rules! keys {
    ($($key:ident => $name:expr,)*) => {
        /// The contract's attribute keys of events and data points, each with a slot in
        /// [`Attributes`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(super) enum Key {
            $($key,)*
        }

        impl Key {
            /// Every key, in slot order.
            const ALL: &[Key] = &[$(Key::$key,)*];

            /// The attribute's name on the wire.
            #[inline]
            pub(super) const fn name(self) -> &'static str {
                match self {
                    $(Key::$key => $name,)*
                }
            }
        }
    };
}

// The attributes of the `tool.outcome` and `tool.lifecycle` events and of the `tool.outcomes`
// counter in the registry (`candor_schema::registry`); a test holds the two together.
keys! {
    OutcomeClass => attr::OUTCOME_CLASS,
    ToolName => attr::TOOL_NAME,
    ToolTarget => attr::TOOL_TARGET,
    FailureKind => attr::FAILURE_KIND,
    RetryAction => attr::RETRY_ACTION,
    RetryAttempt => attr::RETRY_ATTEMPT,
    RetryMaxAttempts => attr::RETRY_MAX_ATTEMPTS,
    RetryBackoffMs => attr::RETRY_BACKOFF_MS,
    HttpStatusCode => attr::HTTP_STATUS_CODE,
    ErrorType => attr::ERROR_TYPE,
    PartialReturned => attr::PARTIAL_RETURNED,
    PartialExpected => attr::PARTIAL_EXPECTED,
    Coverage => attr::COVERAGE,
    Dropped => attr::DROPPED,
    Authority => attr::AUTHORITY,
    EvidenceKind => attr::EVIDENCE_KIND,
    EvidenceValue => attr::EVIDENCE_VALUE,
    LifecycleState => attr::LIFECYCLE_STATE,
    OperationId => attr::OPERATION_ID,
    LifecycleReason => attr::LIFECYCLE_REASON,
    ResourceId => attr::RESOURCE_ID,
    ResourceVersion => attr::RESOURCE_VERSION,
    ProvenanceSourceSystem => attr::PROVENANCE_SOURCE_SYSTEM,
    ProvenanceActor => attr::PROVENANCE_ACTOR,
    ProvenanceAdapter => attr::PROVENANCE_ADAPTER,
}

impl Key {
    /// The key named `name`, when it is one of the contract's. The last bytes are compared
    /// before the whole names: keys of one length differ there (but for `returned` and
    /// `expected`), so most candidates are passed over without a string comparison.
    #[inline]
    pub(super) fn named(name: &str) -> Option<Key> {
        let last = name.as_bytes().last();
        Key::ALL.iter().copied().find(|key| {
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

    /// The required text of `key` as a member of its vocabulary ([`member`]).
    pub(super) fn required_member<T>(&self, key: Key, reason: RejectReason) -> Result<T, Refusal>
    where
        T: FromStr,
        T::Err: Display,
    {
        member(key, self.required_string(key)?, reason)
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

/// `text`, the value of `key`, as a member of its vocabulary; else refused as `reason`, naming the
/// attribute and what it accepts.
pub(super) fn member<T>(key: Key, text: &str, reason: RejectReason) -> Result<T, Refusal>
where
    T: FromStr,
    T::Err: Display,
{
    text.parse()
        .map_err(|err| refuse(reason, format!("{}: {err}", key.name())))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use candor_schema::registry;

    use super::Key;

    #[test]
    fn the_keys_are_the_registry_attributes_of_the_events_and_the_counter() {
        let keys: BTreeSet<&str> = Key::ALL.iter().map(|key| key.name()).collect();
        assert_eq!(keys.len(), Key::ALL.len(), "a key is listed twice");
        let declared: BTreeSet<&str> = registry::signals()
            .into_iter()
            .filter(|signal| {
                signal.title.starts_with("Span event") || signal.title.starts_with("Counter")
            })
            .flat_map(|signal| {
                signal
                    .attributes
                    .into_iter()
                    .map(|attribute| attribute.name)
            })
            .collect();
        assert_eq!(keys, declared);
    }
}
