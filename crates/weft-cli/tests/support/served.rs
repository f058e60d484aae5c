//! `weft serve` as an OS process on a loopback port it picks itself: start
//! it, read the address it prints, signal it, wait for its end. Every test
//! that talks to a real server uses it (the serve and failover tests, the
//! browser test, the Python client's).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_weft");
/// How long a server may take to say where it listens (a failure bound: a
/// server that neither listens nor exits fails the test instead of hanging).
const START_WAIT: Duration = Duration::from_secs(60);
/// What `weft serve` prints once it listens, before the URL.
const LISTENING: &str = "weft serve: listening on ";

/// The cache directory of the tests' `weft` runs (never the user's).
pub(crate) fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-serve-cache")
}

/// A running `weft serve`, killed when dropped (a test that failed half-way
/// leaves no server behind).
pub(crate) struct Served {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT`
    pub(crate) url: String,
    /// Where its stderr goes, when the test keeps it.
    log_file: Option<PathBuf>,
}

/// Starts `weft serve ARGS --listen 127.0.0.1:0` (stderr dropped) and waits
/// for the line that names its address.
pub(crate) fn serve(args: &[&str]) -> Served {
    Served::start(args, &[], None)
}

impl Served {
    /// Starts `weft serve ARGS --listen 127.0.0.1:0` with `env` added, and
    /// waits for the URL it prints once it listens. With `stderr_dir`, its
    /// stderr goes to a file there, shown when it fails and by
    /// [`Served::stderr`].
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)], stderr_dir: Option<&Path>) -> Served {
        let log_file = stderr_dir.map(|dir| dir.join("weft-serve.log"));
        let stderr = match &log_file {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("create the log file")),
            None => Stdio::null(),
        };
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .env("WEFT_CACHE_DIR", cache_dir())
            .env_remove("RUST_LOG")
            .env_remove("WEFT_TOKENS")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start weft serve");
        let stdout = child.stdout.take().expect("stdout pipe");
        let (tx, rx) = mpsc::channel();
        // Reads the first line, then keeps draining so the server never
        // writes into a full or closed pipe.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut first = String::new();
            let _ = lines.read_line(&mut first);
            let _ = tx.send(first);
            let _ = lines.read_to_end(&mut Vec::new());
        });
        let first = rx.recv_timeout(START_WAIT).unwrap_or_default();
        let url = first
            .strip_prefix(LISTENING)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        let mut served = Served {
            child,
            url: String::new(),
            log_file,
        };
        match url {
            Some(url) => served.url = url,
            None => panic!(
                "weft serve did not say where it listens (stdout: {first:?}; exit: {:?}):\n{}",
                served.child.try_wait(),
                served.stderr()
            ),
        }
        served
    }

    /// What the server wrote to stderr so far (empty when it is dropped).
    pub(crate) fn stderr(&self) -> String {
        self.log_file
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default()
    }

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
