//! Executors: fold the log into state, emit appends, resume by replay.
