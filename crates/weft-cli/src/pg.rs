//! PostgreSQL locations (`postgres://USER@HOST/DB?log=NAME`) for the
//! commands that work on a shared log: append, read, tail, inspect, verify.
//!
//! A PostgreSQL log is opened through its backend for everything, reads
//! included: any number of processes may have it open, so reading never
//! locks a writer out, and `tail` is woven into the log's LISTEN/NOTIFY.

use std::process::ExitCode;

use serde::Serialize;
use weft::storage::postgres::{PgLocation, PgOptions, PgStorage, PgSummary};
use weft::{Log, Result};

use crate::create::Create;
use crate::output;

/// The PostgreSQL location `text` names, if it names one (parsed by
/// [`weft::connect::Location::parse`], like every other location).
pub(crate) fn location(text: &str) -> Option<Result<PgLocation>> {
    match weft::connect::Location::parse(text) {
        Ok(weft::connect::Location::Postgres(pg)) => Some(Ok(*pg)),
        Err(e)
            if text.trim().starts_with("postgres://")
                || text.trim().starts_with("postgresql://") =>
        {
            Some(Err(e))
        }
        _ => None,
    }
}

/// Opens the log at `location`; with [`Create::No`] a missing log is
/// `NotFound`.
///
/// Errors: the backend's open kinds.
pub(crate) async fn open(location: PgLocation, create: Create) -> Result<PgStorage> {
    PgStorage::open_with(location, options(create)).await
}

/// The options a command opens a log with.
fn options(create: Create) -> PgOptions {
    PgOptions::default()
        .with_create_if_missing(create == Create::IfMissing)
        .with_pool_size(2)
        .with_max_in_flight(1)
        .with_op_timeout_ms(10_000)
        .with_statement_timeout_ms(8_000)
}

/// Opens the log at `location` as a [`Log`] (it must exist), reading the
/// log every `poll` when no notification arrives.
pub(crate) async fn open_log(location: PgLocation, poll: std::time::Duration) -> Result<Log> {
    let options = options(Create::No)
        .with_poll_interval_ms(u64::try_from(poll.as_millis()).unwrap_or(u64::MAX).max(1));
    Ok(Log::new(PgStorage::open_with(location, options).await?))
}

/// `inspect --json` for PostgreSQL; the field names are part of the format.
#[derive(Debug, Serialize)]
struct PgReport {
    kind: &'static str,
    location: String,
    #[serde(flatten)]
    summary: PgSummary,
}

/// `weft inspect` of a PostgreSQL log.
pub(crate) async fn inspect(location: PgLocation, json: bool) -> Result<ExitCode> {
    let shown = location.to_string();
    let storage = open(location, Create::No).await?;
    let summary = storage.summary().await;
    let _ = weft::Storage::close(&storage).await;
    let summary = summary?;
    if json {
        output::json(&PgReport {
            kind: "postgres",
            location: shown,
            summary,
        })?;
    } else {
        let live = summary.next_seqnum - summary.first_seqnum;
        output::line(&format!(
            "{shown}: a PostgreSQL log (layout {})",
            summary.layout
        ))?;
        output::line(&format!(
            "  seqnums {}..{} ({live} live entries, {} rows stored)",
            summary.first_seqnum, summary.next_seqnum, summary.stored_rows
        ))?;
        output::line(&format!(
            "  {} streams, {} entries with an append id, {} KV keys",
            summary.streams, summary.append_ids, summary.kv_keys
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `verify --json` for PostgreSQL.
#[derive(Debug, Serialize)]
struct PgFindings {
    location: String,
    ok: bool,
    problems: Vec<String>,
}

/// `weft verify` of a PostgreSQL log: exit 1 when a problem is found.
pub(crate) async fn verify(location: PgLocation, json: bool) -> Result<ExitCode> {
    let shown = location.to_string();
    let storage = open(location, Create::No).await?;
    let problems = storage.verify().await;
    let _ = weft::Storage::close(&storage).await;
    let problems = problems?;
    let ok = problems.is_empty();
    if json {
        output::json(&PgFindings {
            location: shown,
            ok,
            problems,
        })?;
    } else {
        for p in &problems {
            output::line(&format!("problem: {p}"))?;
        }
        output::line(&format!(
            "{shown}: {}",
            if ok {
                "no problems".to_owned()
            } else {
                format!("{} problems", problems.len())
            }
        ))?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::PROBLEM_FOUND)
    })
}
