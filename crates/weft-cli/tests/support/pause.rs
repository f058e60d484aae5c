//! Pausing a server process and waiting for a `weft` process with a bound:
//! shared by the tests that stall a store with SIGSTOP (`s3_pause.rs`,
//! `pg_pause.rs`).

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// Sends `sig` (e.g. `-STOP`) to `pid`; fails the test if `kill` does.
pub(crate) fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// Resumes the paused process when dropped, however the test ends.
pub(crate) struct Paused(pub(crate) u32);

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// Waits for `child` at most `limit`; kills it and fails if it runs on.
pub(crate) fn wait_bounded(mut child: Child, what: &str, limit: Duration) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} did not end within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
