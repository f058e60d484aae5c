//! Fuzz the segment decoder (see `weft_fuzz::segment_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::segment_decode(data);
});
