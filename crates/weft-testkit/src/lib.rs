//! # weft-testkit — test harnesses for weft and its storage backends
//!
//! Kept out of the `weft` library so no user's build compiles them and
//! they are not part of weft's API. weft's own integration tests use this
//! crate, and so can a third-party [`Storage`](weft::Storage) backend (as a
//! dev-dependency):
//!
//! * [`conformance`] — the suite every backend runs unchanged, and the
//!   [`conformance_suite!`] macro that turns it into tests.
//! * [`fault`] — [`FaultStore`](fault::FaultStore), a seeded
//!   fault-injecting `ObjectStore` wrapper (errors, 409/412 storms,
//!   ambiguous, hung, lost and late requests, latency).
//! * [`hooked`] — [`HookedStore`](hooked::HookedStore), a pass-through
//!   `ObjectStore` wrapper that runs a test's hooks before and after each
//!   request: record what lands, answer instead of the store, delay or
//!   replace an answer, change the bucket at an exact moment.
//!
//! Both wrappers stack over any store, and over each other.
//!
//! * [`files`] — the files under a directory (to damage them, or to check
//!   that a command left them as they were).

pub mod conformance;
pub mod fault;
pub mod files;
pub mod hooked;
