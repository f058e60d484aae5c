//! The conformance suite, unchanged, on the PostgreSQL backend (a real
//! server started by `scripts/postgres.sh`; each check gets a log of its
//! own in a fresh schema).

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use weft::Log;
use weft_testkit::conformance::Fixture;

weft_testkit::conformance_suite!(postgres, || async {
    let location = pg_support::fresh_location("conf");
    Fixture::new(Log::new(pg_support::open(&location).await))
});
