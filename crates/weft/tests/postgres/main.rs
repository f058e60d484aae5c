//! The PostgreSQL server tier (`--features server-tests`): the tests that
//! talk to the server `scripts/postgres.sh` starts, in one binary. The
//! multi-process test is its own binary (`pg_multiprocess.rs`, no test
//! harness), since it runs itself as the writer processes.

#[path = "../support/mod.rs"]
mod support;

mod pg_backend;
mod pg_conformance;
mod pg_deadlines;
mod pg_layout;
mod pg_no_tls;
mod pg_rounds;
mod pg_tls;
mod pg_wedge;
