//! Where the collector's records go.

pub mod kafka;
