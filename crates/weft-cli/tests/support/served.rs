//! `weft serve` as an OS process: start it on a free port, read the
//! address it prints, stop it with a signal.

#![allow(dead_code, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_weft");

/// The cache directory of the tests' `weft` runs (never the user's).
pub(crate) fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-serve-cache")
}

/// A running `weft serve`.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
}

/// Starts `weft serve ARGS --listen 127.0.0.1:0` and waits for the line
/// that names its address.
pub(crate) fn serve(args: &[&str]) -> Served {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .env("WEFT_CACHE_DIR", cache_dir())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("start weft serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    Served { child, url }
}

impl Served {
    /// Sends `signal` (a `kill` name: TERM, INT, KILL) to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal}");
    }

    /// Waits for the process to end (at most two minutes).
    pub(crate) fn wait(mut self) -> ExitStatus {
        for _ in 0..1200 {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("weft serve did not exit");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // A test that failed half-way must not leave its server running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `weft ARGS` to its end.
pub(crate) fn weft(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("WEFT_CACHE_DIR", cache_dir())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run weft")
}
