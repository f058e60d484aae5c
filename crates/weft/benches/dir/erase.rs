//! Section 7 of the dir benchmarks: the hard delete (`Log::erase_stream`)
//! against a bare rewrite of the same bytes in the same run.
//!
//! A log of N 100-byte entries holds 32 users' streams of 32 entries each,
//! placed either spread over the whole log or all in its newest 2 % (at
//! least its newest 2,048 entries). Each
//! run deletes one user's stream and erases it. An erase rewrites every
//! segment that holds one of the entries (the active one sealed first), so
//! its cost is the bytes of those segments, not the log's length; the
//! baseline reads, writes beside, `fdatasync`s and renames files of the
//! same sizes, then syncs the directory — what any in-place rewrite of
//! those segments costs on this disk.

use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use weft::storage::dir::DirStorage;
use weft::{AppendRequest, Log, LogTag};

use super::{Config, log_options, median, scratch};

const USERS: u64 = 32;
const PER_USER: u64 = 32;

fn user(u: u64) -> LogTag {
    LogTag::with_key("user", format!("u{u}")).expect("tag")
}

/// The seqnum of user `u`'s `k`-th entry in a log of `n` entries.
fn place(n: u64, u: u64, k: u64, recent: bool) -> u64 {
    let slot = k * USERS + u;
    let slots = USERS * PER_USER;
    if recent {
        // The newest 2 % (at least two seqnums per slot).
        let window = (n / 50).max(2 * slots);
        n - window + slot * window / slots
    } else {
        slot * n / slots
    }
}

/// A log of `n` entries with the users' entries placed; returns it open.
async fn build(dir: &Path, n: u64, recent: bool) -> Log {
    let log = Log::new(
        DirStorage::open_with(dir, log_options())
            .await
            .expect("open"),
    );
    let mut owner = std::collections::HashMap::new();
    for u in 0..USERS {
        for k in 0..PER_USER {
            owner.insert(place(n, u, k, recent), u);
        }
    }
    let payload = Bytes::from(vec![0x42u8; 100]);
    let filler = LogTag::new("orders").expect("tag");
    let mut batch = Vec::with_capacity(1000);
    for s in 0..n {
        let t = owner.get(&s).map_or_else(|| filler.clone(), |&u| user(u));
        batch.push(AppendRequest::new(t, payload.clone()));
        if batch.len() == 1000 || s + 1 == n {
            log.append_batch(std::mem::take(&mut batch))
                .await
                .expect("append");
        }
    }
    log
}

/// The sizes of the segment files holding user `u`'s entries.
fn touched(dir: &Path, n: u64, u: u64, recent: bool) -> Vec<u64> {
    let mut firsts: Vec<(u64, u64)> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let first = name.strip_suffix(".seg")?.parse().ok()?;
            Some((first, e.metadata().ok()?.len()))
        })
        .collect();
    firsts.sort();
    let mut sizes: Vec<(u64, u64)> = (0..PER_USER)
        .map(|k| place(n, u, k, recent))
        .filter_map(|s| firsts.iter().rev().find(|(f, _)| *f <= s).copied())
        .collect();
    sizes.dedup();
    sizes.into_iter().map(|(_, len)| len).collect()
}

/// The bare rewrite of files of `sizes` bytes in `dir`: read, write
/// beside, fdatasync, rename; one directory sync. Seconds.
fn bare_rewrite(dir: &Path, sizes: &[u64]) -> f64 {
    use std::io::Write;
    for (i, &len) in sizes.iter().enumerate() {
        std::fs::write(dir.join(format!("bare{i}")), vec![7u8; len as usize]).expect("write");
    }
    let t0 = Instant::now();
    for i in 0..sizes.len() {
        let path = dir.join(format!("bare{i}"));
        let bytes = std::fs::read(&path).expect("read");
        let tmp = dir.join(format!("bare{i}.tmp"));
        let mut f = std::fs::File::create(&tmp).expect("create");
        f.write_all(&bytes).expect("write");
        f.sync_data().expect("sync");
        std::fs::rename(&tmp, &path).expect("rename");
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .expect("sync dir");
    t0.elapsed().as_secs_f64()
}

/// Runs the section.
pub(crate) fn section_erase(rt: &tokio::runtime::Runtime, cfg: &Config) {
    let sizes: Vec<u64> = if std::env::var_os("WEFT_BENCH_QUICK").is_some() {
        vec![5_000, 20_000]
    } else {
        vec![50_000, 500_000]
    };
    let runs = cfg.runs.clamp(1, USERS as usize);
    println!(
        "\n## erase: one user's {PER_USER} entries, median of {runs} runs (log of 100-byte entries, 64 MiB segments)"
    );
    println!(
        "{:>10} {:>8} {:>9} {:>12} {:>11} {:>11} {:>11}",
        "entries", "placed", "segments", "MiB rewritten", "erase ms", "bare ms", "erase÷bare"
    );
    for &n in &sizes {
        for recent in [false, true] {
            let dir = scratch();
            let log = rt.block_on(build(dir.path(), n, recent));
            let (mut erase_ms, mut bare_ms, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
            let (mut segments, mut mib) = (0, 0.0);
            for u in 0..runs as u64 {
                let t = user(u);
                let secs = rt.block_on(async {
                    log.delete_stream(&t).await.expect("delete");
                    let t0 = Instant::now();
                    let erased = log.erase_stream(&t).await.expect("erase");
                    assert_eq!(erased, PER_USER, "every entry of the user erased");
                    t0.elapsed().as_secs_f64()
                });
                // After the erase: an active segment it sealed is cut back
                // to its data by then.
                let sizes = touched(dir.path(), n, u, recent);
                segments = sizes.len();
                mib = sizes.iter().sum::<u64>() as f64 / f64::from(1 << 20);
                let bare_dir = scratch();
                let bare = bare_rewrite(bare_dir.path(), &sizes);
                erase_ms.push(secs * 1e3);
                bare_ms.push(bare * 1e3);
                ratio.push(secs / bare);
            }
            println!(
                "{n:>10} {:>8} {segments:>9} {mib:>12.1} {:>11.1} {:>11.1} {:>10.2}x",
                if recent { "recent" } else { "spread" },
                median(erase_ms),
                median(bare_ms),
                median(ratio)
            );
            rt.block_on(log.close()).expect("close");
        }
    }
}
