//! kill -9 crash harness for the `dir` backend.
//!
//! The test binary runs in two roles. As the parent (the default) it
//! starts itself again as a child process that appends from many
//! concurrent writers and prints every acknowledged batch to stdout; at a
//! seeded random moment the parent kills the child with SIGKILL, reopens
//! the directory and checks that every acknowledged entry is present and
//! intact, seqnums are dense, batches are whole and no partial entry is
//! visible. Rounds continue on the same directory, so each child also
//! resumes a recovered log. While the child runs, the parent checks that
//! the directory is `Locked` for it (another process holds it); after the
//! kill, that the stale lock does not block the reopen.
//!
//! `WEFT_CRASH_ROUNDS` (default 8) and `WEFT_CRASH_SEED` tune the run.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weft::storage::Storage;
use weft::storage::dir::{DirOptions, DirStorage};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag};

const CHILD_DIR: &str = "WEFT_CRASH_CHILD_DIR";
const CHILD_ROUND: &str = "WEFT_CRASH_CHILD_ROUND";
const WRITERS: u64 = 16;

fn options() -> DirOptions {
    DirOptions {
        // Small segments, so kills also land around roll-overs.
        segment_bytes: 256 << 10,
        ..DirOptions::default()
    }
}

fn mix(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &p in parts {
        h = (h ^ p).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    h
}

/// The payload of entry `idx` of batch `c` of writer `w` in `round`:
/// a readable header, then filler the parent can regenerate.
fn payload(round: u64, w: u64, c: u64, idx: u64) -> Vec<u8> {
    let m = mix(&[round, w, c, idx]);
    let mut out = format!("r{round} w{w} c{c} i{idx}|").into_bytes();
    // Mostly small payloads, and now and then one large enough for the
    // writer's vectored (uncopied) path.
    let filler = if m.is_multiple_of(23) {
        (65_536 + m % 100_000) as usize
    } else {
        (m % 3000) as usize
    };
    out.extend((0..filler).map(|i| (m.wrapping_add(i as u64 * 31) >> 7) as u8));
    out
}

fn batch_len(round: u64, w: u64, c: u64) -> u64 {
    1 + mix(&[round, w, c, 99]) % 3
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn writer_tag(round: u64, w: u64) -> LogTag {
    LogTag::new(format!("r{round}w{w}")).expect("tag")
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        let round = std::env::var(CHILD_ROUND)
            .ok()
            .and_then(|r| r.parse().ok())
            .expect("child round");
        child(Path::new(&dir), round);
        return;
    }
    parent();
}

/// The child role: append until killed (or, as a safety net, 60 s pass).
fn child(dir: &Path, round: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let storage = DirStorage::open_with(dir, options())
            .await
            .expect("child open");
        let log = Log::new(storage);
        println!("ready");
        std::io::stdout().flush().expect("flush");
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let log = log.clone();
            let stdout = stdout.clone();
            tasks.push(tokio::spawn(async move {
                let tag = writer_tag(round, w);
                let all = LogTag::new("all").expect("tag");
                let mut version = 0u64;
                for c in 0.. {
                    let n = batch_len(round, w, c);
                    let reqs = (0..n)
                        .map(|idx| {
                            let req = AppendRequest::new(tag.clone(), payload(round, w, c, idx))
                                .with_tag(all.clone());
                            (req, Some(version + idx))
                        })
                        .collect();
                    let results = log.append_batch_if(reqs).await.expect("child append");
                    version += n;
                    let mut out = stdout.lock().expect("stdout");
                    for (idx, r) in results.iter().enumerate() {
                        let data = payload(round, w, c, idx as u64);
                        writeln!(out, "ack {} {} {}", r.seqnum, data.len(), fnv(&data))
                            .expect("write");
                    }
                    out.flush().expect("flush");
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        eprintln!("child was not killed within 60 s");
        std::process::exit(3);
    });
}

struct Acked {
    len: usize,
    hash: u64,
}

fn parent() {
    let rounds: u64 = std::env::var("WEFT_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(8);
    let seed: u64 = std::env::var("WEFT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe);
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("log");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut acked: BTreeMap<u64, Acked> = BTreeMap::new();
    println!("dir_crash: {rounds} rounds, seed {seed}");
    for round in 0..rounds {
        let delay = Duration::from_millis(rng.random_range(20..400));
        let mut child = Command::new(std::env::current_exe().expect("current exe"))
            .env(CHILD_DIR, &dir)
            .env(CHILD_ROUND, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    // Only whole lines count: the kill may cut the last one.
                    Ok(_) if line.ends_with('\n') => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                    Ok(_) => break,
                }
            }
        });
        let ready = rx.recv_timeout(Duration::from_secs(30));
        if ready.as_deref().map(str::trim) != Ok("ready") {
            let _ = child.kill();
            let out = child.wait_with_output().expect("child output");
            panic!(
                "round {round}: child did not start: {ready:?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Another process holds the directory: opening it here is refused.
        let err = rt
            .block_on(DirStorage::open_with(&dir, options()))
            .expect_err("the child holds the lock");
        assert_eq!(err.kind(), ErrorKind::Locked, "round {round}: {err}");

        let started = Instant::now();
        std::thread::sleep(delay.saturating_sub(started.elapsed()));
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("wait for child");
        reader.join().expect("reader thread");
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut stderr);
        }
        let mut new_acks = 0;
        for line in rx.try_iter() {
            let mut parts = line.split_whitespace();
            assert_eq!(
                parts.next(),
                Some("ack"),
                "round {round}: odd line {line:?}\n{stderr}"
            );
            let mut num = || -> u64 { parts.next().and_then(|p| p.parse().ok()).expect("number") };
            let (seqnum, len, hash) = (num(), num() as usize, num());
            let previous = acked.insert(seqnum, Acked { len, hash });
            assert!(
                previous.is_none(),
                "round {round}: seqnum {seqnum} acknowledged twice"
            );
            new_acks += 1;
        }
        assert!(
            stderr.is_empty() || !stderr.contains("panicked"),
            "round {round}: child failed ({status}):\n{stderr}"
        );

        let verified = rt.block_on(verify(&dir, &acked, round));
        println!(
            "round {round}: killed after {delay:?}, {new_acks} new acks, {} acked in total, \
             {verified} entries recovered",
            acked.len()
        );
    }
}

/// Reopens and checks the log; returns how many entries it holds.
async fn verify(dir: &Path, acked: &BTreeMap<u64, Acked>, round: u64) -> u64 {
    let storage = DirStorage::open_with(dir, options())
        .await
        .unwrap_or_else(|e| panic!("round {round}: reopen after kill failed: {e}"));
    let mut all: Vec<LogEntry> = Vec::new();
    loop {
        let chunk = storage
            .read(None, all.len() as u64, 4096)
            .await
            .expect("read");
        if chunk.is_empty() {
            break;
        }
        all.extend(chunk);
    }
    assert_eq!(
        all.len() as u64,
        storage.tip().await.unwrap().next,
        "round {round}: read all"
    );
    // Dense seqnums; every entry whole and regenerable; batches whole;
    // versions dense per writer stream.
    let mut versions: BTreeMap<LogTag, u64> = BTreeMap::new();
    let mut i = 0usize;
    while i < all.len() {
        let e = &all[i];
        assert_eq!(e.seqnum, i as u64, "round {round}: seqnums not dense");
        let header =
            std::str::from_utf8(&e.data[..e.data.iter().position(|&b| b == b'|').expect("header")])
                .expect("utf-8 header")
                .to_owned();
        let nums: Vec<u64> = header
            .split_whitespace()
            .map(|p| p[1..].parse().expect("header number"))
            .collect();
        let [r, w, c, idx] = nums[..] else {
            panic!("round {round}: bad header {header}")
        };
        assert_eq!(
            idx, 0,
            "round {round}: entry {i} starts inside a batch ({header})"
        );
        let n = batch_len(r, w, c);
        for k in 0..n {
            let e = all
                .get(i + k as usize)
                .unwrap_or_else(|| panic!("round {round}: batch {header} cut short at the end"));
            assert_eq!(
                &e.data[..],
                &payload(r, w, c, k)[..],
                "round {round}: entry {} damaged",
                e.seqnum
            );
            assert_eq!(e.tags[0], writer_tag(r, w));
            assert_eq!(e.tags[1].to_string(), "all");
            let v = versions.entry(e.tags[0].clone()).or_insert(0);
            assert_eq!(
                e.stream_version, *v,
                "round {round}: version gap in {}",
                e.tags[0]
            );
            *v += 1;
        }
        i += n as usize;
    }
    for (&seqnum, a) in acked {
        let e = all
            .get(seqnum as usize)
            .unwrap_or_else(|| panic!("round {round}: acknowledged entry {seqnum} is lost"));
        assert_eq!(e.data.len(), a.len, "round {round}: entry {seqnum} length");
        assert_eq!(fnv(&e.data), a.hash, "round {round}: entry {seqnum} hash");
    }
    storage.close().await.expect("close");
    all.len() as u64
}
