//! The Kafka sink: records encoded as versioned protobuf, produced with idempotence and
//! `acks=all`, and acknowledged only when every record of a request is delivered; while the
//! brokers refuse, requests wait in the [`spool`] on local disk.

pub mod encode;
pub mod producer;
pub mod spool;

pub use candor_kafka::ProducerSettings;
pub use encode::KafkaRecord;
pub use producer::{DeliveryError, Producer};
