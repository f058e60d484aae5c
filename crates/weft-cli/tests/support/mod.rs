//! Shared by the test binaries that run `weft serve`.

pub(crate) mod serve;
