//! Reading the pipeline's topics as a person would: each record decoded and printed as JSON.

use candor_records::proto::{Heartbeat, OperationEvent, OutcomeCount, OutcomeEvent, Rejected};
use candor_schema::names::topic;
use prost::Message as _;

/// Why a record could not be shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    /// The topic is not one of the pipeline's.
    #[error("unknown topic {0:?}; expected one of: {known}", known = KNOWN.join(", "))]
    UnknownTopic(String),
    /// The payload is not a record of the topic's type.
    #[error("undecodable record: {0}")]
    Undecodable(String),
}

/// The topics this module can decode.
pub const KNOWN: &[&str] = &candor_records::tables::TOPICS;

/// Checks that `name` is one of the pipeline's topics.
pub fn known_topic(name: &str) -> Result<&'static str, InspectError> {
    KNOWN
        .iter()
        .find(|known| **known == name)
        .copied()
        .ok_or_else(|| InspectError::UnknownTopic(name.to_owned()))
}

/// Decodes one record of `topic` into JSON.
pub fn to_json(topic: &'static str, payload: &[u8]) -> Result<serde_json::Value, InspectError> {
    let undecodable = |err: prost::DecodeError| InspectError::Undecodable(err.to_string());
    let json = match topic {
        topic::OUTCOME_EVENTS => {
            serde_json::to_value(OutcomeEvent::decode(payload).map_err(undecodable)?)
        }
        topic::OUTCOME_COUNTS => {
            serde_json::to_value(OutcomeCount::decode(payload).map_err(undecodable)?)
        }
        topic::REJECTED => serde_json::to_value(Rejected::decode(payload).map_err(undecodable)?),
        topic::HEARTBEATS => serde_json::to_value(Heartbeat::decode(payload).map_err(undecodable)?),
        topic::OPERATION_EVENTS => {
            serde_json::to_value(OperationEvent::decode(payload).map_err(undecodable)?)
        }
        other => return Err(InspectError::UnknownTopic(other.to_owned())),
    };
    json.map_err(|err| InspectError::Undecodable(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_print_as_json_and_garbage_is_named() {
        let event = OutcomeEvent {
            tool_target: "../../etc/passwd".into(),
            retry_attempt: 2,
            ..OutcomeEvent::default()
        };
        let json = to_json(topic::OUTCOME_EVENTS, &event.encode_to_vec()).unwrap();
        assert_eq!(json["tool_target"], "../../etc/passwd");
        assert_eq!(json["retry_attempt"], 2);
        let rejected = Rejected {
            input: br#"{"a":1}"#.to_vec(),
            ..Rejected::default()
        };
        let json = to_json(topic::REJECTED, &rejected.encode_to_vec()).unwrap();
        assert_eq!(json["input"], r#"{"a":1}"#);
        assert!(matches!(
            to_json(topic::HEARTBEATS, &[0xff, 0xff, 0xff]),
            Err(InspectError::Undecodable(_))
        ));
        assert!(
            known_topic("candor.nope")
                .unwrap_err()
                .to_string()
                .contains("candor.nope")
        );
    }
}
