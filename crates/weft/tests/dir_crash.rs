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
//! Every entry carries an append id. A batch the child started but whose
//! acknowledgement the kill cut off (its outcome unknown to the caller) is
//! retried by the next round's child first, with the same ids and the same
//! expected versions: the parent checks that each id is in the log exactly
//! once, that a retry of a batch that had landed was answered with its
//! original seqnums (no `Conflict` either), and that batches stay whole.
//!
//! `WEFT_CRASH_ROUNDS` (default 8) and `WEFT_CRASH_SEED` tune the run.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
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
/// A file listing the batches (`r w c` lines) the child retries first.
const CHILD_RETRY: &str = "WEFT_CRASH_CHILD_RETRY";
const WRITERS: u64 = 16;

fn options() -> DirOptions {
    DirOptions::default().with_segment_bytes(256 << 10)
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

/// The append id of entry `idx` of batch `c` of writer `w` in `round`.
fn append_id(round: u64, w: u64, c: u64, idx: u64) -> String {
    format!("r{round}w{w}c{c}i{idx}")
}

/// Batch `c` of writer `w` in `round`, each entry expecting its version
/// in the writer's stream from `version` on.
fn batch(round: u64, w: u64, c: u64, version: u64) -> Vec<(AppendRequest, Option<u64>)> {
    let all = LogTag::new("all").expect("tag");
    (0..batch_len(round, w, c))
        .map(|idx| {
            let req = AppendRequest::new(writer_tag(round, w), payload(round, w, c, idx))
                .with_tag(all.clone())
                .with_id(append_id(round, w, c, idx));
            (req, Some(version + idx))
        })
        .collect()
}

/// Prints `try` before and one `ack` line per entry after appending batch
/// `c` of writer `w` in `round` from stream version `version`.
async fn append_and_report(
    log: &Log,
    out: &std::sync::Mutex<std::io::Stdout>,
    (round, w, c): (u64, u64, u64),
    version: u64,
) {
    {
        let mut out = out.lock().expect("stdout");
        writeln!(out, "try {round} {w} {c}").expect("write");
        out.flush().expect("flush");
    }
    let results = log
        .append_batch_if(batch(round, w, c, version))
        .await
        .expect("child append");
    let mut out = out.lock().expect("stdout");
    for (idx, r) in results.iter().enumerate() {
        let data = payload(round, w, c, idx as u64);
        writeln!(
            out,
            "ack {round} {w} {c} {idx} {} {} {}",
            r.seqnum,
            data.len(),
            fnv(&data)
        )
        .expect("write");
    }
    out.flush().expect("flush");
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

/// The child role: retry what the last kill left unknown, then append
/// until killed (or, as a safety net, 60 s pass).
fn child(dir: &Path, round: u64) {
    let retry: Vec<(u64, u64, u64)> = std::env::var(CHILD_RETRY)
        .ok()
        .map(|path| std::fs::read_to_string(path).expect("retry list"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let n: Vec<u64> = l
                .split_whitespace()
                .map(|p| p.parse().expect("number"))
                .collect();
            (n[0], n[1], n[2])
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let storage = DirStorage::open_with(dir, options())
            .await
            .expect("child open");
        let opened_at = storage.tip().await.expect("tip").next;
        let log = Log::new(storage);
        println!("ready {opened_at}");
        std::io::stdout().flush().expect("flush");
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
        // Each unknown batch was the last its writer started, so the
        // stream's next version is what it expected if it did not land
        // (and if it did, its ids answer with the original results).
        for (r, w, c) in retry {
            let version = log
                .next_version(&writer_tag(r, w))
                .await
                .expect("next version");
            append_and_report(&log, &stdout, (r, w, c), version).await;
        }
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let log = log.clone();
            let stdout = stdout.clone();
            tasks.push(tokio::spawn(async move {
                let mut version = 0u64;
                for c in 0.. {
                    append_and_report(&log, &stdout, (round, w, c), version).await;
                    version += batch_len(round, w, c);
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        eprintln!("child was not killed within 60 s");
        std::process::exit(3);
    });
}

struct Acked {
    seqnum: u64,
    len: usize,
    hash: u64,
}

/// A batch: round, writer, counter.
type BatchId = (u64, u64, u64);

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
    let retry_file = tmp.path().join("retry");
    // Acknowledged entries by (batch, index).
    let mut acked: BTreeMap<(BatchId, u64), Acked> = BTreeMap::new();
    // Batches started and not yet acknowledged whole.
    let mut unknown: BTreeSet<BatchId> = BTreeSet::new();
    let (mut retried, mut retried_landed) = (0, 0);
    println!("dir_crash: {rounds} rounds, seed {seed}");
    for round in 0..rounds {
        let delay = Duration::from_millis(rng.random_range(20..400));
        let list: String = unknown
            .iter()
            .map(|(r, w, c)| format!("{r} {w} {c}\n"))
            .collect();
        std::fs::write(&retry_file, list).expect("write the retry list");
        let retrying = unknown.clone();
        let mut child = Command::new(std::env::current_exe().expect("current exe"))
            .env(CHILD_DIR, &dir)
            .env(CHILD_ROUND, round.to_string())
            .env(CHILD_RETRY, &retry_file)
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
        // "ready N": the child opened the log with N entries in it.
        let opened_at: Option<u64> = ready
            .as_deref()
            .ok()
            .and_then(|l| l.trim().strip_prefix("ready "))
            .and_then(|n| n.parse().ok());
        let Some(opened_at) = opened_at else {
            let _ = child.kill();
            let out = child.wait_with_output().expect("child output");
            panic!(
                "round {round}: child did not start: {ready:?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
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
        let mut landed_before: BTreeSet<BatchId> = BTreeSet::new();
        for line in rx.try_iter() {
            let mut parts = line.split_whitespace();
            let what = parts.next();
            let mut num = || -> u64 { parts.next().and_then(|p| p.parse().ok()).expect("number") };
            match what {
                Some("try") => {
                    unknown.insert((num(), num(), num()));
                }
                Some("ack") => {
                    let (b, idx) = ((num(), num(), num()), num());
                    let (seqnum, len, hash) = (num(), num() as usize, num());
                    let previous = acked.insert((b, idx), Acked { seqnum, len, hash });
                    // Only a retry acknowledges an entry again (when the kill
                    // cut off part of the first answer), with its original.
                    assert!(
                        previous
                            .as_ref()
                            .is_none_or(|p| p.seqnum == seqnum && retrying.contains(&b)),
                        "round {round}: entry {idx} of batch {b:?} acknowledged twice, \
                         at {} and {seqnum}",
                        previous.map_or(0, |p| p.seqnum)
                    );
                    if retrying.contains(&b) && seqnum < opened_at {
                        landed_before.insert(b);
                    }
                    if (0..batch_len(b.0, b.1, b.2)).all(|i| acked.contains_key(&(b, i))) {
                        unknown.remove(&b);
                    }
                    new_acks += 1;
                }
                _ => panic!("round {round}: odd line {line:?}\n{stderr}"),
            }
        }
        for b in &retrying {
            if !unknown.contains(b) {
                retried += 1;
            }
        }
        retried_landed += landed_before.len();
        assert!(
            stderr.is_empty() || !stderr.contains("panicked"),
            "round {round}: child failed ({status}):\n{stderr}"
        );

        let verified = rt.block_on(verify(&dir, &acked, round));
        println!(
            "round {round}: killed after {delay:?}, {new_acks} new acks, {} acked in total, \
             {verified} entries recovered, {} batches of unknown outcome",
            acked.len(),
            unknown.len()
        );
    }
    println!(
        "dir_crash: {retried} batches of unknown outcome retried to an answer, \
         {retried_landed} of them had landed before the kill"
    );
    if rounds >= 4 {
        // The run exercised what it claims to: retries of batches that had
        // landed (answered with the originals) and of ones that had not.
        assert!(retried_landed > 0, "no retried batch had landed");
        assert!(retried > retried_landed, "every retried batch had landed");
    }
}

/// Reopens and checks the log; returns how many entries it holds.
async fn verify(dir: &Path, acked: &BTreeMap<(BatchId, u64), Acked>, round: u64) -> u64 {
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
    let mut batches: BTreeSet<BatchId> = BTreeSet::new();
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
        assert!(
            batches.insert((r, w, c)),
            "round {round}: batch {header} is in the log twice (its ids were retried)"
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
    for a in acked.values() {
        let seqnum = a.seqnum;
        let e = all
            .get(seqnum as usize)
            .unwrap_or_else(|| panic!("round {round}: acknowledged entry {seqnum} is lost"));
        assert_eq!(e.data.len(), a.len, "round {round}: entry {seqnum} length");
        assert_eq!(fnv(&e.data), a.hash, "round {round}: entry {seqnum} hash");
    }
    storage.close().await.expect("close");
    all.len() as u64
}
