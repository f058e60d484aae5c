//! Fuzz locations and connection settings read from the environment (see
//! `weft_fuzz::connect_settings`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::connect_settings(data);
});
