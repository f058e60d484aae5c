//! Fuzz the `dir` segment header decoder (see `weft_fuzz::dir_segment_header_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::dir_segment_header_decode(data);
});
