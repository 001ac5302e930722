//! Arbitrary bytes as an OTLP/HTTP JSON body (`ingest::decode::decode_request` with
//! `Encoding::Json`), decoded as a trace export and as a metrics export. Each request that decodes
//! goes through the same checks as in `otlp_traces` and `otlp_metrics`: no panic, records plus
//! rejections account for every `tool.outcome` event and every `tool.outcomes` data point, bounded
//! rejections, well-formed records that the compactor stores as they are; and the request,
//! encoded as protobuf and read back, extracts to the same records.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    candor_collector_fuzz::otlp_json(data);
});
