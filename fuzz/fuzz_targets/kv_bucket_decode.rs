//! Fuzz the `dir` KV bucket decoder (see `weft_fuzz::kv_bucket_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::kv_bucket_decode(data);
});
