//! The helpers both test tiers of the `weft` command share: running `weft
//! serve` as a process (`served`), pausing processes, JSON rows,
//! and the row tables every backend runs (`trim_cases`, `retention_cases`).

// Each tier uses some of these (what one leaves unused is not dead code),
// and tests wait in real time.
#![allow(dead_code, clippy::disallowed_methods)]

pub(crate) mod pause;
pub(crate) mod retention_cases;
pub(crate) mod rows;
pub(crate) mod served;
pub(crate) mod trim_cases;
