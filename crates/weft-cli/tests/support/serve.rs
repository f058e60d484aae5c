//! `weft serve` as an OS process on a free loopback port, for the tests
//! that talk to a real server (the browser test, the Python client's).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_weft");
/// How long a server may take to answer /healthz after it was started.
const START_ATTEMPTS: u32 = 300;
const START_POLL: Duration = Duration::from_millis(100);

/// A running `weft serve`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub(crate) url: String,
    log_file: PathBuf,
}

impl Server {
    /// Starts `weft serve LOG` with `extra` arguments on a free port and
    /// waits until it answers `/healthz`. Its stderr goes to a file under
    /// `dir`, shown when the server dies early.
    pub(crate) async fn start(log: &str, extra: &[&str], dir: &Path) -> Server {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let log_file = dir.join(format!("weft-serve-{port}.log"));
        let child = Command::new(BIN)
            .arg("serve")
            .arg(log)
            .args(["--listen", &listen])
            .args(extra)
            .env_remove("RUST_LOG")
            .env(
                "WEFT_CACHE_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-serve-cache"),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_file).expect("create the server's log file"))
            .spawn()
            .expect("start weft serve");
        let mut server = Server {
            child,
            url: format!("http://{listen}"),
            log_file,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&mut self) {
        let http = reqwest::Client::new();
        for _ in 0..START_ATTEMPTS {
            if let Some(status) = self.child.try_wait().expect("poll weft serve") {
                panic!("weft serve exited at start ({status}):\n{}", self.stderr());
            }
            if let Ok(resp) = http.get(format!("{}/healthz", self.url)).send().await
                && resp.status().is_success()
            {
                return;
            }
            tokio::time::sleep(START_POLL).await;
        }
        panic!("weft serve never answered /healthz:\n{}", self.stderr());
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

/// A port nothing listens on right now (the OS picks it; the server binds
/// it a moment later).
fn free_port() -> u16 {
    let socket = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    socket.local_addr().expect("local address").port()
}
