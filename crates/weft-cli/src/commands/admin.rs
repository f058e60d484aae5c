//! `weft gc` and `weft snapshot`: present so scripts and `--help` see them,
//! refusing until the replica work brings retention GC and snapshots to the
//! library.

use std::process::ExitCode;

use clap::Args;
use weft::{Error, Result};

/// `weft gc`
#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// The bucket: s3://bucket/prefix, az://container/prefix or
    /// file:///path.
    log: String,
}

/// `weft snapshot`
#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    /// The bucket: s3://bucket/prefix, az://container/prefix or
    /// file:///path.
    log: String,
}

/// Runs `weft gc`.
pub(crate) async fn gc(args: GcArgs) -> Result<ExitCode> {
    Err(Error::unsupported(format!(
        "{}: garbage collection arrives with the read-replica work; nothing was deleted",
        args.log
    )))
}

/// Runs `weft snapshot`.
pub(crate) async fn snapshot(args: SnapshotArgs) -> Result<ExitCode> {
    Err(Error::unsupported(format!(
        "{}: snapshots arrive with the read-replica work; nothing was written",
        args.log
    )))
}
