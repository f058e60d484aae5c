//! The conformance suite on the memory backend.

use weft::Log;
use weft_testkit::conformance::Fixture;

weft_testkit::conformance_suite!(memory, || async { Fixture::new(Log::memory()) });
