//! Encoding records for Kafka: pure, one function per record type.

use candor_records::proto::{Heartbeat, OperationEvent, OutcomeCount};
use candor_schema::names::topic;
use prost::Message as _;

use crate::ingest::extract::{OutcomeEventRef, Rejection};

/// A record ready to produce: topic, key and protobuf payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// The topic, one of `candor_schema::names::topic`.
    pub topic: &'static str,
    /// The partitioning key.
    pub key: Vec<u8>,
    /// The encoded record.
    pub payload: Vec<u8>,
}

/// An outcome event, keyed by its target so that a target's events stay in order.
pub fn outcome_event(event: &OutcomeEventRef<'_>) -> KafkaRecord {
    KafkaRecord {
        topic: topic::OUTCOME_EVENTS,
        key: event.tool_target.as_bytes().to_vec(),
        payload: event.encode(),
    }
}

/// A count data point, keyed by its target.
pub fn outcome_count(count: &OutcomeCount) -> KafkaRecord {
    KafkaRecord {
        topic: topic::OUTCOME_COUNTS,
        key: count.tool_target.as_bytes().to_vec(),
        payload: count.encode_to_vec(),
    }
}

/// An operation event, keyed by its operation so that one operation's states stay in order.
pub fn operation_event(event: &OperationEvent) -> KafkaRecord {
    KafkaRecord {
        topic: topic::OPERATION_EVENTS,
        key: event.operation_id.as_bytes().to_vec(),
        payload: event.encode_to_vec(),
    }
}

/// A rejection, keyed by its reason.
pub fn rejected(
    rejection: &Rejection,
    received_time_unix_nano: u64,
    collector_id: &str,
) -> KafkaRecord {
    let record = rejection.to_record(received_time_unix_nano, collector_id);
    KafkaRecord {
        topic: topic::REJECTED,
        key: rejection.reason.as_str().as_bytes().to_vec(),
        payload: record.encode_to_vec(),
    }
}

/// A heartbeat, keyed by the collector's id.
pub fn heartbeat(heartbeat: &Heartbeat) -> KafkaRecord {
    KafkaRecord {
        topic: topic::HEARTBEATS,
        key: heartbeat.collector_id.as_bytes().to_vec(),
        payload: heartbeat.encode_to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candor_records::proto::Rejected;

    use crate::ingest::extract::{RejectReason, Signal};

    #[test]
    fn an_event_is_keyed_by_its_target() {
        let event = crate::ingest::event::tests::event("../../etc/passwd", None, None);
        let record = outcome_event(&event);
        assert_eq!(record.topic, topic::OUTCOME_EVENTS);
        assert_eq!(record.key, b"../../etc/passwd");
        assert_eq!(record.payload, event.encode());
    }

    #[test]
    fn a_rejection_is_keyed_by_its_reason_and_round_trips() {
        let rejection = Rejection {
            reason: RejectReason::UnknownClass,
            detail: candor_schema::names::attr::OUTCOME_CLASS.into(),
            signal: Signal::Traces,
            service_name: "checkout".into(),
            input: b"{}".to_vec(),
            input_truncated: false,
            count: 1,
        };
        let record = rejected(&rejection, 7, "c-1");
        assert_eq!(record.topic, topic::REJECTED);
        let decoded = Rejected::decode(record.payload.as_slice()).unwrap();
        assert_eq!(decoded.reason, "unknown_class");
        assert_eq!(decoded.signal, "traces");
        assert_eq!(decoded.received_time_unix_nano, 7);
    }
}
