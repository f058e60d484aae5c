//! A TCP proxy on 127.0.0.1 in front of the test server that cuts
//! connections on purpose.
//!
//! Each chunk of bytes, in either direction, is cut with probability
//! `cut_per_mille / 1000`: the proxy closes both sides *instead of*
//! forwarding it. A cut client-to-server chunk never reaches the server (a
//! statement that was never sent); a cut server-to-client chunk is an
//! answer the server produced and the client never got (for an append
//! function call, the COMMIT happened and the acknowledgement was lost).
//! Cuts are seeded, and counted per direction.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How often to cut and what was cut.
#[derive(Debug, Default)]
pub struct Faults {
    /// Cut probability per chunk, per mille; 0 forwards everything.
    pub cut_per_mille: AtomicU64,
    /// Chunks dropped on the way to the server.
    pub cut_requests: AtomicU64,
    /// Chunks dropped on the way back to the client.
    pub cut_answers: AtomicU64,
    /// While set, nothing is forwarded either way and nothing is closed:
    /// the server looks stopped (as under SIGSTOP).
    pub stalled: AtomicBool,
    stopped: AtomicBool,
}

/// A running proxy.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Its fault plan and counters.
    pub faults: Arc<Faults>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.faults.stopped.store(true, Ordering::Release);
        self.task.abort();
    }
}

impl Proxy {
    /// A proxy to `upstream`, cutting with the seeded generator `seed`.
    pub async fn start(upstream: SocketAddr, seed: u64) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let faults = Arc::new(Faults::default());
        let task = {
            let faults = Arc::clone(&faults);
            tokio::spawn(async move {
                let mut n = 0u64;
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    n += 1;
                    let faults = Arc::clone(&faults);
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        let up = pump(cr, sw, Arc::clone(&faults), true, seed ^ (n << 1));
                        let down = pump(sr, cw, faults, false, seed ^ (n << 1 | 1));
                        // When either direction ends, both sockets close.
                        tokio::select! {
                            _ = up => {}
                            _ = down => {}
                        }
                    });
                }
            })
        };
        Proxy { addr, faults, task }
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    faults: Arc<Faults>,
    to_server: bool,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while faults.stalled.load(Ordering::Acquire) {
            if faults.stopped.load(Ordering::Acquire) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if faults.stopped.load(Ordering::Acquire) {
            return;
        }
        let p = faults.cut_per_mille.load(Ordering::Relaxed);
        if p > 0 && rng.random_range(0..1000) < p {
            let counter = if to_server {
                &faults.cut_requests
            } else {
                &faults.cut_answers
            };
            counter.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
