//! Arbitrary bytes as a Kafka record of one of the pipeline's four topics, decoded by the
//! compactor's `candor_records::rows::decode`. The first byte chooses the topic (bits 0–1), the
//! Kafka timestamp (bits 2–3: ordinary, none, `i64::MAX`, `i64::MIN`) and, with a high nibble of
//! `0xF`, a record without a value; the rest is the value. Checks: it never panics; the record
//! always becomes a row of its own table or a rejected row, and a row the compactor refuses says
//! why, names its topic and keeps a bounded copy of the value's start; the row's Kafka time and
//! position are the record's; and the row goes into a record batch of its table
//! (`rows::to_batch`), as the compactor writes it.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    candor_collector_fuzz::kafka_record(data);
});
