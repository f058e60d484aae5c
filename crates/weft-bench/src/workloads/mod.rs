//! The workloads and the context they share (settings, the S3 server, the
//! baselines measured once per run, the plots asked for).

mod bucket;
mod dir;
pub mod dir_soak;
mod follower;
mod peer;
mod pg;
pub mod pg_child;
mod raw;
mod replica;
mod serve;
pub mod soak;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;

use crate::env::S3Env;
use crate::plot::Plot;
use crate::report::Report;

pub use pg::PgEnv;
pub use raw::RawS3;

/// A named workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Baselines on the S3 server: PUT/GET/CAS latency, parallel PUT/GET.
    #[value(name = "s3-raw")]
    S3Raw,
    /// Durable small appends at 1/8/64/1024 appenders on the dir backend,
    /// against a bare fsync loop and two peer logs (okaywal, fjall).
    #[value(name = "dir-append")]
    DirAppend,
    /// Large records on the dir backend.
    #[value(name = "dir-large")]
    DirLarge,
    /// Mixed tags with conditional appends on the dir backend.
    #[value(name = "dir-mixed")]
    DirMixed,
    /// Bucket writes (weft Producer vs opendata-buffer Producer) at several
    /// flush intervals, flush sizes and record sizes.
    #[value(name = "bucket-write")]
    BucketWrite,
    /// Replica catch-up vs raw parallel GET; opendata Consumer read-back.
    #[value(name = "replica")]
    Replica,
    /// Follower lag behind a steadily writing primary.
    #[value(name = "follower-lag")]
    FollowerLag,
    /// Many writer processes on one PostgreSQL log vs bare batched INSERT.
    #[value(name = "pg-append")]
    PgAppend,
    /// Subscriber lag across processes on a PostgreSQL log.
    #[value(name = "pg-lag")]
    PgLag,
    /// A bucket log growing at a fixed load; its manifest, memory, commit
    /// latency and open times as it ages.
    #[value(name = "soak")]
    Soak,
    /// A dir log grown to a few GiB, then reopened: RSS and open time.
    #[value(name = "dir-soak")]
    DirSoak,
    /// `weft serve` against the same appends in process; subscribers' lag.
    #[value(name = "serve")]
    Serve,
}

impl Workload {
    pub const ALL: [Workload; 12] = [
        Workload::S3Raw,
        Workload::DirAppend,
        Workload::DirLarge,
        Workload::DirMixed,
        Workload::BucketWrite,
        Workload::Replica,
        Workload::FollowerLag,
        Workload::Soak,
        Workload::DirSoak,
        Workload::PgAppend,
        Workload::PgLag,
        Workload::Serve,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::S3Raw => "s3-raw",
            Workload::DirAppend => "dir-append",
            Workload::DirLarge => "dir-large",
            Workload::DirMixed => "dir-mixed",
            Workload::BucketWrite => "bucket-write",
            Workload::Replica => "replica",
            Workload::FollowerLag => "follower-lag",
            Workload::Soak => "soak",
            Workload::DirSoak => "dir-soak",
            Workload::PgAppend => "pg-append",
            Workload::PgLag => "pg-lag",
            Workload::Serve => "serve",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Workload::S3Raw => "raw S3 PUT/GET/conditional-PUT latency, parallel PUT/GET MiB/s",
            Workload::DirAppend => {
                "durable small appends, 1/8/64 appenders, dir backend vs write+fdatasync"
            }
            Workload::DirLarge => "large records, dir backend vs dd conv=fdatasync",
            Workload::DirMixed => "mixed tags, conditional appends vs unconditional, dir backend",
            Workload::BucketWrite => "bucket writes, weft Producer vs opendata-buffer Producer",
            Workload::Replica => {
                "replica catch-up vs raw parallel GET; opendata Consumer read-back"
            }
            Workload::FollowerLag => "follower lag behind a steadily writing primary",
            Workload::Soak => {
                "bucket log at a fixed load for minutes: commit latency, RSS, manifest size, opens"
            }
            Workload::DirSoak => {
                "a dir log grown to a few GiB (WEFT_BENCH_SOAK_GIB), then reopened: RSS, open time"
            }
            Workload::PgAppend => {
                "1/4/16 writer processes on one PostgreSQL log vs bare batched INSERT+COMMIT"
            }
            Workload::PgLag => "subscriber lag across processes on a PostgreSQL log",
            Workload::Serve => {
                "appends/s through weft serve (HTTP, pipelined session) ÷ in process; 64 subscribers' lag"
            }
        }
    }

    pub fn needs_s3(self) -> bool {
        matches!(
            self,
            Workload::S3Raw
                | Workload::BucketWrite
                | Workload::Replica
                | Workload::FollowerLag
                | Workload::Soak
        )
    }

    pub fn needs_pg(self) -> bool {
        matches!(self, Workload::PgAppend | Workload::PgLag)
    }

    pub async fn run(self, ctx: &mut Ctx, report: &mut Report) -> Result<()> {
        match self {
            Workload::S3Raw => raw::run(ctx, report).await.map(|_| ()),
            Workload::DirAppend => dir::small_appends(ctx, report).await,
            Workload::DirLarge => dir::large_records(ctx, report).await,
            Workload::DirMixed => dir::mixed_tags(ctx, report).await,
            Workload::BucketWrite => bucket::run(ctx, report).await,
            Workload::Replica => replica::run(ctx, report).await,
            Workload::FollowerLag => follower::run(ctx, report).await,
            Workload::Soak => soak::run(ctx, report).await,
            Workload::DirSoak => dir_soak::run(ctx, report).await,
            Workload::PgAppend => pg::appends(ctx, report).await,
            Workload::PgLag => pg::lag(ctx, report).await,
            Workload::Serve => serve::run(ctx, report).await,
        }?;
        ctx.cleanup().await;
        Ok(())
    }
}

/// What every workload shares.
pub struct Ctx {
    pub quick: bool,
    pub runs: usize,
    pub data_dir: PathBuf,
    s3: Option<S3Env>,
    pg: Option<PgEnv>,
    #[allow(dead_code)]
    pub out: PathBuf,
    pub plots: Vec<Plot>,
    pub raw: Option<RawS3>,
    /// Only cases whose name contains this text run (where supported).
    pub case_filter: Option<String>,
    /// Settings of the soak workload.
    pub soak: soak::SoakSettings,
    /// The S3 env file, passed on to probe processes.
    pub s3_env_file: Option<PathBuf>,
    run_prefix: String,
    next_prefix: u64,
}

impl Ctx {
    pub fn new(
        quick: bool,
        runs: usize,
        data_dir: PathBuf,
        s3: Option<S3Env>,
        pg: Option<PgEnv>,
        out: PathBuf,
    ) -> Ctx {
        Ctx {
            quick,
            runs,
            data_dir,
            s3,
            pg,
            out,
            plots: Vec::new(),
            raw: None,
            case_filter: None,
            soak: soak::SoakSettings::default(),
            s3_env_file: None,
            run_prefix: format!("weft-bench/{}", ulid::Ulid::new()),
            next_prefix: 0,
        }
    }

    /// Whether the case named `case` is selected.
    pub fn want(&self, case: &str) -> bool {
        self.case_filter
            .as_ref()
            .is_none_or(|f| case.contains(f.as_str()))
    }

    /// `full` in a full run; a short slice of it in quick mode.
    pub fn duration(&self, full: Duration) -> Duration {
        if self.quick {
            (full / 8).clamp(Duration::from_millis(300), Duration::from_millis(1000))
        } else {
            full
        }
    }

    pub fn s3(&self) -> Result<&S3Env> {
        self.s3
            .as_ref()
            .context("this workload needs the S3 server (see --s3-env)")
    }

    pub fn pg(&self) -> Result<&PgEnv> {
        self.pg
            .as_ref()
            .context("this workload needs the PostgreSQL server (see --pg-env)")
    }

    /// A fresh name (a PostgreSQL schema: lowercase, digits, `_`) for
    /// this run.
    pub fn fresh_name(&mut self, name: &str) -> String {
        self.next_prefix += 1;
        let run = self.run_prefix.rsplit('/').next().unwrap_or("run");
        format!(
            "bench_{}_{name}_{}",
            run.to_ascii_lowercase(),
            self.next_prefix
        )
    }

    /// A store rooted at a fresh, unused prefix of this run.
    pub fn fresh_store(&mut self, name: &str) -> Result<Arc<dyn ObjectStore>> {
        let prefix = self.fresh_prefix(name);
        self.s3()?.store(&prefix)
    }

    /// A fresh, unused prefix of this run (for a store another process
    /// opens too).
    pub fn fresh_prefix(&mut self, name: &str) -> String {
        self.next_prefix += 1;
        format!("{}/{name}-{}", self.run_prefix, self.next_prefix)
    }

    /// A fresh directory under the data dir.
    pub fn fresh_dir(&mut self, name: &str) -> Result<PathBuf> {
        self.next_prefix += 1;
        let d = self.data_dir.join(format!("{name}-{}", self.next_prefix));
        std::fs::create_dir_all(&d)?;
        Ok(d)
    }

    /// The raw S3 baselines, measured now if no workload measured them yet.
    pub async fn raw(&mut self, report: &mut Report) -> Result<RawS3> {
        if let Some(r) = self.raw {
            return Ok(r);
        }
        raw::run(self, report).await
    }

    /// Deletes this run's objects and directories (best effort: a failed
    /// delete only costs disk space).
    pub async fn cleanup(&self) {
        if let Some(s3) = &self.s3
            && let Ok(store) = s3.store("")
        {
            let prefix = object_store::path::Path::from(self.run_prefix.as_str());
            let locations = store.list(Some(&prefix)).map_ok(|m| m.location).boxed();
            let _ = store.delete_stream(locations).try_collect::<Vec<_>>().await;
            s3.reclaim_space().await;
        }
        if let Ok(entries) = std::fs::read_dir(&self.data_dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_dir_all(e.path());
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
