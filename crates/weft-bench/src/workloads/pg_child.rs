//! One OS process of a PostgreSQL workload (`weft-bench --pg-child SPEC`).
//!
//! The parent starts every process of a case, waits for each to print
//! `ready` (connected, statements prepared), then writes `go` to all of
//! them at once; each runs its appenders for the case's duration and prints
//! one JSON line with what it measured. Roles:
//!
//! * `weft` — `appenders` closed-loop appenders on one `PgStorage` handle
//!   (the process's group commit), unconditional or `append_if`;
//! * `baseline` — the same appenders on a bare batcher: what arrives while
//!   a transaction is in flight goes into the next multi-row
//!   `INSERT ... SELECT unnest($1)` + COMMIT, at most two in flight (its
//!   best setting: bare inserts do not serialise, so a second transaction
//!   overlaps the first's round trip and flush), into a table with a
//!   `bigserial` key;
//! * `floor` — the same batcher, but each transaction is the leanest
//!   dense numbering there is: it waits for one lock, numbers its own
//!   group (seqnums and per-stream versions), and inserts rows shaped like
//!   weft's entries (same indexes) — no staging, no conditions, no append
//!   ids, no outcomes. What any design with dense seqnums in commit order
//!   pays at least, measured in the same run (`pg.rs` creates its tables);
//! * `subscriber` — one subscription on the log from its end; records the
//!   lag of every entry (its payload starts with the append call's wall
//!   clock time) until it sees the parent's `end` entry.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use weft::storage::postgres::{PgLocation, PgOptions, PgStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};

/// What one child process does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildSpec {
    pub role: Role,
    /// `postgres://…?log=NAME`.
    pub url: String,
    pub appenders: usize,
    /// Tags per entry: 1 (a stream) or 2 (a stream and a shared tag).
    pub tags: usize,
    /// `append_if` with the appender's own stream's expected version.
    pub conditional: bool,
    pub record: usize,
    pub duration_ms: u64,
    /// This process's number in its case (names its streams).
    pub index: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Weft,
    Baseline,
    Floor,
    Subscriber,
}

/// What one child measured.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    pub ops: u64,
    pub elapsed_ms: f64,
    pub conflicts: u64,
    /// Per append: call to acknowledgement; per delivered entry
    /// (subscriber): append call to delivery. Milliseconds.
    pub latency_ms: Vec<f64>,
    /// CPU this process used (user + system) from `go` to its result, ms.
    #[serde(default)]
    pub cpu_ms: f64,
}

/// CPU this process has used so far (user + system), in ms.
pub fn own_cpu_ms() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// The table the baseline inserts into.
pub const BASELINE_TABLE: &str = "weft_bench_rows";

/// The schema the `floor` role writes into.
pub const FLOOR_SCHEMA: &str = "weft_bench_floor";

/// The first tag of the entry that tells a subscriber to stop.
pub const END_TAG: &str = "bench_end";

pub fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A payload of `len` bytes (at least 8) starting with the wall clock.
pub fn stamped(len: usize) -> Bytes {
    let mut b = BytesMut::with_capacity(len.max(8));
    b.put_u64_le(wall_us());
    b.resize(len.max(8), 0x5a);
    b.freeze()
}

fn lag_of(data: &[u8]) -> Option<f64> {
    let sent = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
    Some(wall_us().saturating_sub(sent) as f64 / 1e3)
}

/// The handle options every weft process of a case uses.
pub fn options() -> PgOptions {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    PgOptions::default()
        .with_pool_size(env("WEFT_BENCH_PG_POOL", 4))
        .with_max_in_flight(env(
            "WEFT_BENCH_PG_IN_FLIGHT",
            PgOptions::default().max_in_flight,
        ))
}

/// Runs the child described by `spec_json`; prints `ready`, waits for
/// `go` on stdin, prints the result as one JSON line.
pub fn main(spec_json: &str) -> Result<()> {
    let spec: ChildSpec = serde_json::from_str(spec_json).context("parse the child spec")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut result = rt.block_on(run(spec))?;
    result.cpu_ms = cpu_since_go();
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

async fn barrier() -> Result<()> {
    println!("ready");
    let mut line = String::new();
    BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await?;
    if line.trim() != "go" {
        bail!("expected `go` from the parent, got {line:?}");
    }
    if let Ok(mut g) = CPU_AT_GO.lock() {
        *g = Some(own_cpu_ms());
    }
    Ok(())
}

async fn run(spec: ChildSpec) -> Result<ChildResult> {
    match spec.role {
        Role::Weft => run_weft(spec).await,
        Role::Baseline | Role::Floor => run_batched(spec).await,
        Role::Subscriber => run_subscriber(spec).await,
    }
}

/// The process's CPU at `go` (set by [`barrier`]).
static CPU_AT_GO: std::sync::Mutex<Option<f64>> = std::sync::Mutex::new(None);

/// The process's CPU since `go`, ms.
fn cpu_since_go() -> f64 {
    let at_go = CPU_AT_GO
        .lock()
        .map(|g| g.unwrap_or(f64::NAN))
        .unwrap_or(f64::NAN);
    own_cpu_ms() - at_go
}

fn stream(proc_index: usize, appender: usize) -> Result<LogTag> {
    Ok(LogTag::with_key(
        "bench",
        format!("p{proc_index}a{appender}"),
    )?)
}

async fn run_weft(spec: ChildSpec) -> Result<ChildResult> {
    let location: PgLocation = spec.url.parse()?;
    let log = Log::new(PgStorage::open_with(location, options()).await?);
    let shared = LogTag::new("all")?;
    // Warm the pool and the prepared statements outside the measurement.
    log.tip().await?;
    barrier().await?;
    let start = Instant::now();
    let deadline = start + Duration::from_millis(spec.duration_ms);
    let mut tasks = Vec::new();
    for a in 0..spec.appenders {
        let log = log.clone();
        let own = stream(spec.index, a)?;
        let shared = shared.clone();
        let spec = spec.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = ChildResult::default();
            let mut next_version = log.next_version(&own).await?;
            loop {
                let mut request = AppendRequest::new(own.clone(), stamped(spec.record));
                if spec.tags > 1 {
                    request = request.with_tag(shared.clone());
                }
                let t = Instant::now();
                let result = if spec.conditional {
                    log.append_if(request, next_version).await
                } else {
                    log.append(request).await
                };
                match result {
                    Ok(r) => {
                        out.latency_ms.push(t.elapsed().as_secs_f64() * 1e3);
                        out.ops += 1;
                        next_version = r.stream_version + 1;
                    }
                    Err(e) if e.kind() == ErrorKind::Conflict => {
                        out.conflicts += 1;
                        next_version = log.next_version(&own).await?;
                    }
                    Err(e) => return Err(anyhow::Error::from(e)),
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            anyhow::Ok(out)
        }));
    }
    let total = gather(tasks, start).await?;
    log.close().await?;
    Ok(total)
}

async fn gather(
    tasks: Vec<tokio::task::JoinHandle<Result<ChildResult>>>,
    start: Instant,
) -> Result<ChildResult> {
    let mut total = ChildResult::default();
    for t in tasks {
        let o = t.await??;
        total.ops += o.ops;
        total.conflicts += o.conflicts;
        total.latency_ms.extend(o.latency_ms);
    }
    total.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(total)
}

/// One row waiting for the baseline's (or the floor's) next transaction.
struct Row {
    /// The appender's stream (the floor numbers per stream; shared, so the
    /// baseline's rows cost no allocation for it).
    tag: Arc<str>,
    data: Bytes,
    done: oneshot::Sender<Result<(), String>>,
}

/// How many rows one baseline transaction carries at most (the handle's
/// default group limit).
const BASELINE_GROUP: usize = 4096;

async fn run_batched(spec: ChildSpec) -> Result<ChildResult> {
    let config: tokio_postgres::Config = spec
        .url
        .split('?')
        .next()
        .unwrap_or_default()
        .parse()
        .context("parse the baseline's URL")?;
    let floor = spec.role == Role::Floor;
    let insert = if floor {
        format!("SELECT {FLOOR_SCHEMA}.number($1::text[], $2::bytea[])")
    } else {
        format!("INSERT INTO {BASELINE_TABLE} (data) SELECT unnest($1::bytea[])")
    };
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let statement = client.prepare(&insert).await?;
        clients.push((client, statement));
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Row>();
    // The batcher: one transaction per connection at a time; what queued
    // meanwhile goes in the next one.
    let batcher = tokio::spawn(async move {
        let (free_tx, mut free_rx) = mpsc::unbounded_channel();
        for c in clients {
            let _ = free_tx.send(Arc::new(c));
        }
        while let Some(first) = rx.recv().await {
            let Some(conn) = free_rx.recv().await else {
                break;
            };
            let mut group = vec![first];
            while group.len() < BASELINE_GROUP {
                match rx.try_recv() {
                    Ok(r) => group.push(r),
                    Err(_) => break,
                }
            }
            let free_tx = free_tx.clone();
            tokio::spawn(async move {
                let (client, statement) = &*conn;
                let rows: Vec<&[u8]> = group.iter().map(|r| &r.data[..]).collect();
                let outcome = if floor {
                    let tags: Vec<&str> = group.iter().map(|r| &*r.tag).collect();
                    client.execute(statement, &[&tags, &rows]).await
                } else {
                    client.execute(statement, &[&rows]).await
                };
                let outcome = outcome.map(|_| ()).map_err(|e| e.to_string());
                for r in group {
                    let _ = r.done.send(outcome.clone());
                }
                let _ = free_tx.send(conn);
            });
        }
    });
    barrier().await?;
    let start = Instant::now();
    let deadline = start + Duration::from_millis(spec.duration_ms);
    let mut tasks = Vec::new();
    for a in 0..spec.appenders {
        let tx = tx.clone();
        let record = spec.record;
        let tag: Arc<str> = stream(spec.index, a)?.to_string().into();
        tasks.push(tokio::spawn(async move {
            let mut out = ChildResult::default();
            loop {
                let (done, wait) = oneshot::channel();
                let t = Instant::now();
                tx.send(Row {
                    tag: tag.clone(),
                    data: stamped(record),
                    done,
                })
                .map_err(|_| anyhow::anyhow!("the batcher stopped"))?;
                wait.await?.map_err(|e| anyhow::anyhow!(e))?;
                out.latency_ms.push(t.elapsed().as_secs_f64() * 1e3);
                out.ops += 1;
                if Instant::now() >= deadline {
                    break;
                }
            }
            anyhow::Ok(out)
        }));
    }
    drop(tx);
    let total = gather(tasks, start).await?;
    batcher.await?;
    Ok(total)
}

async fn run_subscriber(spec: ChildSpec) -> Result<ChildResult> {
    let location: PgLocation = spec.url.parse()?;
    let log = Log::new(PgStorage::open_with(location, options()).await?);
    let mut sub = log.subscribe_log(Position::End);
    let end = LogTag::new(END_TAG)?;
    barrier().await?;
    let start = Instant::now();
    // Bounded: the writers' duration plus a generous drain.
    let limit = Duration::from_millis(spec.duration_ms) + Duration::from_secs(60);
    let mut out = ChildResult::default();
    let mut last_seqnum = None;
    loop {
        let next = tokio::time::timeout(limit.saturating_sub(start.elapsed()), sub.next())
            .await
            .context("the subscriber saw no end entry in time")?;
        let entry = match next {
            Some(e) => e?,
            None => bail!("the subscription ended early"),
        };
        if let Some(prev) = last_seqnum
            && entry.seqnum != prev + 1
        {
            bail!("the subscription skipped from {prev} to {}", entry.seqnum);
        }
        last_seqnum = Some(entry.seqnum);
        if entry.has_tag(&end) {
            break;
        }
        if let Some(lag) = lag_of(&entry.data) {
            out.latency_ms.push(lag);
        }
        out.ops += 1;
    }
    out.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    log.close().await?;
    Ok(out)
}
