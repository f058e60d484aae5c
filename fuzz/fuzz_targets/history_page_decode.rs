//! Fuzz the history page decoder (see `weft_fuzz::history_page_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::history_page_decode(data);
});
