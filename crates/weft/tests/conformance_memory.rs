//! The conformance suite on the memory backend.

use weft::Log;
use weft::conformance::Fixture;

weft::conformance_suite!(memory, || async { Fixture::new(Log::memory()) });
