//! The closed vocabularies of the contract.
//!
//! Every value has exactly one wire spelling. Parsing is exact: an unknown or differently-cased
//! value is an [`UnknownValue`] error that names the vocabulary and the value, never a default.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest part of a rejected value that an error message repeats.
const MAX_ECHO_CHARS: usize = 64;

/// A value that is not a member of a closed vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {vocabulary} {value:?}; expected one of: {expected}")]
pub struct UnknownValue {
    /// Which vocabulary was asked for, e.g. `outcome class`.
    pub vocabulary: &'static str,
    /// The rejected value, cut to a bounded length so that a hostile value cannot flood a log.
    pub value: String,
    /// The accepted spellings, comma separated.
    pub expected: &'static str,
}

impl UnknownValue {
    fn new(vocabulary: &'static str, value: &str, expected: &'static str) -> Self {
        let mut echoed: String = value.chars().take(MAX_ECHO_CHARS).collect();
        if value.chars().count() > MAX_ECHO_CHARS {
            echoed.push('…');
        }
        Self {
            vocabulary,
            value: echoed,
            expected,
        }
    }
}

/// Declares a closed vocabulary: the enum, its wire spellings, parsing, serde and JSON Schema.
/// `within Parent` declares a subset of the vocabulary `Parent`: each member is the parent's of
/// the same name and spelling, and `From<Self> for Parent` is written from the list.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal within $parent:ident {
            $( $(#[doc = $vdoc:literal])* $variant:ident => $wire:literal ),+ $(,)?
        }
    ) => {
        vocabulary! {
            $(#[$meta])*
            $name, $what {
                $( $(#[doc = $vdoc])* $variant => $wire ),+
            }
        }

        impl From<$name> for $parent {
            fn from(member: $name) -> Self {
                match member {
                    $($name::$variant => $parent::$variant),+
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $(#[doc = $vdoc:literal])* $variant:ident => $wire:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[doc = $vdoc])* $variant ),+
        }

        impl $name {
            /// The vocabulary's name, as error messages and the spec's registry say it.
            pub const NAME: &'static str = $what;

            /// Every member, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The accepted wire spellings, comma separated (for error messages).
            const EXPECTED: &'static str = concat!($($wire, " "),+);

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }

            /// What the member means: its documentation, as one line.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $($name::$variant => concat!($($vdoc),*).trim_ascii_start()),+
                }
            }

            /// The member spelled by `bytes`, as [`FromStr`] parses a text; bytes that are not
            /// UTF-8 spell no member, and the error shows them as far as they are readable.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self, UnknownValue> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|member| member.as_str().as_bytes() == bytes)
                    .ok_or_else(|| {
                        let value = String::from_utf8_lossy(bytes);
                        UnknownValue::new($what, &value, Self::EXPECTED.trim_end())
                    })
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                match value {
                    $($wire => Ok($name::$variant),)+
                    other => Err(UnknownValue::new($what, other, Self::EXPECTED.trim_end())),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let raw = Cow::<'de, str>::deserialize(deserializer)?;
                raw.parse().map_err(serde::de::Error::custom)
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "enum": [$($wire),+],
                })
            }
        }
    };
}

vocabulary! {
    /// The outcome of a tool call: exactly one of four, with no catch-all.
    ///
    /// Deliberately not `#[non_exhaustive]`: a consumer's `match` must list all four.
    OutcomeClass, "outcome class" {
        /// Contact made, complete answer: use it.
        Success => "success",
        /// Contact made, the source verified that nothing matches: a real absence, never retried.
        Empty => "empty",
        /// Contact made, the answer was cut off: use what arrived, never as the whole.
        Partial => "partial",
        /// No usable contact: conclude nothing about the source.
        AccessFailure => "access_failure",
    }
}

vocabulary! {
    /// Why an attempt was not a complete answer: the `tool.failure.kind` attribute.
    FailureKind, "failure kind" {
        /// No status arrived within the attempt's time (or the server answered 408).
        Timeout => "timeout",
        /// The connection could not be made or was reset.
        Connect => "connect",
        /// The server answered 5xx.
        ServerError => "server_error",
        /// The server answered 429.
        RateLimited => "rate_limited",
        /// The server answered 401 or 403.
        Auth => "auth",
        /// The server answered another 4xx.
        ClientError => "client_error",
        /// The response could not be understood.
        Protocol => "protocol",
        /// The answer hit a size cap.
        SizeCap => "size_cap",
        /// The source declared a total larger than what it returned.
        DeclaredTotal => "declared_total",
        /// The source marked its answer as truncated.
        TruncationMarker => "truncation_marker",
        /// The answer broke off while it was being received.
        MidStream => "mid_stream",
        /// The asynchronous operation finished with part of its work done.
        OperationPartial => "operation_partial",
        /// The call's overall deadline ran out.
        Deadline => "deadline",
        /// The host name could not be resolved.
        Dns => "dns",
        /// The TLS handshake or the server's certificate failed.
        Tls => "tls",
        /// The tool ran and reported an error in its result (an MCP result with `isError`).
        ToolError => "tool_error",
        /// The asynchronous operation was cancelled before it finished.
        Cancelled => "cancelled",
        /// An error no rule knows: `error_type` keeps what was sent.
        Unknown => "unknown",
    }
}

vocabulary! {
    /// Why an attempt made no usable contact: the failure kinds an AccessFailure can carry.
    AccessFailureKind, "access failure kind" within FailureKind {
        /// No status arrived within the attempt's time (or the server answered 408).
        Timeout => "timeout",
        /// The connection could not be made or was reset.
        Connect => "connect",
        /// The server answered 5xx.
        ServerError => "server_error",
        /// The server answered 429.
        RateLimited => "rate_limited",
        /// The server answered 401 or 403.
        Auth => "auth",
        /// The server answered another 4xx (including a 404 declared as "could not reach").
        ClientError => "client_error",
        /// The response could not be understood.
        Protocol => "protocol",
        /// The call's overall deadline ran out before any answer.
        Deadline => "deadline",
        /// The host name could not be resolved.
        Dns => "dns",
        /// The TLS handshake or the server's certificate failed.
        Tls => "tls",
        /// The tool ran and reported an error in its result (an MCP result with `isError`).
        ToolError => "tool_error",
        /// The asynchronous operation was cancelled before it finished.
        Cancelled => "cancelled",
        /// An error no rule knows: `error_type` keeps what was sent.
        Unknown => "unknown",
    }
}

vocabulary! {
    /// How an answer was cut off: the failure kinds a Partial can carry.
    PartialKind, "partial kind" within FailureKind {
        /// The answer hit a size cap.
        SizeCap => "size_cap",
        /// The source declared a total larger than what it returned.
        DeclaredTotal => "declared_total",
        /// The source marked its answer as truncated.
        TruncationMarker => "truncation_marker",
        /// The answer broke off while it was being received.
        MidStream => "mid_stream",
        /// The asynchronous operation finished with part of its work done.
        OperationPartial => "operation_partial",
        /// The overall deadline ran out while the answer was arriving.
        Deadline => "deadline",
    }
}

vocabulary! {
    /// What the retry policy did after an attempt: the `tool.retry.action` attribute.
    RetryAction, "retry action" {
        /// Another attempt follows after a backoff.
        Retry => "retry",
        /// The failure was transient but the budget (attempts, elapsed time, deadline) ran out.
        Exhausted => "exhausted",
        /// The failure will not change by asking again; no retry.
        Permanent => "permanent",
        /// A partial answer was accepted as it is.
        AcceptPartial => "accept_partial",
    }
}

vocabulary! {
    /// Where an asynchronous operation stands. A 202-style acceptance is `accepted`, never
    /// `completed`.
    LifecycleState, "lifecycle state" {
        /// The request was accepted for processing; nothing has been done yet.
        Accepted => "accepted",
        /// Waiting for a worker to start it.
        Queued => "queued",
        /// Started and not yet finished.
        Running => "running",
        /// Finished with part of the work done.
        Partial => "partial",
        /// Finished, and the completion was verified by a read independent of the acceptance.
        Completed => "completed",
        /// Stopped before finishing, on request.
        Cancelled => "cancelled",
        /// Stopped before finishing, by an error.
        Failed => "failed",
    }
}

impl RetryAction {
    /// Whether a failure event with this action ends its call: every action but `retry` (contract
    /// rule TELEMETRY-TERMINAL-EVENT). [`action_ends_call`] reads a stored action.
    pub const fn ends_call(self) -> bool {
        !matches!(self, Self::Retry)
    }
}

/// Whether a failure event whose `tool.retry.action` reads `action` ends its call: every action
/// but `retry` ([`RetryAction::ends_call`]), and no action at all, which is how a call derived
/// from a span records its failure (the span does not say how it was retried). The one rule by
/// which the CLI, the dashboards and the reconciliation tell a call's last event.
///
/// ```
/// use candor_schema::{RetryAction, action_ends_call};
/// assert!(action_ends_call("exhausted") && action_ends_call("accept_partial"));
/// assert!(action_ends_call(""));
/// assert!(!action_ends_call(RetryAction::Retry.as_str()));
/// assert!(RetryAction::Permanent.ends_call() && !RetryAction::Retry.ends_call());
/// ```
pub fn action_ends_call(action: &str) -> bool {
    action != RetryAction::Retry.as_str()
}

impl LifecycleState {
    /// Whether the operation can still change state.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            LifecycleState::Partial
                | LifecycleState::Completed
                | LifecycleState::Cancelled
                | LifecycleState::Failed
        )
    }
}

vocabulary! {
    /// What a consumer may legally do next with an envelope.
    NextAction, "next action" {
        /// Ask again (the failure was transient).
        Retry => "retry",
        /// Read the status of an asynchronous operation again.
        Poll => "poll",
        /// Undo or repair what partly happened.
        Compensate => "compensate",
        /// Report upward: a person or a higher layer has to decide.
        Escalate => "escalate",
        /// Use the answer as it stands.
        Finish => "finish",
    }
}

vocabulary! {
    /// What kind of handle verifies an outcome independently of the call that produced it.
    EvidenceKind, "evidence kind" {
        /// The request id the source assigned (e.g. an `X-Request-Id` response header).
        RequestId => "request_id",
        /// A receipt the source issued.
        Receipt => "receipt",
        /// The id of an asynchronous job whose status can be read.
        JobId => "job_id",
        /// A query that re-checks the outcome against the source.
        Query => "query",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + FromStr<Err = UnknownValue> + fmt::Display + PartialEq + fmt::Debug,
    {
        for value in all {
            let parsed: T = value.to_string().parse().unwrap();
            assert_eq!(parsed, *value);
        }
    }

    #[test]
    fn every_vocabulary_round_trips_its_wire_spelling() {
        round_trips(OutcomeClass::ALL);
        round_trips(FailureKind::ALL);
        round_trips(AccessFailureKind::ALL);
        round_trips(PartialKind::ALL);
        round_trips(RetryAction::ALL);
        round_trips(LifecycleState::ALL);
        round_trips(NextAction::ALL);
        round_trips(EvidenceKind::ALL);
    }

    #[test]
    fn outcome_class_spellings_are_the_contract() {
        let spelled: Vec<&str> = OutcomeClass::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(spelled, ["success", "empty", "partial", "access_failure"]);
    }

    #[test]
    fn unknown_and_differently_cased_values_are_errors_that_name_the_value() {
        for bad in [
            "Success",
            "SUCCESS",
            "unknown",
            "",
            " success",
            "access-failure",
        ] {
            let err = bad.parse::<OutcomeClass>().unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains("outcome class"), "{err}");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    /// `from_bytes` answers as parsing the bytes' text would, for the members' spellings,
    /// edits of them and bytes that are not UTF-8.
    fn bytes_parse_as_texts<T>(
        from_bytes: fn(&[u8]) -> Result<T, UnknownValue>,
        bytes: &[u8],
    ) -> Result<(), proptest::test_runner::TestCaseError>
    where
        T: FromStr<Err = UnknownValue> + PartialEq + fmt::Debug,
    {
        let as_text = std::str::from_utf8(bytes).map_or_else(
            |_| Err(String::from_utf8_lossy(bytes).parse::<T>().unwrap_err()),
            str::parse::<T>,
        );
        proptest::prop_assert_eq!(from_bytes(bytes), as_text);
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn members_are_found_by_their_bytes_as_by_their_texts(
            member in 0usize..16,
            edit in proptest::option::of((0usize..24, proptest::num::u8::ANY)),
            cut in proptest::option::of(0usize..24),
        ) {
            let spellings: Vec<&str> = OutcomeClass::ALL.iter().map(|m| m.as_str())
                .chain(FailureKind::ALL.iter().map(|m| m.as_str()))
                .chain(RetryAction::ALL.iter().map(|m| m.as_str()))
                .collect();
            let mut bytes = spellings[member % spellings.len()].as_bytes().to_vec();
            if let Some((at, byte)) = edit
                && at < bytes.len()
            {
                bytes[at] = byte;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut);
            }
            bytes_parse_as_texts(OutcomeClass::from_bytes, &bytes)?;
            bytes_parse_as_texts(FailureKind::from_bytes, &bytes)?;
            bytes_parse_as_texts(RetryAction::from_bytes, &bytes)?;
        }
    }

    #[test]
    fn a_huge_unknown_value_is_echoed_only_in_part() {
        let huge = "x".repeat(10_000);
        let err = huge.parse::<FailureKind>().unwrap_err();
        assert!(err.to_string().len() < 400, "{}", err.to_string().len());
    }

    #[test]
    fn serde_rejects_unknown_values_by_name() {
        let err = serde_json::from_str::<RetryAction>("\"give_up\"").unwrap_err();
        assert!(err.to_string().contains("give_up"), "{err}");
    }

    #[test]
    fn every_access_and_partial_kind_maps_to_the_same_wire_kind() {
        for kind in AccessFailureKind::ALL {
            assert_eq!(FailureKind::from(*kind).as_str(), kind.as_str());
        }
        for kind in PartialKind::ALL {
            assert_eq!(FailureKind::from(*kind).as_str(), kind.as_str());
        }
    }
}
