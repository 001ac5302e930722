//! Arbitrary bytes as a gzip request body, decompressed by `ingest::decode::gunzip_capped` with a
//! cap of 64 KiB (`candor_collector_fuzz::GZIP_CAP`). Checks: it never panics and never returns
//! more than the cap; it succeeds exactly when a plain read of an uncapped
//! `flate2::read::MultiGzDecoder` reaches the end within the cap, and then returns the same bytes;
//! a refusal for size names the cap.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    candor_collector_fuzz::gzip_capped(data);
});
