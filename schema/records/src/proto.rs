//! The protobuf records of the pipeline's Kafka topics (`schema/records/proto/candor/v1/records.proto`).
//!
//! Every record carries `schema_version`; [`RECORD_SCHEMA_VERSION`] is the version written here.

#![allow(missing_docs)] // generated code; the documentation is in the .proto file

include!(concat!(env!("OUT_DIR"), "/candor.v1.rs"));

/// The `schema_version` of records written by this build.
pub const RECORD_SCHEMA_VERSION: u32 = 1;

/// Serialises bytes as text (invalid UTF-8 replaced), for the JSON copy kept with a rejection.
pub fn bytes_as_text<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(bytes))
}
