//! Fuzz the manifest decoder (see `weft_fuzz::manifest_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::manifest_decode(data);
});
