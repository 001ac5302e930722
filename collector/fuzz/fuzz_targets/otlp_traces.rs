//! Arbitrary bytes as an OTLP/gRPC or OTLP/HTTP protobuf body of a trace export
//! (`ingest::decode::decode_request`), then `ingest::extract::extract_traces` under the default
//! limits and under tight ones. Checks: decoding and extraction never panic; the `tool.outcome`
//! events seen are the ones in the request, and the records plus the rejections account for every
//! one of them (the accounting of the property tests in `collector/src/ingest/extract_tests.rs`);
//! events past the per-request limit share one rejection that counts them; every rejection is
//! bounded and names its signal; every record is complete and well-formed, and the compactor's
//! decoder (`candor_records::rows::decode`) stores it as it is; the request re-encoded (a client's
//! retry) extracts to the same records and ids.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    candor_collector_fuzz::otlp_traces(data);
});
