//! The `weft` command: run the demo, append to and read a log, follow it,
//! and inspect, dump and verify what is stored.
//!
//! Every failure ends the process with one line on stderr,
//! `weft: <message> (<kind>)`, and an exit code chosen by the error's kind
//! (see [`exit`]). Commands whose output is data take `--json` and then
//! print machine-readable lines only.
//!
//! Layout: each command and its clap arguments live in [`commands`];
//! [`location`] turns a `LOG` argument into a log or an object
//! store; [`bucket`] reads manifests and segments; [`output`] holds the JSON
//! and progress helpers; [`observe`] sets up tracing and metrics.

#[cfg(test)]
mod args_props;
mod bucket;
mod commands;
mod create;
mod exit;
mod index_cache;
mod interrupt;
mod location;
mod observe;
mod output;
mod pg;
mod remote;
mod seconds;
mod since;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::location::StoreArgs;

/// Global options and the subcommand.
#[derive(Debug, Parser)]
#[command(
    name = "weft",
    version,
    about = "A shared log: run the demo, append, read, tail, inspect and verify weft logs",
    long_about = "A shared log: run the demo, append, read, tail, inspect and verify weft logs.\n\n\
        LOG locations:\n  \
        ./some/dir             a local directory (the embedded `dir` backend)\n  \
        s3://bucket/prefix     an S3-compatible bucket (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,\n                         \
        AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP, or the flags below)\n  \
        az://container/prefix  an Azure Blob container (AZURE_STORAGE_ACCOUNT_NAME,\n                         \
        AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_ENDPOINT, AZURE_ALLOW_HTTP, ...)\n  \
        file:///abs/path       a bucket laid out as files in a local directory (read-only)\n  \
        postgres://USER@HOST/DB?log=NAME\n                         \
        a PostgreSQL log (any number of processes, on any hosts)\n  \
        http://HOST:PORT       a log served by `weft serve` (several, comma-separated: a leader\n                         \
        and its standby; $WEFT_TOKEN, $WEFT_CA_CERT; append, read and tail)",
    after_help = exit::EXIT_CODES_HELP
)]
struct Cli {
    /// More log output on stderr (-v: debug, -vv: trace). RUST_LOG, when
    /// set, takes precedence.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(flatten)]
    store: StoreArgs,

    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run a small order-fulfilment system on a local log, end to end.
    Demo(commands::demo::DemoArgs),
    /// Append one entry (exits 0 only once it is durable).
    Append(commands::append::AppendArgs),
    /// Read entries, in seqnum order.
    Read(commands::read::ReadArgs),
    /// Follow a log: print entries as they are appended, until interrupted.
    Tail(commands::tail::TailArgs),
    /// Show what a log holds: segments or manifest entries, ranges, tags.
    Inspect(commands::inspect::InspectArgs),
    /// Low-level access to a bucket's write-ahead log.
    Wal {
        #[command(subcommand)]
        command: commands::wal::WalCommand,
    },
    /// Read everything and check every checksum and invariant (exit 1 on a
    /// problem).
    Verify(commands::verify::VerifyArgs),
    /// Delete segment and snapshot objects no manifest references any more (after a grace period).
    Gc(commands::admin::GcArgs),
    /// Trim a bucket log through a seqnum: store its state as the snapshot, drop what it supersedes.
    Snapshot(commands::admin::SnapshotArgs),
    /// Drop every entry through a seqnum, on every backend; streams keep their numbering.
    Trim(commands::trim::TrimArgs),
    /// Show or set the log's retention policy (by age, count, size; protected consumers).
    Retention(commands::retention::RetentionArgs),
    /// List the log's named consumer positions.
    Consumers(commands::retention::ConsumersArgs),
    /// Show a stream's start, truncate it before a version or delete it (softly).
    Stream(commands::stream::StreamArgs),
    /// Serve a log over HTTP: JSON API, subscriptions, pipelined appends, web console.
    Serve(commands::serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    observe::init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return exit::report(&weft::Error::io("start the tokio runtime", e)),
    };
    let outcome = runtime.block_on(run(cli));
    // Do not wait for tasks that are parked on I/O (a tail's subscription):
    // the command is over.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match outcome {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    }
}

async fn run(cli: Cli) -> weft::Result<ExitCode> {
    let store = cli.store;
    // A server drains its requests on a signal and exits 0; `tail` stops on
    // one as its normal end; every other command is cut off by one,
    // whatever it is waiting for.
    let cli_command = match cli.command {
        Command::Serve(args) => return commands::serve::run(args, &store).await,
        other => other,
    };
    let writes = match &cli_command {
        Command::Tail(args) => return commands::tail::run(args, &store).await,
        Command::Append(_)
        | Command::Gc(_)
        | Command::Snapshot(_)
        | Command::Trim(_)
        | Command::Retention(_)
        | Command::Stream(_)
        | Command::Demo(_) => true,
        _ => false,
    };
    tokio::select! {
        out = command(cli_command, &store) => out,
        () = interrupt::interrupted() => {
            let what = if writes {
                "interrupted: the outcome of what the command was writing is unknown \
                 (read the log before running it again, or retry an append with its --id)"
            } else {
                "interrupted"
            };
            let _ = writeln!(std::io::stderr(), "weft: {what}");
            Ok(ExitCode::from(interrupt::INTERRUPTED))
        }
    }
}

async fn command(command: Command, store: &StoreArgs) -> weft::Result<ExitCode> {
    match command {
        Command::Demo(args) => commands::demo::run(args, store).await,
        Command::Append(args) => commands::append::run(args, store).await,
        Command::Read(args) => commands::read::run(args, store).await,
        Command::Tail(args) => commands::tail::run(&args, store).await,
        Command::Inspect(args) => commands::inspect::run(args, store).await,
        Command::Wal { command } => commands::wal::run(command, store).await,
        Command::Verify(args) => commands::verify::run(args, store).await,
        Command::Gc(args) => commands::admin::gc(args, store).await,
        Command::Snapshot(args) => commands::admin::snapshot(args, store).await,
        Command::Trim(args) => commands::trim::run(args, store).await,
        Command::Retention(args) => commands::retention::run(args, store).await,
        Command::Consumers(args) => commands::retention::consumers(args, store).await,
        Command::Stream(args) => commands::stream::run(args, store).await,
        Command::Serve(args) => commands::serve::run(args, store).await,
    }
}
