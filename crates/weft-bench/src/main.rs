//! `weft-bench`: weft's backends measured side by side with raw baselines
//! and the peer log (opendata-buffer 0.3), all in the same run.
//!
//! Every workload prints, per case, the median of its runs, latency
//! p50/p99 where it measures latency, and the ratio to the baseline it
//! measured in the same process. Results go to `<out>/results.json` and
//! `<out>/results.md`; plots (SVG) to `<out>/*.svg`.
//!
//! `--quick` (or `WEFT_BENCH_QUICK=1`) runs every workload for one short
//! iteration: a smoke test, not a measurement.

mod env;
mod load;
mod plot;
mod report;
mod stats;
mod workloads;

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::Parser;

use crate::report::Report;
use crate::workloads::{Ctx, Workload};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(
    name = "weft-bench",
    about = "Benchmarks of weft against raw baselines and opendata-buffer"
)]
struct Args {
    /// One short iteration of every workload (CI smoke run).
    #[arg(long, env = "WEFT_BENCH_QUICK", value_parser = parse_flag, default_value = "false")]
    quick: bool,
    /// Run only these workloads (comma separated; `pg` is every PostgreSQL
    /// workload); default: all.
    #[arg(long, value_delimiter = ',', value_parser = parse_selection)]
    only: Vec<Selection>,
    /// Skip these workloads (comma separated, groups as in --only).
    #[arg(long, value_delimiter = ',', value_parser = parse_selection)]
    skip: Vec<Selection>,
    /// Where results and plots are written.
    #[arg(long, default_value = "target/bench-results")]
    out: PathBuf,
    /// Directory for the dir-backend workloads (default: a temporary
    /// directory under the system temp dir, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The SeaweedFS env file written by `scripts/seaweedfs.sh start`
    /// (default: $WEFT_S3_ENV_FILE, else `.tmp/seaweedfs/env` found upward
    /// from the current directory). Variables already in the environment
    /// win.
    #[arg(long)]
    s3_env: Option<PathBuf>,
    /// The PostgreSQL env file written by `scripts/postgres.sh start`
    /// (default: $WEFT_TEST_PG_URL, else $WEFT_PG_ENV_FILE).
    #[arg(long)]
    pg_env: Option<PathBuf>,
    /// Internal: run one process of a PostgreSQL workload.
    #[arg(long, hide = true)]
    pg_child: Option<String>,
    /// Number of runs per case whose median is reported (full mode).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Run only the cases whose name contains this text (bucket-write,
    /// serve, pg-append: e.g. "16 proc").
    #[arg(long)]
    case: Option<String>,
    /// List the workloads and exit.
    #[arg(long)]
    list: bool,
    /// Soak: seconds of load (default 600, 30 with --quick).
    #[arg(long)]
    soak_secs: Option<u64>,
    /// Soak: entries per second the appenders are paced to.
    #[arg(long, default_value_t = 3_000)]
    soak_rate: u64,
    /// Internal: open a follower or writer on the soak log at
    /// --probe-prefix, print one JSON line of timings and RSS, and exit
    /// (the soak workload runs this in child processes).
    #[arg(long, hide = true)]
    probe: Option<workloads::soak::ProbeKind>,
    #[arg(long, hide = true)]
    probe_prefix: Option<String>,
    #[arg(long, hide = true)]
    probe_cache: Option<PathBuf>,
    #[arg(long, hide = true)]
    probe_catch_up: bool,
}

fn parse_flag(v: &str) -> std::result::Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" => Ok(false),
        "1" | "true" | "yes" | "on" => Ok(true),
        other => Err(format!("{other:?} is not a boolean")),
    }
}

/// Workloads named on the command line: one by its name, or a group.
#[derive(Clone, Debug)]
struct Selection(Vec<Workload>);

fn parse_selection(v: &str) -> std::result::Result<Selection, String> {
    if v == "pg" {
        let all = Workload::ALL.iter().copied().filter(|w| w.needs_pg());
        return Ok(Selection(all.collect()));
    }
    <Workload as clap::ValueEnum>::from_str(v, false).map(|w| Selection(vec![w]))
}

/// `--probe`: one open of the soak log, measured in a process of its own.
fn run_probe(args: &Args, kind: workloads::soak::ProbeKind) -> Result<()> {
    let prefix = args
        .probe_prefix
        .as_deref()
        .context("--probe needs --probe-prefix")?;
    let s3 = env::S3Env::discover(args.s3_env.as_deref())?;
    let store = s3.store(prefix)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(workloads::soak::probe(
        store,
        kind,
        args.probe_cache.as_deref(),
        args.probe_catch_up,
    ))?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

fn main() -> Result<()> {
    if let Ok(dir) = std::env::var(workloads::dir_soak::REOPEN_ENV) {
        return workloads::dir_soak::reopen_child(&dir);
    }
    let args = Args::parse();
    if let Some(spec) = &args.pg_child {
        return workloads::pg_child::main(spec);
    }
    if let Some(kind) = args.probe {
        return run_probe(&args, kind);
    }
    if args.list {
        for w in Workload::ALL {
            println!("{:<14} {}", w.name(), w.describe());
        }
        return Ok(());
    }
    let only: Vec<Workload> = args.only.iter().flat_map(|s| s.0.clone()).collect();
    let skip: Vec<Workload> = args.skip.iter().flat_map(|s| s.0.clone()).collect();
    let selected: Vec<Workload> = Workload::ALL
        .iter()
        .copied()
        .filter(|w| only.is_empty() || only.contains(w))
        .filter(|w| !skip.contains(w))
        .collect();
    if selected.is_empty() {
        bail!("no workload selected");
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;

    let s3 = if selected.iter().any(|w| w.needs_s3()) {
        Some(env::S3Env::discover(args.s3_env.as_deref())?)
    } else {
        None
    };
    let pg = if selected.iter().any(|w| w.needs_pg()) {
        Some(workloads::PgEnv::discover(args.pg_env.as_deref())?)
    } else {
        None
    };
    let tmp;
    let data_dir = match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            tmp = tempfile::Builder::new().prefix("weft-bench").tempdir()?;
            tmp.path().to_path_buf()
        }
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let runs = if args.quick { 1 } else { args.runs.max(1) };
    let mut ctx = Ctx::new(args.quick, runs, data_dir, s3, pg, args.out.clone());
    ctx.case_filter = args.case.clone();
    ctx.soak = workloads::soak::SoakSettings {
        secs: args.soak_secs,
        rate: args.soak_rate,
    };
    ctx.s3_env_file = args.s3_env.clone();
    let mut report = Report::new(args.quick, runs);
    println!(
        "weft-bench: {} mode, {} run(s) per case, workloads: {}",
        if args.quick { "quick" } else { "full" },
        runs,
        selected
            .iter()
            .map(|w| w.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    // A failing workload is reported and the run goes on, so one bad case
    // (say, the S3 server refusing writes) does not lose the others'
    // results; the exit status still says it failed.
    let mut failed = Vec::new();
    for w in &selected {
        let started = std::time::Instant::now();
        println!("\n== {} — {}", w.name(), w.describe());
        if let Err(e) = rt.block_on(w.run(&mut ctx, &mut report)) {
            eprintln!("   workload {} FAILED: {e:#}", w.name());
            failed.push(w.name());
            rt.block_on(ctx.cleanup());
        }
        println!(
            "   ({} took {:.1}s)",
            w.name(),
            started.elapsed().as_secs_f64()
        );
        report.write(&args.out)?;
    }
    rt.block_on(ctx.cleanup());
    report.write(&args.out)?;
    plot::write_all(&report, &ctx.plots, &args.out)?;
    println!(
        "\nresults: {}/results.md, {}/results.json",
        args.out.display(),
        args.out.display()
    );
    if !failed.is_empty() {
        bail!("workloads failed: {}", failed.join(", "));
    }
    Ok(())
}
