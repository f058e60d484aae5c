//! The report [`check`](super::check::check) returns: what is in a log
//! directory and what is wrong with it. Apart from the check itself so
//! that the parts that fill it in (the check, the index comparison, a
//! follower's own check) need not import each other.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::model::LogTag;

/// One segment file, as [`check`](super::check::check) found it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirSegmentInfo {
    /// The file's name.
    pub file: String,
    /// The seqnum of its first entry (from its name).
    pub first_seqnum: u64,
    /// Its entries (whole batches; `0` when it was not read).
    pub entries: u64,
    /// The file's size in bytes.
    pub bytes: u64,
}

/// One tag, as [`check`](super::check::check) found it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirTagInfo {
    /// The tag.
    pub tag: LogTag,
    /// Live entries carrying it (as primary or secondary tag).
    pub entries: u64,
    /// The latest version of its own stream; `None` when it is nobody's
    /// primary tag.
    pub latest_version: Option<u64>,
}

/// What [`check`](super::check::check) found.
#[derive(Debug)]
#[non_exhaustive]
pub struct DirCheck {
    /// The directory.
    pub path: PathBuf,
    /// The first live seqnum.
    pub first_seqnum: u64,
    /// The seqnum the next entry gets.
    pub next_seqnum: u64,
    /// The last trimmed seqnum; `None` when the log was never trimmed.
    pub trimmed_through: Option<u64>,
    /// Live entries.
    pub entries: u64,
    /// Bytes of segment and KV files read.
    pub bytes: u64,
    /// The segment files, in log order.
    pub segments: Vec<DirSegmentInfo>,
    /// Every tag of a live entry, sorted.
    pub tags: Vec<DirTagInfo>,
    /// KV bucket files read.
    pub kv_buckets: u64,
    /// What makes opening or reading refuse, or what opening would cut.
    pub problems: Vec<String>,
    /// What opening tidies without losing anything.
    pub notes: Vec<String>,
    pub(super) refusal: Option<Error>,
}

impl DirCheck {
    /// A report of `path` that found nothing yet.
    pub(super) fn empty(path: &Path) -> DirCheck {
        DirCheck {
            path: path.to_path_buf(),
            first_seqnum: 0,
            next_seqnum: 0,
            trimmed_through: None,
            entries: 0,
            bytes: 0,
            segments: Vec::new(),
            tags: Vec::new(),
            kv_buckets: 0,
            problems: Vec::new(),
            notes: Vec::new(),
            refusal: None,
        }
    }

    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The error opening or reading the log returns, when they refuse it
    /// (then the counts above are empty).
    pub fn refusal(&self) -> Option<&Error> {
        self.refusal.as_ref()
    }
}
