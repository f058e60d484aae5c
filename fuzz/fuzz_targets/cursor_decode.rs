//! Fuzz the replica cursor decoder (see `weft_fuzz::cursor_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::cursor_decode(data);
});
