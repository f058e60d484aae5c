//! Peer logs for the dir benchmarks: other Rust crates used as a durable
//! log, driven the same way as weft (closed-loop appenders, each waiting
//! until its record is durable before it appends the next).
//!
//! * okaywal: a write-ahead log whose concurrent writers share `fsync`s
//!   (one entry of one chunk per append, `commit` returns once synced),
//!   with its default configuration and a log manager that keeps nothing
//!   at checkpoints, as a log that is trimmed behind its readers would.
//! * fjall used as a log: one keyspace, key = the append's sequence number
//!   (big-endian), each append a one-item batch committed with
//!   `PersistMode::SyncData`, so it is synced before the call returns.
//!
//! Both crates' write calls block, so each appender is its own OS thread:
//! the way these crates are meant to be called concurrently.
//!
//! This file is shared by `cargo bench -p weft --bench dir` and by
//! weft-bench's dir workload, so both compare against the same peers.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Which peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// okaywal 0.3.
    OkayWal,
    /// fjall 3 used as a log.
    Fjall,
}

impl Peer {
    /// Both peers, in the order the tables print them.
    pub(crate) const ALL: [Peer; 2] = [Peer::OkayWal, Peer::Fjall];

    /// The short name `WEFT_BENCH_SYSTEMS` picks it by.
    #[allow(dead_code)]
    pub(crate) fn key(self) -> &'static str {
        match self {
            Peer::OkayWal => "okaywal",
            Peer::Fjall => "fjall",
        }
    }

    /// The name the tables print.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::OkayWal => "okaywal 0.3",
            Peer::Fjall => "fjall 3 as a log",
        }
    }
}

/// An open peer log.
pub(crate) enum PeerLog {
    /// An okaywal log.
    OkayWal(okaywal::WriteAheadLog),
    /// A fjall database, its log keyspace and the next sequence number.
    Fjall {
        /// The database (its journal is what is synced).
        db: fjall::Database,
        /// The keyspace holding the entries.
        log: fjall::Keyspace,
        /// The next key.
        next: AtomicU64,
    },
}

fn fjall_io(e: fjall::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl PeerLog {
    /// Opens a new log of `peer` in the empty directory `dir`.
    pub(crate) fn open(peer: Peer, dir: &Path) -> io::Result<PeerLog> {
        Ok(match peer {
            Peer::OkayWal => {
                PeerLog::OkayWal(okaywal::WriteAheadLog::recover(dir, okaywal::LogVoid)?)
            }
            Peer::Fjall => {
                let db = fjall::Database::builder(dir).open().map_err(fjall_io)?;
                let log = db
                    .keyspace("log", fjall::KeyspaceCreateOptions::default)
                    .map_err(fjall_io)?;
                PeerLog::Fjall {
                    db,
                    log,
                    next: AtomicU64::new(0),
                }
            }
        })
    }

    /// Appends `record`; returns once it is durable.
    pub(crate) fn append(&self, record: &[u8]) -> io::Result<()> {
        match self {
            PeerLog::OkayWal(wal) => {
                let mut entry = wal.begin_entry()?;
                entry.write_chunk(record)?;
                entry.commit()?;
            }
            PeerLog::Fjall { db, log, next } => {
                let seq = next.fetch_add(1, Ordering::Relaxed);
                let mut batch = db.batch().durability(Some(fjall::PersistMode::SyncData));
                batch.insert(log, seq.to_be_bytes(), record);
                batch.commit().map_err(fjall_io)?;
            }
        }
        Ok(())
    }

    /// Closes the log (okaywal's checkpointer thread ends here).
    pub(crate) fn close(self) -> io::Result<()> {
        match self {
            PeerLog::OkayWal(wal) => wal.shutdown(),
            PeerLog::Fjall { db, .. } => db.persist(fjall::PersistMode::SyncData).map_err(fjall_io),
        }
    }
}

/// What one measured window of a peer did.
pub(crate) struct PeerRun {
    /// Appends that became durable inside the window.
    pub(crate) appends: u64,
    /// The window's length.
    pub(crate) elapsed: Duration,
    /// Each append's time from call to durable, inside the window (the
    /// dir bench reports rates only; weft-bench reads these).
    #[allow(dead_code)]
    pub(crate) latencies: Vec<Duration>,
}

impl PeerRun {
    /// Durable appends per second.
    pub(crate) fn rate(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs `appenders` threads appending `record` to a new `peer` log in `dir`
/// for `warmup`, then counts for `window`, then closes the log. The rate
/// counts the appends that completed inside the window (as the weft runs
/// do); the latencies are those of appends that started inside it.
pub(crate) fn closed_loop(
    peer: Peer,
    dir: &Path,
    appenders: usize,
    record: &[u8],
    warmup: Duration,
    window: Duration,
) -> io::Result<PeerRun> {
    let log = Arc::new(PeerLog::open(peer, dir)?);
    let done = Arc::new(AtomicU64::new(0));
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let record: Arc<[u8]> = record.into();
    let mut threads = Vec::with_capacity(appenders);
    for _ in 0..appenders {
        let (log, done, counting, stop, record) = (
            log.clone(),
            done.clone(),
            counting.clone(),
            stop.clone(),
            record.clone(),
        );
        // Small stacks: a thousand appender threads on a small machine.
        let thread = std::thread::Builder::new().stack_size(256 << 10).spawn(
            move || -> io::Result<Vec<Duration>> {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let timed = counting.load(Ordering::Relaxed);
                    let t = Instant::now();
                    log.append(&record)?;
                    done.fetch_add(1, Ordering::Relaxed);
                    if timed && !stop.load(Ordering::Relaxed) {
                        latencies.push(t.elapsed());
                    }
                }
                Ok(latencies)
            },
        )?;
        threads.push(thread);
    }
    std::thread::sleep(warmup);
    counting.store(true, Ordering::Relaxed);
    let (c0, t0) = (done.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(window);
    let (c1, t1) = (done.load(Ordering::Relaxed), Instant::now());
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for thread in threads {
        let mine = thread
            .join()
            .map_err(|_| io::Error::other("peer appender panicked"))??;
        latencies.extend(mine);
    }
    Arc::try_unwrap(log)
        .map_err(|_| io::Error::other("peer log still shared"))?
        .close()?;
    Ok(PeerRun {
        appends: c1 - c0,
        elapsed: t1 - t0,
        latencies,
    })
}
