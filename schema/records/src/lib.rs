//! The records of Candor's pipeline and the rows of its tables.
//!
//! [`candor_schema`] holds the contract (vocabularies, envelope, wire names); this crate holds
//! what the pipeline stores under it:
//! - [`ids`]: the records' ids as the 128-bit numbers they spell;
//! - [`proto`]: the versioned protobuf records of the Kafka topics, each declared once
//!   ([`record`] says what follows from a declaration; `proto/candor/v1/records.proto` is
//!   rendered from them);
//! - [`rejection`]: why input was refused, one closed set of reasons that the collector and the
//!   compactor both write into the `rejected` table by name, and read back by name;
//! - [`tables`] (feature `rows`): the Delta tables' Arrow schemas, partitioning and Parquet
//!   column policy;
//! - [`rows`] (feature `rows`): a Kafka record into a typed row of its table (or a `rejected`
//!   row with a reason), and rows into Arrow record batches, for the compactor and for readers of
//!   the not-yet-compacted tail;
//! - [`stores`] (feature `stores`): the object stores a table root may name, registered with
//!   Delta Lake.
//!
//! ```
//! use candor_records::proto::{Heartbeat, RECORD_SCHEMA_VERSION};
//! use prost::Message as _;
//!
//! let heartbeat = Heartbeat {
//!     schema_version: RECORD_SCHEMA_VERSION,
//!     collector_id: "collector-1".into(),
//!     time_unix_nano: 1_700_000_000_000_000_000,
//!     ..Heartbeat::default()
//! };
//! let bytes = heartbeat.encode_to_vec();
//! assert_eq!(Heartbeat::decode(bytes.as_slice()), Ok(heartbeat));
//! ```

pub mod ids;
pub mod proto;
pub mod record;
pub mod rejection;
#[cfg(feature = "rows")]
pub mod rows;
#[cfg(feature = "stores")]
pub mod stores;
#[cfg(feature = "rows")]
pub mod tables;
