//! The `weft` command's tests that need no server (a directory log, and
//! `weft serve` over one), in one binary; `support/` is the helper tree
//! both tiers share.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod damage;
mod serve;
