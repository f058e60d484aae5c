//! The two embedded stores weft's log index could use, redb and fjall,
//! measured on the index's own workload; each phase runs in a child
//! process so that its resident memory is the store's alone.
//!
//! `cargo bench -p weft --bench index_stores` (`WEFT_BENCH_QUICK=1` for a
//! smoke run; `WEFT_BENCH_STORES_CASES=entries:streams,...` to pick sizes,
//! `WEFT_BENCH_STORES_CASES=none` for the damage trials alone).
//!
//! The records are those of `weft::index`: per entry a posting `(tag id,
//! seqnum)` for each of its 1–2 tags and a version row `(stream id,
//! version) -> seqnum`; per stream a batch touches, its row `name -> (id,
//! next version)`, looked up before the batch as a sequencer does on a
//! cache miss; one locator per 64 entries. One store transaction per 1000
//! entries, not synced; a synced commit every 100 transactions. Then: the
//! open time after the ingesting process died without closing (the crash
//! case) and after a clean close, reads by (tag, from seqnum) and by (tag,
//! from version) of 100 seqnums, point lookups of a stream's next version,
//! disk bytes per entry, RSS, and what each store does with damaged files
//! (flipped bytes, truncation, garbage): an error, the same answer, a
//! wrong answer, or a panic.

// Benchmarks measure real time: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The environment variable that turns this binary into a child running
/// one phase (a JSON [`Job`]).
const CHILD_ENV: &str = "WEFT_BENCH_INDEX_STORE_JOB";

const BATCH: u64 = 1000;
const SYNC_EVERY: u64 = 100;
const LOCATOR_EVERY: u64 = 64;
const CATEGORIES: u64 = 16;
const CACHE_BYTES: usize = 64 << 20;
/// fjall's memtable limit per keyspace (its default, 64 MiB, times four
/// keyspaces would dwarf the cache both stores are given).
const MEMTABLE_BYTES: u64 = 8 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Kind {
    Redb,
    Fjall,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Redb => "redb 4.6",
            Kind::Fjall => "fjall 3.1",
        }
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
enum Phase {
    /// Build the index, then exit without closing it.
    Ingest,
    /// Open after the crash, read, close cleanly.
    Read,
    /// Open after a clean close.
    Open,
    /// Damage copies of a small index and open/read them.
    Damage,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Job {
    kind: Kind,
    phase: Phase,
    dir: PathBuf,
    streams: u64,
    entries: u64,
}

/// What a child reports (fields unused by a phase stay zero).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Outcome {
    secs: f64,
    rss_mib: f64,
    hwm_mib: f64,
    tag_reads: Vec<f64>,
    version_reads: Vec<f64>,
    lookups: Vec<f64>,
    disk_bytes: u64,
    damage: HashMap<String, u32>,
}

/// Runs one job in this process (the child side). Prints the outcome as
/// one JSON line.
fn child(spec: &str) -> Result<()> {
    let job: Job = serde_json::from_str(spec)?;
    let out = match job.phase {
        Phase::Ingest => ingest(&job)?,
        Phase::Read => read(&job)?,
        Phase::Open => open_only(&job)?,
        Phase::Damage => damage(&job)?,
    };
    println!("{}", serde_json::to_string(&out)?);
    if matches!(job.phase, Phase::Ingest) {
        // Leave without closing the store: the next open is a crash
        // recovery, as after a killed process.
        std::process::exit(0);
    }
    Ok(())
}

fn run_child(job: &Job) -> Result<Outcome> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .env(CHILD_ENV, serde_json::to_string(job)?)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "child {:?} {:?} failed: {}",
            job.kind,
            job.phase,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    Ok(serde_json::from_str(line)?)
}

/// Current and peak resident set size in MiB (`VmRSS`, `VmHWM`).
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
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

fn latency(micros: &[f64]) -> String {
    let mut v = micros.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        v.get(((v.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let total: f64 = v.iter().sum::<f64>() / 1e6;
    format!(
        "{:>9.0}/s  p50 {:>6.1} µs  p99 {:>7.1} µs",
        v.len() as f64 / total.max(1e-9),
        q(0.5),
        q(0.99)
    )
}

fn main() -> Result<()> {
    if let Ok(job) = std::env::var(CHILD_ENV) {
        return child(&job);
    }
    let quick = std::env::var_os("WEFT_BENCH_QUICK").is_some();
    let cases: Vec<(u64, u64)> = match std::env::var("WEFT_BENCH_STORES_CASES") {
        Ok(text) => text
            .split(',')
            .filter_map(|c| {
                let (e, s) = c.split_once(':')?;
                Some((e.trim().parse().ok()?, s.trim().parse().ok()?))
            })
            .collect(),
        Err(_) if quick => vec![(100_000, 1_000), (100_000, 100_000)],
        Err(_) => vec![(2_000_000, 1_000), (2_000_000, 1_000_000)],
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-index-stores");
    let _ = std::fs::remove_dir_all(&root);
    println!("index stores: redb vs fjall on the log index's workload");
    for (entries, streams) in cases {
        println!("\n{entries} entries over {streams} streams");
        for kind in [Kind::Redb, Kind::Fjall] {
            let dir = root.join(format!("{kind:?}-{entries}-{streams}"));
            let job = |phase| Job {
                kind,
                phase,
                dir: dir.join("store"),
                streams,
                entries,
            };
            let ing = run_child(&job(Phase::Ingest))?;
            let rd = run_child(&job(Phase::Read))?;
            let op = run_child(&job(Phase::Open))?;
            let k = kind.name();
            println!(
                "  {k:<10} ingest            {:>9.0} entries/s  (RSS {:.0} MiB, peak {:.0} MiB)",
                entries as f64 / ing.secs,
                ing.rss_mib,
                ing.hwm_mib
            );
            println!(
                "  {k:<10} open after crash  {:>9.1} ms;  after close {:.1} ms (RSS {:.0} MiB)",
                rd.secs * 1e3,
                op.secs * 1e3,
                op.rss_mib
            );
            println!("  {k:<10} read by tag       {}", latency(&rd.tag_reads));
            println!("  {k:<10} read by version   {}", latency(&rd.version_reads));
            println!("  {k:<10} next-version get  {}", latency(&rd.lookups));
            println!(
                "  {k:<10} disk              {:>9.1} B/entry  (RSS after reads {:.0} MiB)",
                rd.disk_bytes as f64 / entries as f64,
                rd.rss_mib
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    println!("\ndamaged stores (60 damaged copies each: open, then read everything)");
    for kind in [Kind::Redb, Kind::Fjall] {
        let dir = root.join(format!("{kind:?}-damage"));
        let out = run_child(&Job {
            kind,
            phase: Phase::Damage,
            dir: dir.clone(),
            streams: 1000,
            entries: 20_000,
        })?;
        let mut outcomes: Vec<_> = out.damage.iter().collect();
        outcomes.sort();
        let text = outcomes
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!("  {:<10} {text}", kind.name());
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

// ---------------------------------------------------------------- workload

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Entry `i`: its stream, and its secondary (category) tag if any.
fn entry(i: u64, streams: u64) -> (u64, Option<u64>) {
    let r = mix(i);
    let stream = r % streams;
    let secondary = (r >> 40) & 1 == 1;
    (
        stream,
        secondary.then_some(streams + (r >> 48) % CATEGORIES),
    )
}

fn stream_name(id: u64) -> String {
    format!("orders:customer-{id}")
}

/// One transaction's records.
#[derive(Default)]
struct Batch {
    postings: Vec<(u64, u64)>,
    versions: Vec<(u64, u64, u64)>,
    streams: Vec<(String, u64, u64)>,
    locators: Vec<(u64, u64, u32)>,
}

enum Store {
    Redb(redb::Database),
    Fjall(FjallStore),
}

struct FjallStore {
    db: fjall::Database,
    postings: fjall::Keyspace,
    versions: fjall::Keyspace,
    streams: fjall::Keyspace,
    locators: fjall::Keyspace,
}

const POSTINGS: redb::TableDefinition<(u64, u64), ()> = redb::TableDefinition::new("postings");
const VERSIONS: redb::TableDefinition<(u64, u64), u64> = redb::TableDefinition::new("versions");
const STREAMS: redb::TableDefinition<&str, (u64, u64)> = redb::TableDefinition::new("streams");
const LOCATORS: redb::TableDefinition<u64, (u64, u32)> = redb::TableDefinition::new("locators");

fn key2(a: u64, b: u64) -> [u8; 16] {
    let mut k = [0; 16];
    k[..8].copy_from_slice(&a.to_be_bytes());
    k[8..].copy_from_slice(&b.to_be_bytes());
    k
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl Store {
    fn open(kind: Kind, dir: &Path) -> Result<Store> {
        Ok(match kind {
            Kind::Redb => {
                std::fs::create_dir_all(dir)?;
                let db = redb::Database::builder()
                    .set_cache_size(CACHE_BYTES)
                    .create(dir.join("index.redb"))?;
                Store::Redb(db)
            }
            Kind::Fjall => {
                let db = fjall::Database::builder(dir)
                    .cache_size(CACHE_BYTES as u64)
                    .max_journaling_size(64 << 20)
                    .open()?;
                let ks = |name| {
                    db.keyspace(name, || {
                        fjall::KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES)
                    })
                };
                Store::Fjall(FjallStore {
                    postings: ks("postings")?,
                    versions: ks("versions")?,
                    streams: ks("streams")?,
                    locators: ks("locators")?,
                    db,
                })
            }
        })
    }

    fn apply(&self, batch: &Batch, durable: bool) -> Result<()> {
        match self {
            Store::Redb(db) => {
                let mut txn = db.begin_write()?;
                txn.set_quick_repair(true);
                if !durable {
                    txn.set_durability(redb::Durability::None)?;
                }
                {
                    let mut t = txn.open_table(POSTINGS)?;
                    for &(tag, s) in &batch.postings {
                        t.insert((tag, s), ())?;
                    }
                    let mut t = txn.open_table(VERSIONS)?;
                    for &(id, v, s) in &batch.versions {
                        t.insert((id, v), s)?;
                    }
                    let mut t = txn.open_table(STREAMS)?;
                    for (name, id, next) in &batch.streams {
                        t.insert(name.as_str(), (*id, *next))?;
                    }
                    let mut t = txn.open_table(LOCATORS)?;
                    for &(s, seg, off) in &batch.locators {
                        t.insert(s, (seg, off))?;
                    }
                }
                txn.commit()?;
            }
            Store::Fjall(f) => {
                let mut b = f.db.batch();
                for &(tag, s) in &batch.postings {
                    b.insert(&f.postings, key2(tag, s), []);
                }
                for &(id, v, s) in &batch.versions {
                    b.insert(&f.versions, key2(id, v), s.to_be_bytes());
                }
                for (name, id, next) in &batch.streams {
                    b.insert(&f.streams, name.as_bytes(), key2(*id, *next));
                }
                for &(s, seg, off) in &batch.locators {
                    let mut v = [0; 12];
                    v[..8].copy_from_slice(&seg.to_be_bytes());
                    v[8..].copy_from_slice(&off.to_be_bytes());
                    b.insert(&f.locators, s.to_be_bytes(), v);
                }
                b.commit()?;
                if durable {
                    f.db.persist(fjall::PersistMode::SyncData)?;
                }
            }
        }
        Ok(())
    }

    fn stream(&self, name: &str) -> Result<Option<(u64, u64)>> {
        Ok(match self {
            Store::Redb(db) => {
                use redb::ReadableDatabase;
                let txn = db.begin_read()?;
                let t = match txn.open_table(STREAMS) {
                    Ok(t) => t,
                    Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                t.get(name)?.map(|g| g.value())
            }
            Store::Fjall(f) => f
                .streams
                .get(name.as_bytes())?
                .map(|v| (u64_at(&v, 0), u64_at(&v, 8))),
        })
    }

    /// Up to `max` seqnums of postings (or versions) of `id` from `from`.
    fn range(&self, versions: bool, id: u64, from: u64, max: usize) -> Result<Vec<u64>> {
        let mut out = Vec::with_capacity(max);
        match self {
            Store::Redb(db) => {
                use redb::ReadableDatabase;
                let txn = db.begin_read()?;
                if versions {
                    let t = txn.open_table(VERSIONS)?;
                    for row in t.range((id, from)..=(id, u64::MAX))?.take(max) {
                        out.push(row?.1.value());
                    }
                } else {
                    let t = txn.open_table(POSTINGS)?;
                    for row in t.range((id, from)..=(id, u64::MAX))?.take(max) {
                        out.push(row?.0.value().1);
                    }
                }
            }
            Store::Fjall(f) => {
                let ks = if versions { &f.versions } else { &f.postings };
                for g in ks.range(key2(id, from)..=key2(id, u64::MAX)).take(max) {
                    let (k, v) = g.into_inner()?;
                    out.push(if versions {
                        u64_at(&v, 0)
                    } else {
                        u64_at(&k, 8)
                    });
                }
            }
        }
        Ok(out)
    }

    fn count_all(&self) -> Result<u64> {
        Ok(match self {
            Store::Redb(db) => {
                use redb::{ReadableDatabase, ReadableTable};
                let txn = db.begin_read()?;
                let mut n = 0;
                for row in txn.open_table(POSTINGS)?.iter()? {
                    let (k, _) = row?;
                    n += k.value().1 % 7;
                }
                for row in txn.open_table(VERSIONS)?.iter()? {
                    n += row?.1.value() % 7;
                }
                n
            }
            Store::Fjall(f) => {
                let mut n = 0;
                for g in f.postings.iter() {
                    n += u64_at(&g.key()?, 8) % 7;
                }
                for g in f.versions.iter() {
                    n += u64_at(&g.value()?, 0) % 7;
                }
                n
            }
        })
    }
}

fn ingest_into(store: &Store, job: &Job) -> Result<()> {
    let mut i = 0;
    let mut batches = 0u64;
    while i < job.entries {
        let end = (i + BATCH).min(job.entries);
        let mut batch = Batch::default();
        let mut next: HashMap<u64, u64> = HashMap::new();
        for s in i..end {
            let (stream, secondary) = entry(s, job.streams);
            let version = match next.get(&stream) {
                Some(&v) => v,
                None => store
                    .stream(&stream_name(stream))?
                    .map_or(0, |(_, next)| next),
            };
            next.insert(stream, version + 1);
            batch.postings.push((stream, s));
            if let Some(c) = secondary {
                batch.postings.push((c, s));
            }
            batch.versions.push((stream, version, s));
            if s.is_multiple_of(LOCATOR_EVERY) {
                batch
                    .locators
                    .push((s, s / 500_000, (s % 500_000) as u32 * 120));
            }
        }
        batch.streams = next
            .into_iter()
            .map(|(id, v)| (stream_name(id), id, v))
            .collect();
        batches += 1;
        store.apply(&batch, batches.is_multiple_of(SYNC_EVERY))?;
        i = end;
    }
    Ok(())
}

fn ingest(job: &Job) -> Result<Outcome> {
    let store = Store::open(job.kind, &job.dir)?;
    let start = Instant::now();
    ingest_into(&store, job)?;
    let secs = start.elapsed().as_secs_f64();
    let (rss, hwm) = rss_mib();
    // Deliberately not dropped: `child` exits without closing it.
    std::mem::forget(store);
    Ok(Outcome {
        secs,
        rss_mib: rss,
        hwm_mib: hwm,
        ..Outcome::default()
    })
}

fn micros(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

fn read(job: &Job) -> Result<Outcome> {
    let start = Instant::now();
    let store = Store::open(job.kind, &job.dir)?;
    // The first read finishes the open for a store that defers work.
    store.stream(&stream_name(0))?;
    let secs = start.elapsed().as_secs_f64();
    let mut out = Outcome {
        secs,
        ..Outcome::default()
    };
    let n = 3000u64;
    for i in 0..n {
        let r = mix(i ^ 0x5151);
        let id = if i % 10 == 0 {
            job.streams + r % CATEGORIES
        } else {
            r % job.streams
        };
        let from = (r >> 20) % job.entries;
        let t = Instant::now();
        let got = store.range(false, id, from, 100)?;
        out.tag_reads.push(micros(t));
        std::hint::black_box(got);
    }
    for i in 0..n {
        let id = mix(i ^ 0x7777) % job.streams;
        let t = Instant::now();
        let got = store.range(true, id, 0, 100)?;
        out.version_reads.push(micros(t));
        std::hint::black_box(got);
    }
    for i in 0..10 * n {
        let name = stream_name(mix(i ^ 0x9999) % job.streams);
        let t = Instant::now();
        let got = store.stream(&name)?;
        out.lookups.push(micros(t));
        std::hint::black_box(got);
    }
    (out.rss_mib, out.hwm_mib) = rss_mib();
    drop(store);
    out.disk_bytes = disk_bytes(&job.dir);
    Ok(out)
}

fn open_only(job: &Job) -> Result<Outcome> {
    let start = Instant::now();
    let store = Store::open(job.kind, &job.dir)?;
    store.range(false, 0, 0, 100)?;
    let secs = start.elapsed().as_secs_f64();
    let (rss, hwm) = rss_mib();
    Ok(Outcome {
        secs,
        rss_mib: rss,
        hwm_mib: hwm,
        ..Outcome::default()
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), target)?;
        }
    }
    Ok(())
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if std::fs::metadata(&p).is_ok_and(|m| m.len() > 0) {
            out.push(p);
        }
    }
}

/// Opens and fully reads damaged copies of a small index: flipped bytes,
/// a truncated file, a file replaced by garbage.
fn damage(job: &Job) -> Result<Outcome> {
    let pristine = job.dir.join("pristine");
    let expected = {
        let store = Store::open(job.kind, &pristine)?;
        ingest_into(&store, job)?;
        let n = store.count_all()?;
        drop(store);
        n
    };
    std::panic::set_hook(Box::new(|_| {}));
    let mut out = Outcome::default();
    for trial in 0..60u64 {
        let copy = job.dir.join(format!("trial-{trial}"));
        copy_dir(&pristine, &copy)?;
        let mut all = Vec::new();
        files(&copy, &mut all);
        all.sort();
        let r = mix(trial ^ 0xdead);
        let target = &all[(r as usize) % all.len()];
        let mut bytes = std::fs::read(target)?;
        match trial % 3 {
            0 => {
                for k in 0..8 {
                    let at = (mix(r ^ k) as usize) % bytes.len();
                    bytes[at] ^= 1 << (mix(r ^ k ^ 99) % 8);
                }
            }
            1 => bytes.truncate((r as usize) % bytes.len()),
            _ => {
                for (k, b) in bytes.iter_mut().enumerate() {
                    *b = mix(r ^ k as u64) as u8;
                }
            }
        }
        std::fs::write(target, &bytes)?;
        let kind = job.kind;
        let dir = copy.clone();
        let result = std::panic::catch_unwind(move || -> Result<u64> {
            let store = Store::open(kind, &dir)?;
            store.count_all()
        });
        let label = match result {
            Err(_) => "panic",
            Ok(Err(_)) => "error",
            Ok(Ok(n)) if n == expected => "same answer",
            Ok(Ok(_)) => "wrong answer",
        };
        let how = ["flipped bytes", "truncated", "garbage"][(trial % 3) as usize];
        *out.damage.entry(label.to_owned()).or_default() += 1;
        if label == "wrong answer" || label == "panic" {
            let file = target.file_name().map(|f| f.to_string_lossy().into_owned());
            *out.damage
                .entry(format!("{label} ({how} {})", file.unwrap_or_default()))
                .or_default() += 1;
        }
        let _ = std::fs::remove_dir_all(&copy);
    }
    let _ = std::panic::take_hook();
    Ok(out)
}
