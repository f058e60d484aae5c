//! Many OS processes on one PostgreSQL log.
//!
//! This test binary runs in two roles. As the parent (the default) it runs
//! the scenarios below one after another, each on a fresh log, starting
//! itself again as child processes (`WEFT_PG_CHILD=<role>`) that open the
//! same log and print what they were acknowledged, one line per fact, on
//! stdout. The parent then reads the log and checks:
//!
//! * `writers` — N processes × M appenders: every acknowledged entry is in
//!   the log exactly once, at its acknowledged seqnum and version; seqnums
//!   dense; versions dense per primary tag.
//! * `races` — conditional appends racing across processes on one stream:
//!   exactly one winner per version, losers told the stream's next version.
//! * `subscriber` — a subscriber in a third process receives exactly the
//!   committed sequence (backlog, then live), no gap, no duplicate.
//! * `kv` — claims (`set_if_absent`) have one winner across processes;
//!   concurrent increments lose nothing; a lease has one holder at a time.
//! * `kill9` — a writer process killed with SIGKILL mid-run: each of its
//!   batches is in the log whole or not at all; every acknowledged batch is
//!   there.
//! * `restart` — the PostgreSQL server restarted (fast shutdown) under two
//!   writer processes that retry `Unavailable`/`Indeterminate` with their
//!   append ids: afterwards every id is in the log exactly once.
//!
//! The server comes from `scripts/postgres.sh` (env `WEFT_TEST_PG_URL`,
//! `WEFT_TEST_PG_RESTART`); without it the binary fails. Every run and
//! wait is bounded.

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

#[path = "support/pg/mod.rs"]
mod pg_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use weft::storage::postgres::{PgLocation, PgStorage};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag, Position};

const ROLE: &str = "WEFT_PG_CHILD";
const LOCATION: &str = "WEFT_PG_CHILD_LOG";
const ARGS: &str = "WEFT_PG_CHILD_ARGS";
/// The longest any child may run.
const CHILD_DEADLINE: Duration = Duration::from_secs(120);

fn tag(s: &str) -> LogTag {
    s.parse().expect("tag")
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(role) = std::env::var(ROLE) {
        runtime.block_on(child(&role));
        return;
    }
    let started = Instant::now();
    let scenarios: [(&str, fn()); 6] = [
        ("writers", writers),
        ("races", races),
        ("subscriber", subscriber),
        ("kv", kv),
        ("kill9", kill9),
        ("restart", restart),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut ran = 0;
    for (name, scenario) in scenarios {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let t = Instant::now();
        scenario();
        ran += 1;
        println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64());
    }
    println!(
        "\ntest result: ok. {ran} passed; 0 failed; finished in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------- parent

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn spawn_child(role: &str, location: &PgLocation, args: &str) -> Child {
    Command::new(std::env::current_exe().expect("own path"))
        .env(ROLE, role)
        .env(LOCATION, location_url(location))
        .env(ARGS, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a child process")
}

fn location_url(location: &PgLocation) -> String {
    let url = pg_support::server_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}log={}", location.log())
}

/// Reads a child's stdout lines in a thread (so a full pipe never blocks
/// it) and returns them once it exits, failing on a bad exit or a child
/// running past the deadline.
fn collect(mut child: Child, expect_success: bool) -> Vec<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let deadline = Instant::now() + CHILD_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a child ran past {CHILD_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines = reader.join().expect("reader thread");
    if expect_success {
        assert!(status.success(), "child failed: {status}");
    }
    lines
}

async fn read_everything(location: &PgLocation) -> Vec<LogEntry> {
    let log = Log::new(pg_support::open(location).await);
    let all = log.read_log(Position::Beginning, 1_000_000).await.unwrap();
    let seqnums: Vec<u64> = all.iter().map(|e| e.seqnum).collect();
    assert_eq!(
        seqnums,
        (0..all.len() as u64).collect::<Vec<_>>(),
        "seqnums are dense"
    );
    let mut next: BTreeMap<&LogTag, u64> = BTreeMap::new();
    for e in &all {
        let v = next.entry(e.primary_tag()).or_default();
        assert_eq!(
            e.stream_version,
            *v,
            "versions of {} are dense",
            e.primary_tag()
        );
        *v += 1;
    }
    log.close().await.unwrap();
    all
}

/// `ack <payload> <seqnum> <version>` lines.
fn acks(lines: &[String]) -> Vec<(String, u64, u64)> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("ack "))
        .map(|l| {
            let mut parts = l.split(' ');
            let payload = parts.next().unwrap().to_owned();
            let seqnum = parts.next().unwrap().parse().unwrap();
            let version = parts.next().unwrap().parse().unwrap();
            (payload, seqnum, version)
        })
        .collect()
}

fn check_acks(all: &[LogEntry], acked: &[(String, u64, u64)]) {
    let mut payloads = BTreeSet::new();
    for e in all {
        assert!(
            payloads.insert(e.data.clone()),
            "{:?} is in the log twice",
            e.data
        );
    }
    for (payload, seqnum, version) in acked {
        let e = all
            .get(*seqnum as usize)
            .unwrap_or_else(|| panic!("acknowledged seqnum {seqnum} is missing"));
        assert_eq!(&e.data[..], payload.as_bytes(), "seqnum {seqnum}");
        assert_eq!(e.stream_version, *version, "version of seqnum {seqnum}");
    }
}

fn writers() {
    let location = pg_support::fresh_location("mp_writers");
    let (procs, appenders, each) = (3, 4, 25);
    let children: Vec<Child> = (0..procs)
        .map(|p| spawn_child("writer", &location, &format!("{p} {appenders} {each}")))
        .collect();
    let mut acked = Vec::new();
    for c in children {
        acked.extend(acks(&collect(c, true)));
    }
    assert_eq!(acked.len(), procs * appenders * each);
    let all = runtime().block_on(read_everything(&location));
    assert_eq!(all.len(), acked.len());
    check_acks(&all, &acked);
    // Entries with a secondary tag are found from it.
    let two_tags = all.iter().filter(|e| e.tags.len() == 2).count();
    assert!(two_tags > 0);
}

fn races() {
    let location = pg_support::fresh_location("mp_races");
    let (procs, rounds) = (3, 20u64);
    let children: Vec<Child> = (0..procs)
        .map(|p| spawn_child("racer", &location, &format!("{p} {rounds}")))
        .collect();
    let mut wins: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for c in children {
        for line in collect(c, true) {
            if let Some(rest) = line.strip_prefix("win ") {
                let (round, who) = rest.split_once(' ').unwrap();
                wins.entry(round.parse().unwrap())
                    .or_default()
                    .push(who.to_owned());
            } else if let Some(rest) = line.strip_prefix("lose ") {
                let (round, next) = rest.split_once(' ').unwrap();
                let (round, next): (u64, u64) = (round.parse().unwrap(), next.parse().unwrap());
                assert!(
                    next > round,
                    "a loser of round {round} was told next {next}"
                );
            }
        }
    }
    for round in 0..rounds {
        assert_eq!(
            wins.get(&round).map(Vec::len),
            Some(1),
            "round {round}: {wins:?}"
        );
    }
    let all = runtime().block_on(read_everything(&location));
    let race: Vec<&LogEntry> = all.iter().filter(|e| e.tags[0] == tag("race")).collect();
    assert_eq!(race.len() as u64, rounds);
    for e in race {
        let who = &wins[&e.stream_version][0];
        assert!(
            std::str::from_utf8(&e.data)
                .unwrap()
                .starts_with(who.as_str())
        );
    }
}

fn subscriber() {
    let location = pg_support::fresh_location("mp_sub");
    let (procs, appenders, each) = (2, 3, 20);
    let total = procs * appenders * each;
    // Some backlog before the subscriber starts.
    let early = spawn_child("writer", &location, "9 1 5");
    let mut acked = acks(&collect(early, true));
    let sub = spawn_child("subscriber", &location, &format!("{}", total + 5));
    std::thread::sleep(Duration::from_millis(300));
    let children: Vec<Child> = (0..procs)
        .map(|p| spawn_child("writer", &location, &format!("{p} {appenders} {each}")))
        .collect();
    for c in children {
        acked.extend(acks(&collect(c, true)));
    }
    let seen: Vec<(u64, String)> = collect(sub, true)
        .iter()
        .filter_map(|l| l.strip_prefix("got "))
        .map(|l| {
            let (s, p) = l.split_once(' ').unwrap();
            (s.parse().unwrap(), p.to_owned())
        })
        .collect();
    let all = runtime().block_on(read_everything(&location));
    check_acks(&all, &acked);
    let expected: Vec<(u64, String)> = all
        .iter()
        .map(|e| (e.seqnum, String::from_utf8(e.data.to_vec()).unwrap()))
        .collect();
    assert_eq!(
        seen, expected,
        "the subscriber saw exactly the committed sequence"
    );
}

fn kv() {
    let location = pg_support::fresh_location("mp_kv");
    let (procs, claims, increments) = (3, 20, 20);
    let children: Vec<Child> = (0..procs)
        .map(|p| spawn_child("kv", &location, &format!("{p} {claims} {increments}")))
        .collect();
    let mut winners: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut lease_holds: Vec<(String, u64, u64)> = Vec::new();
    for c in children {
        for line in collect(c, true) {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[0] {
                "claim" => winners
                    .entry(parts[1].parse().unwrap())
                    .or_default()
                    .push(parts[2].to_owned()),
                "lease" => lease_holds.push((
                    parts[1].to_owned(),
                    parts[2].parse().unwrap(),
                    parts[3].parse().unwrap(),
                )),
                _ => {}
            }
        }
    }
    for k in 0..claims {
        assert_eq!(
            winners.get(&k).map(Vec::len),
            Some(1),
            "claim {k}: {winners:?}"
        );
    }
    runtime().block_on(async {
        let log = Log::new(pg_support::open(&location).await);
        let kv = log.kv(tag("shared")).unwrap();
        let counter = kv.get("counter").await.unwrap().expect("the counter");
        let counter = i64::from_le_bytes(counter[..].try_into().unwrap());
        assert_eq!(counter, (procs * increments) as i64);
        for k in 0..claims {
            let v = kv.get(&format!("claim-{k}")).await.unwrap().unwrap();
            assert_eq!(winners[&k][0].as_bytes(), &v[..]);
        }
    });
    // Lease holds (holder, from_ms, until_ms of the hold, by each holder's
    // clock on this one machine) never overlap.
    lease_holds.sort_by_key(|h| h.1);
    assert!(lease_holds.len() >= procs, "every process held the lease");
    for w in lease_holds.windows(2) {
        assert!(w[0].2 <= w[1].1, "two holders at once: {w:?}");
    }
}

fn kill9() {
    for round in 0..2u64 {
        let location = pg_support::fresh_location("mp_kill9");
        let mut child = spawn_child("batcher", &location, "4 5");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // Kill it once it has committed a fair amount, at a moment that
        // varies per round.
        let mut lines = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while lines.len() < 40 + 25 * round as usize {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the batcher acknowledges batches");
            lines.push(line);
        }
        std::thread::sleep(Duration::from_millis(7 * round + 3));
        child.kill().expect("SIGKILL the writer");
        child.wait().unwrap();
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        let acked: BTreeSet<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("batch "))
            .map(str::to_owned)
            .collect();
        let all = runtime().block_on(read_everything(&location));
        // Payloads are `<batch>/<index>/<size>`; group what is there.
        let mut batches: BTreeMap<String, Vec<(u64, u64, u64)>> = BTreeMap::new();
        for e in &all {
            let text = std::str::from_utf8(&e.data).unwrap();
            let mut parts = text.split('/');
            let (b, i, n) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            batches.entry(b.to_owned()).or_default().push((
                e.seqnum,
                i.parse().unwrap(),
                n.parse().unwrap(),
            ));
        }
        for (b, entries) in &batches {
            let n = entries[0].2;
            assert_eq!(entries.len() as u64, n, "batch {b} is whole");
            for (k, (seqnum, i, _)) in entries.iter().enumerate() {
                assert_eq!(*i, k as u64, "batch {b} in order");
                assert_eq!(*seqnum, entries[0].0 + k as u64, "batch {b} contiguous");
            }
        }
        for b in &acked {
            assert!(batches.contains_key(b), "acknowledged batch {b} is missing");
        }
        eprintln!(
            "kill9 round {round}: {} batches acknowledged, {} in the log",
            acked.len(),
            batches.len()
        );
    }
}

fn restart() {
    let restart = std::env::var("WEFT_TEST_PG_RESTART").unwrap_or_else(|_| {
        panic!("WEFT_TEST_PG_RESTART is not set: run under scripts/test.sh (or source scripts/postgres.sh's env file)")
    });
    let location = pg_support::fresh_location("mp_restart");
    let children: Vec<Child> = (0..2)
        .map(|p| spawn_child("retrier", &location, &format!("{p} 3 60")))
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let status = Command::new(&restart)
        .arg("restart")
        .stdout(Stdio::null())
        .status()
        .expect("run the restart script");
    assert!(status.success(), "{restart} restart failed");
    let mut acked = Vec::new();
    let mut retries = 0;
    for c in children {
        let lines = collect(c, true);
        retries += lines.iter().filter(|l| l.starts_with("retry ")).count();
        acked.extend(acks(&lines));
    }
    assert_eq!(acked.len(), 2 * 3 * 60);
    assert!(retries > 0, "the restart interrupted no append");
    let all = runtime().block_on(read_everything(&location));
    assert_eq!(all.len(), acked.len(), "every id exactly once");
    check_acks(&all, &acked);
    eprintln!("restart: {retries} retries, {} entries", all.len());
}

// ----------------------------------------------------------------- child

fn args() -> Vec<u64> {
    std::env::var(ARGS)
        .unwrap_or_default()
        .split_whitespace()
        .map(|a| a.parse().expect("numeric child argument"))
        .collect()
}

async fn child(role: &str) {
    let location: PgLocation = std::env::var(LOCATION)
        .expect("child location")
        .parse()
        .expect("child location parses");
    let log = Log::new(
        PgStorage::open_with(location, pg_support::test_options())
            .await
            .expect("child opens the log"),
    );
    let a = args();
    match role {
        "writer" => child_writer(&log, a[0], a[1], a[2]).await,
        "racer" => child_racer(&log, a[0], a[1]).await,
        "subscriber" => child_subscriber(&log, a[0]).await,
        "kv" => child_kv(&log, a[0], a[1], a[2]).await,
        "batcher" => child_batcher(&log, a[0], a[1]).await,
        "retrier" => child_retrier(&log, a[0], a[1], a[2]).await,
        other => panic!("unknown child role {other}"),
    }
    log.close().await.expect("close");
}

async fn child_writer(log: &Log, p: u64, appenders: u64, each: u64) {
    let tasks: Vec<_> = (0..appenders)
        .map(|a| {
            let log = log.clone();
            tokio::spawn(async move {
                for i in 0..each {
                    let payload = format!("p{p}a{a}i{i}");
                    // Streams shared across processes and private ones;
                    // every third entry also carries a secondary tag.
                    let primary = if i % 2 == 0 {
                        tag("shared")
                    } else {
                        tag(&format!("p{p}"))
                    };
                    let mut req = AppendRequest::new(primary, payload.clone());
                    if i % 3 == 0 {
                        req = req.with_tag(tag(&format!("audit:{a}")));
                    }
                    let r = log.append(req).await.expect("append");
                    println!("ack {payload} {} {}", r.seqnum, r.stream_version);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn child_racer(log: &Log, p: u64, rounds: u64) {
    let race = tag("race");
    let mut version = 0;
    while version < rounds {
        match log
            .append_if(
                AppendRequest::new(race.clone(), format!("p{p} v{version}")),
                version,
            )
            .await
        {
            Ok(r) => {
                println!("win {} p{p}", r.stream_version);
                version = r.stream_version + 1;
            }
            Err(e) if e.kind() == ErrorKind::Conflict => {
                let next = e.conflict_next_version().expect("conflict detail");
                println!("lose {version} {next}");
                version = next;
            }
            Err(e) => panic!("racer: {e}"),
        }
    }
}

async fn child_subscriber(log: &Log, total: u64) {
    let mut sub = log.subscribe_log(Position::Beginning);
    for _ in 0..total {
        let e = tokio::time::timeout(Duration::from_secs(60), sub.next())
            .await
            .expect("the subscriber is fed within 60 s")
            .expect("the subscription goes on")
            .expect("no subscription error");
        println!("got {} {}", e.seqnum, String::from_utf8_lossy(&e.data));
    }
}

async fn child_kv(log: &Log, p: u64, claims: u64, increments: u64) {
    let kv = log.kv(tag("shared")).expect("kv");
    let me = format!("p{p}");
    for k in 0..claims {
        if kv
            .set_if_absent(&format!("claim-{k}"), me.clone())
            .await
            .unwrap()
        {
            println!("claim {k} {me}");
        }
    }
    for _ in 0..increments {
        kv.increment("counter", 1).await.unwrap();
    }
    // The library's lease across processes: take it when free, hold it
    // briefly (renewing once), report the hold, release it.
    let clock = weft::clock::system();
    let mut held = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while held < 2 && Instant::now() < deadline {
        let ttl = Duration::from_secs(10);
        if let Some(mut lease) = weft::kv::Lease::acquire(&kv, "lease", &me, ttl, clock.clone())
            .await
            .unwrap()
        {
            let from = clock.now_ms();
            tokio::time::sleep(Duration::from_millis(15)).await;
            assert!(lease.renew().await.unwrap(), "{me} lost its lease");
            tokio::time::sleep(Duration::from_millis(15)).await;
            let until = clock.now_ms();
            assert!(lease.release().await.unwrap(), "{me} lost its lease");
            println!("lease {me} {from} {until}");
            held += 1;
        }
        tokio::time::sleep(Duration::from_millis(5 + 3 * p)).await;
    }
}

async fn child_batcher(log: &Log, appenders: u64, size: u64) {
    let tasks: Vec<_> = (0..appenders)
        .map(|a| {
            let log = log.clone();
            tokio::spawn(async move {
                for c in 0.. {
                    let name = format!("a{a}c{c}");
                    let batch = (0..size)
                        .map(|i| {
                            AppendRequest::new(tag(&format!("a{a}")), format!("{name}/{i}/{size}"))
                        })
                        .collect();
                    log.append_batch(batch).await.expect("append batch");
                    println!("batch {name}");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn child_retrier(log: &Log, p: u64, appenders: u64, each: u64) {
    let log = Arc::new(log.clone());
    let tasks: Vec<_> = (0..appenders)
        .map(|a| {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                for i in 0..each {
                    let id = format!("p{p}a{a}i{i}");
                    let deadline = Instant::now() + Duration::from_secs(60);
                    loop {
                        let req = AppendRequest::new(tag(&format!("p{p}a{a}")), id.clone())
                            .with_id(id.clone());
                        match log.append(req).await {
                            Ok(r) => {
                                println!("ack {id} {} {}", r.seqnum, r.stream_version);
                                break;
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    ErrorKind::Unavailable | ErrorKind::Indeterminate
                                ) =>
                            {
                                assert!(
                                    Instant::now() < deadline,
                                    "{id}: still failing after 60 s: {e}"
                                );
                                println!("retry {id} {}", e.kind());
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            Err(e) => panic!("{id}: {e}"),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
