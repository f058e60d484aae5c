//! Where the command keeps its own log index of each `dir` log it reads.
//!
//! `weft read`, `tail` and `inspect` read a `dir` log through a
//! [`DirFollower`], which cannot use the writer's index (see its docs) and
//! keeps one of its own. Kept in a per-user cache directory, the index
//! outlives the command: the next command on the same log reads only what
//! was appended since, so its cost does not grow with the log. The first
//! command on a log (or one whose cached index is damaged or another
//! log's) builds it from the whole log, once.
//!
//! The cache lives in `$WEFT_INDEX_CACHE` if set (`off`: no cache, a
//! private index per command), else `$XDG_CACHE_HOME/weft/dir-index`, else
//! `$HOME/.cache/weft/dir-index`; one directory per log, named after a
//! hash of the log's canonical path. Nothing removes it: deleting it only
//! costs the next command a rebuild.

use std::path::{Path, PathBuf};
use std::time::Duration;

use weft::storage::dir::{DirFollower, DirFollowerOptions, FollowerIndex};
use weft::{ErrorKind, Result};

/// The cache directory for the log at `log`, if there is one.
fn cache_dir(log: &Path) -> Option<PathBuf> {
    let base = match std::env::var_os("WEFT_INDEX_CACHE") {
        Some(v) if v == "off" || v.is_empty() => return None,
        Some(v) => PathBuf::from(v),
        None => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(xdg) => PathBuf::from(xdg).join("weft").join("dir-index"),
            None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?)
                .join(".cache")
                .join("weft")
                .join("dir-index"),
        },
    };
    let canonical = std::fs::canonicalize(log).ok()?;
    Some(base.join(format!(
        "{:016x}",
        fnv64(canonical.as_os_str().as_encoded_bytes())
    )))
}

/// FNV-1a: a stable hash (the name must not change between builds).
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A follower of the `dir` log at `path` polling every `poll`, its index
/// in the cache; in a private directory when there is no cache or another
/// command is using this log's cached index now.
///
/// Errors: as [`DirFollower::open_indexed`].
pub(crate) async fn dir_follower(path: &Path, poll: Duration) -> Result<DirFollower> {
    let options = DirFollowerOptions::default().with_poll_interval(poll);
    let Some(dir) = cache_dir(path) else {
        return DirFollower::open_with(path, options).await;
    };
    if let Some(parent) = dir.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        tracing::debug!(path = %parent.display(), error = %e, "no index cache; using a private index");
        return DirFollower::open_with(path, options).await;
    }
    let settings = FollowerIndex {
        dir: Some(dir),
        ..FollowerIndex::default()
    };
    match DirFollower::open_indexed(path, options.clone(), settings).await {
        Err(e) if e.kind() == ErrorKind::Locked => {
            tracing::debug!(error = %e, "the cached index is in use; using a private index");
            DirFollower::open_with(path, options).await
        }
        outcome => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::fnv64;

    #[test]
    fn the_cache_name_is_stable() {
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
