//! Fuzz the `dir` trim file decoder (see `weft_fuzz::trim_point_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::trim_point_decode(data);
});
