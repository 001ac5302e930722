//! Arbitrary bytes as a protobuf body of a metrics export (`ingest::decode::decode_request`),
//! then `ingest::extract::extract_metrics` under the default limits and under tight ones. Checks:
//! decoding and extraction never panic; the `tool.outcomes` data points seen are the ones in the
//! request (a `tool.outcomes` metric that is not a monotonic sum counts as one), and the records
//! plus the rejections account for every one of them (the accounting of the property tests in
//! `collector/src/ingest/extract_tests.rs`); other metrics are counted as ignored; every rejection
//! is bounded and names its signal; every count record has a delta or cumulative temporality and
//! a well-formed id, and the compactor's decoder stores it as it is; the request re-encoded
//! extracts to the same records and ids.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    candor_collector_fuzz::otlp_metrics(data);
});
