//! `weft wal dump`: the raw records of every segment a manifest lists, in
//! manifest order — any manifest version, including the upstream buffer's
//! v1 manifest and its `.batch` objects.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;
use weft::Result;

use crate::bucket;
use crate::location::{self, StoreArgs};
use crate::output;

/// `weft wal ...`
#[derive(Debug, Subcommand)]
pub(crate) enum WalCommand {
    /// Print every record of every segment the manifest lists.
    Dump(DumpArgs),
}

/// `weft wal dump`
#[derive(Debug, Args)]
pub(crate) struct DumpArgs {
    /// The bucket: s3://bucket/prefix, az://container/prefix or
    /// file:///path.
    store: String,

    /// Object path of the manifest, relative to the store (the upstream
    /// buffer writes `ingest/manifest`, weft `wal/manifest`).
    #[arg(long, value_name = "PATH")]
    manifest: String,

    /// One JSON object per record and line:
    /// `{"sequence": <entry sequence>, "index": <record index in its segment>, "data": "<base64>"}`.
    #[arg(long)]
    json: bool,
}

/// One record of `wal dump --json`; the field order is part of the format.
#[derive(Debug, Serialize)]
struct RecordLine {
    sequence: u64,
    index: usize,
    data: String,
}

/// Runs `weft wal ...`.
pub(crate) async fn run(command: WalCommand, store_args: &StoreArgs) -> Result<ExitCode> {
    match command {
        WalCommand::Dump(args) => dump(args, store_args).await,
    }
}

/// Prints one entry's segment.
async fn dump_entry(
    store: &std::sync::Arc<dyn object_store::ObjectStore>,
    entry: &weft::format::ManifestEntry,
    args: &DumpArgs,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let (size, segment) = bucket::load_segment(store, &args.manifest, entry).await?;
    if args.json {
        for (index, record) in segment.records.iter().enumerate() {
            output::json(&RecordLine {
                sequence: entry.sequence,
                index,
                data: output::base64(record),
            })?;
        }
    } else {
        bar.suspend(|| {
            output::line(&format!(
                "entry {} at {} ({size} bytes, segment v{}, {:?}, {} records)",
                entry.sequence,
                entry.location,
                segment.version.as_u16(),
                segment.compression,
                segment.records.len()
            ))
        })?;
        for (index, record) in segment.records.iter().enumerate() {
            bar.suspend(|| {
                output::line(&format!(
                    "  [{index}] {} bytes {}",
                    record.len(),
                    output::payload_text(record)
                ))
            })?;
        }
    }
    Ok(())
}

async fn dump(args: DumpArgs, store_args: &StoreArgs) -> Result<ExitCode> {
    let location = location::parse(&args.store)?;
    let store = location::open_store(&location, store_args)?;
    let manifest = bucket::load_manifest(&store, &args.manifest).await?;
    let data = &manifest.data;
    if !args.json {
        output::line(&format!(
            "manifest {} (v{}, {} bytes): epoch {}, next sequence {}, {} entries",
            manifest.path,
            data.version.as_u16(),
            manifest.size,
            data.epoch,
            data.next_sequence,
            bucket::entry_count(data)
        ))?;
    }
    let bar = output::progress(bucket::entry_count(data), "dumping");
    let mut walk = bucket::EntryWalk::new(&store, data);
    while let Some(chunk) = walk.next_chunk().await? {
        for entry in &chunk {
            dump_entry(&store, entry, &args, &bar).await?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(ExitCode::SUCCESS)
}
