//! Wire formats: pure encode/decode, no I/O. Every decoder returns an error
//! on malformed input and never panics.

pub mod frame;
