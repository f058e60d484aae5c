//! PostgreSQL workloads: many writer processes on one log, each case
//! against a baseline measured in the same run on the same server.
//!
//! * `pg-append` — 1, 4 and 16 OS processes × 8 closed-loop appenders of
//!   128 B entries (1 tag, and 2 tags: a stream and a shared tag; then
//!   `append_if` on each appender's own stream), against the same
//!   processes and appenders doing bare batched `INSERT` + COMMIT of rows
//!   of the same size (see `pg_child.rs`), and against the *floor*: the
//!   same batcher running the leanest transaction that numbers densely in
//!   commit order (one waited-for lock per group, rows shaped like weft's
//!   entries). The floor says how much of the bare INSERT any such design
//!   can keep on this machine; weft's gap to the floor is its own cost.
//! * `pg-lag` — a subscriber in its own process: the time from the append
//!   call in a writer process to delivery on a live subscription, against
//!   the writers' own append latency.
//!
//! Every process is a child `weft-bench --pg-child SPEC`; the parent
//! starts them all, waits until each is connected, and starts them
//! together.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use weft::storage::postgres::{PgLocation, PgStorage};
use weft::{AppendRequest, Log, LogTag};

use super::Ctx;
use super::pg_child::{BASELINE_TABLE, ChildResult, ChildSpec, END_TAG, FLOOR_SCHEMA, Role};
use crate::report::{Report, Row};
use crate::stats::Samples;

const RECORD: usize = 128;
const APPENDERS: usize = 8;

/// Where the server is: `WEFT_TEST_PG_URL`, from the environment or the
/// env file `scripts/postgres.sh start` writes.
#[derive(Clone, Debug)]
pub struct PgEnv {
    pub url: String,
    /// The postmaster's PID (`WEFT_TEST_PG_PID`), when the server runs on
    /// this machine: the cases then report the server's CPU per entry.
    pub pid: Option<u32>,
}

impl PgEnv {
    /// Reads `WEFT_TEST_PG_URL` from the environment, else from `file`.
    pub fn discover(file: Option<&std::path::Path>) -> Result<PgEnv> {
        const HINT: &str =
            "start the server with scripts/postgres.sh start (or run scripts/bench.sh)";
        if let Ok(url) = std::env::var("WEFT_TEST_PG_URL")
            && !url.is_empty()
        {
            let pid = std::env::var("WEFT_TEST_PG_PID")
                .ok()
                .and_then(|p| p.parse().ok());
            return Ok(PgEnv { url, pid });
        }
        let file = file
            .map(|p| p.to_path_buf())
            .or_else(|| std::env::var_os("WEFT_PG_ENV_FILE").map(Into::into))
            .with_context(|| format!("WEFT_TEST_PG_URL is not set: {HINT}"))?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("read {}: {HINT}", file.display()))?;
        let (mut url, mut pid) = (None, None);
        for line in text.lines() {
            let line = line.trim().trim_start_matches("export ");
            if let Some(u) = line.strip_prefix("WEFT_TEST_PG_URL=") {
                url = Some(u.trim_matches('"').to_string());
            }
            if let Some(p) = line.strip_prefix("WEFT_TEST_PG_PID=") {
                pid = p.trim_matches('"').parse().ok();
            }
        }
        match url {
            Some(url) => Ok(PgEnv { url, pid }),
            None => bail!("{} sets no WEFT_TEST_PG_URL: {HINT}", file.display()),
        }
    }
}

/// One case's processes, all of one role except an optional subscriber.
struct Case {
    specs: Vec<ChildSpec>,
}

/// What a case's processes measured together.
struct Measured {
    entries_per_s: f64,
    /// Acknowledged appends (rows) of the writer processes.
    ops: u64,
    latency: Samples,
    conflicts: u64,
    /// The subscriber's lag samples, when the case had one.
    lag: Samples,
    /// The server's counters of the log (weft cases).
    rounds: Rounds,
    /// CPU seconds the server used during the case (all its processes),
    /// when its PID is known.
    server_cpu_s: f64,
    /// CPU seconds the writer processes used from `go` to their results.
    client_cpu_s: f64,
}

/// The `utime + stime + cutime + cstime` of `/proc/PID/stat`, in seconds,
/// and the parent PID.
fn proc_cpu(pid: &str) -> Option<(u32, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After "pid (comm) ": state, ppid, ... utime is the 14th field.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split(' ').collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let ticks: f64 = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<f64>().ok())
        .sum::<Option<f64>>()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((ppid, ticks / hz))
}

/// CPU seconds the PostgreSQL server `postmaster` has used so far: its own,
/// its exited children's (reaped into its `cutime`/`cstime`) and its live
/// children's (backends, background workers); and how many children live.
fn server_cpu(postmaster: u32) -> Option<(f64, usize)> {
    let (_, mut total) = proc_cpu(&postmaster.to_string())?;
    let mut children = 0;
    for dir in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = dir.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some((ppid, cpu)) = proc_cpu(pid)
            && ppid == postmaster
        {
            total += cpu;
            children += 1;
        }
    }
    Some((total, children))
}

/// A running child process and its output lines.
struct Proc {
    role: Role,
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Proc {
    fn spawn(spec: &ChildSpec) -> Result<Proc> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg("--pg-child")
            .arg(serde_json::to_string(spec)?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("spawn a --pg-child process")?;
        let stdout = child.stdout.take().context("child stdout")?;
        Ok(Proc {
            role: spec.role,
            child,
            lines: BufReader::new(stdout).lines(),
        })
    }

    async fn line(&mut self, within: Duration) -> Result<String> {
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .context("a child did not answer in time")??;
        line.context("a child exited early")
    }

    async fn go(&mut self) -> Result<()> {
        let stdin = self.child.stdin.as_mut().context("child stdin")?;
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    async fn finish(mut self) -> Result<ChildResult> {
        let line = self.line(Duration::from_secs(300)).await?;
        let status = self.child.wait().await?;
        if !status.success() {
            bail!("a child failed ({status})");
        }
        serde_json::from_str(&line).with_context(|| format!("parse a child's result {line:?}"))
    }
}

impl Case {
    /// Runs the processes together; `end` appends the subscriber's stop
    /// entry once the writers are done.
    async fn run(&self, end: Option<&Log>, server: Option<u32>) -> Result<Measured> {
        let mut procs = Vec::new();
        for spec in &self.specs {
            procs.push(Proc::spawn(spec)?);
        }
        for p in procs.iter_mut() {
            let line = p.line(Duration::from_secs(120)).await?;
            if line != "ready" {
                bail!("a child said {line:?} instead of ready");
            }
        }
        let server_before = server.and_then(server_cpu);
        for p in procs.iter_mut() {
            p.go().await?;
        }
        let mut results: Vec<(Role, ChildResult)> = Vec::new();
        let mut subscriber = None;
        for p in procs {
            if p.role == Role::Subscriber {
                subscriber = Some(p);
                continue;
            }
            results.push((p.role, p.finish().await?));
        }
        if let Some(p) = subscriber {
            let log = end.context("a subscriber needs the end entry's log")?;
            log.append(AppendRequest::new(LogTag::new(END_TAG)?, "end"))
                .await?;
            results.push((Role::Subscriber, p.finish().await?));
        }
        // The cases' backends end with their processes: wait (bounded)
        // until the server has no more children than before, so their CPU
        // is in the postmaster's reaped total.
        let mut server_cpu_s = f64::NAN;
        if let (Some(pid), Some((before, children))) = (server, server_before) {
            for _ in 0..100 {
                match server_cpu(pid) {
                    Some((now, left)) if left <= children => {
                        server_cpu_s = now - before;
                        break;
                    }
                    Some((now, _)) => server_cpu_s = now - before,
                    None => break,
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let mut m = Measured {
            entries_per_s: 0.0,
            ops: 0,
            latency: Samples::new(),
            conflicts: 0,
            lag: Samples::new(),
            rounds: Rounds::default(),
            server_cpu_s,
            client_cpu_s: 0.0,
        };
        let (mut ops, mut elapsed_ms) = (0u64, 0f64);
        for (role, r) in results {
            let samples = if role == Role::Subscriber {
                &mut m.lag
            } else {
                ops += r.ops;
                m.client_cpu_s += r.cpu_ms / 1e3;
                elapsed_ms = elapsed_ms.max(r.elapsed_ms);
                m.conflicts += r.conflicts;
                &mut m.latency
            };
            for ms in r.latency_ms {
                samples.push(Duration::from_secs_f64(ms / 1e3));
            }
        }
        m.entries_per_s = ops as f64 / (elapsed_ms / 1e3).max(1e-9);
        m.ops = ops;
        Ok(m)
    }
}

/// A fresh log (schema) for one case, created before its processes start.
async fn fresh_log(env: &PgEnv, ctx: &mut Ctx, name: &str) -> Result<(String, Log)> {
    let log_name = ctx.fresh_name(name);
    let url = format!("{}?log={log_name}", env.url);
    let location: PgLocation = url.parse()?;
    let log = Log::new(PgStorage::open_with(location, super::pg_child::options()).await?);
    Ok((url, log))
}

async fn admin(env: &PgEnv) -> Result<tokio_postgres::Client> {
    let (client, connection) = env
        .url
        .parse::<tokio_postgres::Config>()?
        .connect(tokio_postgres::NoTls)
        .await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Where a case's time went, from the server's own counters of the log's
/// functions (`pg_stat_user_functions`, on with `track_functions = pl`,
/// which [`track_functions`] sets for the database) and tables.
#[derive(Clone, Copy, Debug, Default)]
struct Rounds {
    /// Entries in the log.
    entries: f64,
    /// Append groups sent (calls of `append` and `append_group`).
    groups: f64,
    /// Groups staged, i.e. not numbered by their own call.
    staged: f64,
    /// Numbering rounds (calls of `number` and of `number_own`, a lone
    /// caller's round), empty ones included.
    rounds: f64,
    /// Time inside them, in ms (all rounds).
    number_ms: f64,
    /// Calls of `outcome_of` and `outcomes_of` (the one call per round
    /// that collects all of a process's staged groups) and the time in
    /// them, ms.
    outcome_calls: f64,
    outcome_ms: f64,
}

impl Rounds {
    fn add(&mut self, o: &Rounds) {
        self.entries += o.entries;
        self.groups += o.groups;
        self.staged += o.staged;
        self.rounds += o.rounds;
        self.number_ms += o.number_ms;
        self.outcome_calls += o.outcome_calls;
        self.outcome_ms += o.outcome_ms;
    }

    fn describe(&self) -> String {
        let per = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        format!(
            "{:.1} entries/group, {:.1} entries/round, {:.0}% of groups staged, {:.2} ms in number() per round, {:.2} outcome calls/group, {:.1} ms per outcome call",
            per(self.entries, self.groups),
            per(self.entries, self.rounds),
            100.0 * per(self.staged, self.groups),
            per(self.number_ms, self.rounds),
            per(self.outcome_calls, self.groups),
            per(self.outcome_ms, self.outcome_calls),
        )
    }
}

/// Turns on the per-function counters for new sessions of the database.
async fn track_functions(env: &PgEnv) -> Result<()> {
    admin(env)
        .await?
        .batch_execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET track_functions = pl', current_database()); END $$")
        .await
        .context("turn on track_functions (the bench's role must be a superuser)")?;
    Ok(())
}

/// The counters of the log at `url`, once its processes are gone (a
/// backend reports its counters when its session ends).
async fn rounds_of(env: &PgEnv, url: &str) -> Result<Rounds> {
    let location: PgLocation = url.parse()?;
    let schema = location.log().to_string();
    let client = admin(env).await?;
    let query = format!(
        r#"SELECT (SELECT next_seqnum::float8 FROM "{schema}".head),
             coalesce((SELECT sum(calls)::float8 FROM pg_stat_user_functions
                        WHERE schemaname = $1 AND funcname IN ('append', 'append_group')), 0),
             coalesce((SELECT n_tup_ins::float8 FROM pg_stat_user_tables
                        WHERE schemaname = $1 AND relname = 'staged'), 0),
             coalesce((SELECT sum(calls)::float8 FROM pg_stat_user_functions
                        WHERE schemaname = $1 AND funcname IN ('number', 'number_own')), 0),
             coalesce((SELECT sum(total_time) FROM pg_stat_user_functions
                        WHERE schemaname = $1 AND funcname IN ('number', 'number_own')), 0),
             coalesce((SELECT sum(calls)::float8 FROM pg_stat_user_functions
                        WHERE schemaname = $1 AND funcname IN ('outcome_of', 'outcomes_of')), 0),
             coalesce((SELECT sum(total_time) FROM pg_stat_user_functions
                        WHERE schemaname = $1 AND funcname IN ('outcome_of', 'outcomes_of')), 0)"#
    );
    let mut last: Option<Rounds> = None;
    // The exiting backends' reports arrive shortly after the children
    // exit: read until two reads a little apart agree (bounded).
    for _ in 0..20 {
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await?;
        let r = client.query_one(&query, &[&schema]).await?;
        let now = Rounds {
            entries: r.get(0),
            groups: r.get(1),
            staged: r.get(2),
            rounds: r.get(3),
            number_ms: r.get(4),
            outcome_calls: r.get(5),
            outcome_ms: r.get(6),
        };
        if let Some(prev) = last
            && prev.groups == now.groups
            && prev.rounds == now.rounds
            && prev.staged == now.staged
        {
            return Ok(now);
        }
        last = Some(now);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(last.unwrap_or_default())
}

/// Drops what a case created, so the server's disk does not fill up.
async fn drop_log(env: &PgEnv, url: &str) -> Result<()> {
    let location: PgLocation = url.parse()?;
    admin(env)
        .await?
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            location.log()
        ))
        .await?;
    Ok(())
}

fn specs(
    role: Role,
    url: &str,
    procs: usize,
    tags: usize,
    conditional: bool,
    duration: Duration,
) -> Vec<ChildSpec> {
    (0..procs)
        .map(|index| ChildSpec {
            role,
            url: url.to_string(),
            appenders: APPENDERS,
            tags,
            conditional,
            record: RECORD,
            duration_ms: duration.as_millis() as u64,
            index,
        })
        .collect()
}

async fn weft_case(
    env: &PgEnv,
    ctx: &mut Ctx,
    procs: usize,
    tags: usize,
    conditional: bool,
    duration: Duration,
) -> Result<Measured> {
    let (url, log) = fresh_log(env, ctx, "append").await?;
    let m = Case {
        specs: specs(Role::Weft, &url, procs, tags, conditional, duration),
    }
    .run(None, env.pid)
    .await;
    log.close().await?;
    let rounds = rounds_of(env, &url).await;
    drop_log(env, &url).await?;
    let mut m = m?;
    m.rounds = rounds?;
    Ok(m)
}

async fn baseline_case(env: &PgEnv, procs: usize, duration: Duration) -> Result<Measured> {
    let client = admin(env).await?;
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {BASELINE_TABLE}; \
             CREATE TABLE {BASELINE_TABLE} (id bigserial PRIMARY KEY, data bytea NOT NULL)"
        ))
        .await?;
    let m = Case {
        specs: specs(Role::Baseline, &env.url, procs, 1, false, duration),
    }
    .run(None, env.pid)
    .await;
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {BASELINE_TABLE}"))
        .await?;
    m
}

/// The floor's tables and function (see `pg_child.rs`): `entries` has the
/// columns and indexes of a weft log's, `number` takes one group under a
/// waited-for transaction lock and numbers it (seqnums, per-stream
/// versions) in one statement.
fn floor_schema() -> String {
    let s = FLOOR_SCHEMA;
    format!(
        r#"
DROP SCHEMA IF EXISTS {s} CASCADE;
CREATE SCHEMA {s};
CREATE TABLE {s}.head (id int PRIMARY KEY, next_seqnum bigint NOT NULL) WITH (fillfactor = 10);
INSERT INTO {s}.head VALUES (1, 0);
CREATE TABLE {s}.streams (tag text PRIMARY KEY, next_version bigint NOT NULL) WITH (fillfactor = 50);
CREATE TABLE {s}.entries (seqnum bigint PRIMARY KEY, primary_tag text NOT NULL,
    version bigint NOT NULL, tags text[] NOT NULL, data bytea NOT NULL, ts bigint NOT NULL,
    append_id text);
CREATE UNIQUE INDEX ON {s}.entries (primary_tag, version);
CREATE INDEX ON {s}.entries (primary_tag, seqnum);
CREATE UNIQUE INDEX ON {s}.entries (append_id) WHERE append_id IS NOT NULL;
CREATE FUNCTION {s}.number(p_tags text[], p_data bytea[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_next bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('{s}'));
    SELECT h.next_seqnum INTO v_next FROM {s}.head h WHERE h.id = 1 FOR UPDATE;
    WITH u AS (SELECT x.t, x.o, row_number() OVER (PARTITION BY x.t ORDER BY x.o) AS rn
                 FROM unnest(p_tags) WITH ORDINALITY AS x(t, o)),
         c AS (SELECT d.t, coalesce(st.next_version, 0) AS nv, d.cnt
                 FROM (SELECT u.t, count(*) AS cnt FROM u GROUP BY u.t) d
                 LEFT JOIN {s}.streams st ON st.tag = d.t),
         ins AS (INSERT INTO {s}.entries (seqnum, primary_tag, version, tags, data, ts)
                 SELECT v_next + u.o - 1, u.t, c.nv + u.rn - 1, ARRAY[u.t], p_data[u.o],
                        (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                   FROM u JOIN c ON c.t = u.t)
    INSERT INTO {s}.streams AS st (tag, next_version) SELECT c.t, c.nv + c.cnt FROM c
        ON CONFLICT (tag) DO UPDATE SET next_version = excluded.next_version;
    UPDATE {s}.head SET next_seqnum = v_next + cardinality(p_data) WHERE id = 1;
    PERFORM pg_notify('{s}', (v_next + cardinality(p_data))::text);
END
$fn$;
"#
    )
}

async fn floor_case(env: &PgEnv, procs: usize, duration: Duration) -> Result<Measured> {
    let client = admin(env).await?;
    client.batch_execute(&floor_schema()).await?;
    let m = Case {
        specs: specs(Role::Floor, &env.url, procs, 1, false, duration),
    }
    .run(None, env.pid)
    .await;
    let numbered: i64 = client
        .query_one(&format!("SELECT next_seqnum FROM {FLOOR_SCHEMA}.head"), &[])
        .await?
        .get(0);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE"))
        .await?;
    let m = m?;
    // Every acknowledged row was numbered (a floor that lost rows would
    // flatter itself).
    let acknowledged = i64::try_from(m.ops)?;
    if numbered < acknowledged {
        bail!("the floor acknowledged {acknowledged} rows but numbered {numbered}");
    }
    Ok(m)
}

/// One subject's runs of one case.
#[derive(Default, Clone)]
struct Series {
    runs: Vec<f64>,
    latency: Samples,
    conflicts: u64,
    rounds: Rounds,
    ops: u64,
    server_cpu_s: f64,
    client_cpu_s: f64,
}

impl Series {
    fn add(&mut self, m: &Measured) {
        self.runs.push(m.entries_per_s);
        self.latency.extend(&m.latency);
        self.conflicts += m.conflicts;
        self.rounds.add(&m.rounds);
        self.ops += m.ops;
        self.server_cpu_s += m.server_cpu_s;
        self.client_cpu_s += m.client_cpu_s;
    }

    /// Server and client CPU per acknowledged append (row), µs, over all
    /// runs.
    fn cpu(&self, per: &str) -> String {
        let us = |s: f64| s * 1e6 / (self.ops.max(1) as f64);
        format!(
            "server CPU {:.0} µs/{per}, client CPU {:.0} µs/{per}",
            us(self.server_cpu_s),
            us(self.client_cpu_s)
        )
    }
}

pub async fn appends(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    const W: &str = "pg-append";
    let env = ctx.pg()?.clone();
    track_functions(&env).await?;
    let duration = ctx.duration(Duration::from_secs(5));
    let counts: &[usize] = if ctx.quick { &[1, 4] } else { &[1, 4, 16] };
    let case_of = |procs: usize| format!("{procs} proc × {APPENDERS} appenders, {RECORD} B");
    let wanted = |procs: usize| {
        ctx.case_filter
            .as_deref()
            .is_none_or(|f| case_of(procs).contains(f))
    };
    let counts: Vec<usize> = counts.iter().copied().filter(|&p| wanted(p)).collect();
    // Subjects per process count: baseline, 1 tag, 2 tags, conditional,
    // the numbering floor. Baseline and weft runs interleave, so slow
    // phases of the shared machine hit both alike.
    let mut series = vec![vec![Series::default(); 5]; counts.len()];
    for run in 0..ctx.runs {
        for (k, &procs) in counts.iter().enumerate() {
            println!("   run {}: {procs} processes", run + 1);
            series[k][0].add(&baseline_case(&env, procs, duration).await?);
            series[k][4].add(&floor_case(&env, procs, duration).await?);
            series[k][1].add(&weft_case(&env, ctx, procs, 1, false, duration).await?);
            series[k][2].add(&weft_case(&env, ctx, procs, 2, false, duration).await?);
            series[k][3].add(&weft_case(&env, ctx, procs, 1, true, duration).await?);
        }
    }
    for (k, &procs) in counts.iter().enumerate() {
        let case = case_of(procs);
        let s = &series[k];
        let base = report.add(
            Row::new(W, case.clone(), "bare batched INSERT+COMMIT")
                .value(s[0].runs.clone(), "rows/s")
                .latency(s[0].latency.summary())
                .note(s[0].cpu("row")),
        );
        report.add(
            Row::new(W, case.clone(), "floor: one waited lock per group, weft-shaped rows")
                .value(s[4].runs.clone(), "entries/s")
                .latency(s[4].latency.summary())
                .against(&base)
                .note(format!(
                    "the leanest dense numbering in commit order; no staging, conditions, ids or outcomes; {}",
                    s[4].cpu("entry")
                )),
        );
        let subjects = [
            (1, "weft PgStorage, 1 tag", None),
            (2, "weft PgStorage, 2 tags", None),
            (3, "weft PgStorage, append_if", Some(s[3].conflicts)),
        ];
        for (i, subject, conflicts) in subjects {
            let mut row = Row::new(W, case.clone(), subject)
                .value(s[i].runs.clone(), "entries/s")
                .latency(s[i].latency.summary())
                .against(&base);
            if procs == 16 && i == 1 {
                let ratio = row.ratio.unwrap_or(0.0);
                row = row.target("≥ 0.5 × baseline at 16 processes", ratio >= 0.5);
            }
            let mut note = format!("{}; {}", s[i].rounds.describe(), s[i].cpu("entry"));
            if let Some(c) = conflicts {
                note = format!("{note}; {c} conflicts (own streams: none expected)");
            }
            row = row.note(note);
            report.add(row);
        }
    }
    Ok(())
}

pub async fn lag(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    const W: &str = "pg-lag";
    let env = ctx.pg()?.clone();
    let duration = ctx.duration(Duration::from_secs(5));
    let shapes: [(usize, usize); 2] = [(1, 1), (4, APPENDERS)];
    let mut lags = vec![Samples::new(); shapes.len()];
    let mut commits = vec![Samples::new(); shapes.len()];
    let mut rates = vec![Vec::new(); shapes.len()];
    for _ in 0..ctx.runs {
        for (k, &(procs, appenders)) in shapes.iter().enumerate() {
            let (url, log) = fresh_log(&env, ctx, "lag").await?;
            let mut specs = specs(Role::Weft, &url, procs, 1, false, duration);
            for s in &mut specs {
                s.appenders = appenders;
            }
            let mut subscriber = specs[0].clone();
            subscriber.role = Role::Subscriber;
            specs.push(subscriber);
            let m = Case { specs }.run(Some(&log), env.pid).await;
            log.close().await?;
            drop_log(&env, &url).await?;
            let m = m?;
            lags[k].extend(&m.lag);
            commits[k].extend(&m.latency);
            rates[k].push(m.entries_per_s);
        }
    }
    for (k, &(procs, appenders)) in shapes.iter().enumerate() {
        let case =
            format!("{procs} writer proc × {appenders} appenders, subscriber in another process");
        let base = report.add(
            Row::new(W, case.clone(), "append latency (call to ack)")
                .value(rates[k].clone(), "entries/s")
                .latency(commits[k].summary()),
        );
        let lag = lags[k].summary();
        let mut row = Row::new(W, case, "subscriber lag (call to delivery)")
            .value(vec![lag.map_or(f64::NAN, |l| l.p50)], "ms p50")
            .latency(lag);
        if let (Some(l), Some(b)) = (lag, base.latency) {
            row = row.against_value("append p50", b.p50).note(format!(
                "p99 lag {:.1} ms vs append p99 {:.1} ms",
                l.p99, b.p99
            ));
        }
        report.add(row);
    }
    Ok(())
}
