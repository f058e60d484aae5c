//! Fuzz the bucket log's writer lease decoder (see `weft_fuzz::writer_lease_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::writer_lease_decode(data);
});
