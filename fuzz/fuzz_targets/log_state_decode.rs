//! Fuzz the bucket log's log-state snapshot decoder (see `weft_fuzz::log_state_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::log_state_decode(data);
});
