//! The Kafka sink: records encoded as versioned protobuf, produced with idempotence and
//! `acks=all`, and acknowledged only when every record of a request is delivered.

pub mod encode;
pub mod producer;

pub use encode::KafkaRecord;
pub use producer::{DeliveryError, Producer, ProducerSettings};
