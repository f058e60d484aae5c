//! Fuzz the bucket log's stream-state checkpoint decoder (see
//! `weft_fuzz::state_checkpoint_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::state_checkpoint_decode(data);
});
