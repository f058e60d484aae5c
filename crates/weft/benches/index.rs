//! Benchmarks of the persistent log index (`weft::index`) on its own.
//!
//! `cargo bench -p weft --bench index` prints:
//!
//! 1. recording throughput: entries/s through [`Index::push`] until the
//!    flusher has stored them all (1–2 tags per entry, entries spread over
//!    `streams` streams), and the time `push` itself takes per entry (what
//!    an appender pays);
//! 2. reads by tag from a seqnum and by version (100 seqnums each), and
//!    next-version lookups of random streams, per second;
//! 3. the time to reopen the index, and its bytes on disk per entry.
//!
//! `WEFT_BENCH_QUICK=1` runs a small smoke version;
//! `WEFT_BENCH_INDEX_ENTRIES` and `WEFT_BENCH_INDEX_STREAMS` set the size.
//! The comparison of candidate stores that picked fjall lives in
//! `crates/weft-bench` (`--only index-store`).

// Benchmarks measure real time: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use weft::LogTag;
use weft::index::{Index, IndexEntry, IndexOptions};

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn stream(i: u64) -> LogTag {
    LogTag::with_key("orders", format!("customer-{i}")).expect("tag")
}

fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().map(|e| disk_bytes(&e.path())).sum())
        .unwrap_or(0)
}

fn rate(n: u64, d: Duration) -> String {
    format!("{:>12.0}/s", n as f64 / d.as_secs_f64())
}

fn main() {
    let quick = std::env::var_os("WEFT_BENCH_QUICK").is_some();
    let entries = env_u64(
        "WEFT_BENCH_INDEX_ENTRIES",
        if quick { 100_000 } else { 2_000_000 },
    );
    let streams = env_u64(
        "WEFT_BENCH_INDEX_STREAMS",
        if quick { 10_000 } else { 200_000 },
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-index");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("bench dir");
    let dir = root.join("index");
    println!("index benchmarks: {entries} entries over {streams} streams");

    let categories: Vec<LogTag> = (0..16)
        .map(|c| LogTag::new(format!("category{c}")).expect("tag"))
        .collect();
    let mut next_version = vec![0u64; streams as usize];
    let index = Index::open(&dir, b"bench", IndexOptions::default()).expect("open");
    let start = Instant::now();
    let mut push_time = Duration::ZERO;
    let mut s = 0u64;
    while s < entries {
        let batch: Vec<IndexEntry> = (s..(s + 64).min(entries))
            .map(|seqnum| {
                let r = mix(seqnum);
                let id = r % streams;
                let mut tags = vec![stream(id)];
                if (r >> 40) & 1 == 1 {
                    tags.push(categories[((r >> 48) % 16) as usize].clone());
                }
                let version = next_version[id as usize];
                next_version[id as usize] += 1;
                IndexEntry {
                    seqnum,
                    tags: tags.into(),
                    version,
                    locator: seqnum
                        .is_multiple_of(64)
                        .then(|| seqnum.to_le_bytes().to_vec().into()),
                    check: r,
                }
            })
            .collect();
        s += batch.len() as u64;
        let t = Instant::now();
        index.push(&batch).expect("push");
        push_time += t.elapsed();
    }
    index.flush().expect("flush");
    let ingest = start.elapsed();
    println!(
        "record + store        {}   (push alone: {:.2} µs/entry)",
        rate(entries, ingest),
        push_time.as_secs_f64() * 1e6 / entries as f64
    );

    let n = if quick { 2_000 } else { 20_000 };
    let t = Instant::now();
    for i in 0..n {
        let r = mix(i ^ 0x5151);
        let tag = stream(r % streams);
        let got = index
            .seqnums(Some(&tag), (r >> 20) % entries, 100)
            .expect("read");
        std::hint::black_box(got);
    }
    println!("read by tag (100)     {}", rate(n, t.elapsed()));
    let t = Instant::now();
    for i in 0..n {
        let tag = stream(mix(i ^ 0x7777) % streams);
        let got = index.version_seqnums(&tag, 0, 100).expect("read");
        std::hint::black_box(got);
    }
    println!("read by version (100) {}", rate(n, t.elapsed()));
    let t = Instant::now();
    for i in 0..10 * n {
        let tag = stream(mix(i ^ 0x9999) % streams);
        std::hint::black_box(index.next_version(&tag).expect("lookup"));
    }
    println!("next-version lookup   {}", rate(10 * n, t.elapsed()));
    index.close().expect("close");
    drop(index);

    let t = Instant::now();
    let index = Index::open(&dir, b"bench", IndexOptions::default()).expect("reopen");
    index.seqnums(Some(&stream(1)), 0, 10).expect("read");
    println!(
        "reopen                {:>10.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    drop(index);
    println!(
        "disk                  {:>10.1} B/entry",
        disk_bytes(&dir) as f64 / entries as f64
    );
    let _ = std::fs::remove_dir_all(&root);
}
