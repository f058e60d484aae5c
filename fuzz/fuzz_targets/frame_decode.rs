//! Fuzz the entry frame decoder (see `weft_fuzz::frame_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::frame_decode(data);
});
