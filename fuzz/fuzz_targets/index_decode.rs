//! Fuzz the persistent log index's key and value decoders (see
//! `weft_fuzz::index_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::index_decode(data);
});
