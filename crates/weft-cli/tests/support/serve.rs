//! `weft serve` as an OS process on a loopback port it picks itself, for
//! the tests that talk to a real server (the browser test, the Python
//! client's).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_weft");
/// How long a server may take to say where it listens (a failure bound: a
/// server that neither listens nor exits fails the test instead of hanging).
const START_WAIT: Duration = Duration::from_secs(60);
/// What `weft serve` prints once it listens, before the URL.
const LISTENING: &str = "weft serve: listening on ";

/// A running `weft serve`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub(crate) url: String,
    log_file: PathBuf,
}

impl Server {
    /// Starts `weft serve LOG --listen 127.0.0.1:0` with `extra` arguments
    /// and `env`, and waits for the URL it prints once it listens. Its
    /// stderr goes to a file under `dir`, shown when it fails.
    pub(crate) fn start(log: &str, extra: &[&str], env: &[(&str, &str)], dir: &Path) -> Server {
        let log_file = dir.join("weft-serve.log");
        let mut child = Command::new(BIN)
            .args(["serve", log, "--listen", "127.0.0.1:0"])
            .args(extra)
            .env_remove("RUST_LOG")
            .env_remove("WEFT_TOKENS")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_file).expect("create the server's log file"))
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
        let mut server = Server {
            child,
            url: String::new(),
            log_file,
        };
        match url {
            Some(url) => server.url = url,
            None => panic!(
                "weft serve did not say where it listens (stdout: {first:?}; exit: {:?}):\n{}",
                server.child.try_wait(),
                server.stderr()
            ),
        }
        server
    }

    /// What the server wrote to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
