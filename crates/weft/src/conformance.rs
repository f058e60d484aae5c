//! The conformance suite every storage backend runs unchanged.
