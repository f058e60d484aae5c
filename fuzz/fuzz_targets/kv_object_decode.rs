//! Fuzz the bucket log's KV object decoder (see `weft_fuzz::kv_object_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::kv_object_decode(data);
});
