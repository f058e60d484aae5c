//! OS errors reach callers of the `dir` backend with the kind that says
//! what to do, on real filesystems: a file where the log directory should
//! be is `InvalidInput`, a read-only filesystem `ReadOnly`, a directory
//! this user may not write `PermissionDenied`. (Every errno's mapping is
//! checked one by one in `error::os`; these are the cases a test can make.)
//!
//! The read-only case needs a read-only filesystem: as root the test mounts
//! a small tmpfs and remounts it read-only; as another user it takes write
//! permission away instead (which root ignores). When neither is possible
//! (root without the right to mount) it says so on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

use weft::storage::dir::{DirFollower, DirStorage, check};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

fn tag() -> LogTag {
    LogTag::new("t").unwrap()
}

async fn make_log(dir: &Path, n: u64) {
    let log = Log::new(DirStorage::open(dir).await.unwrap());
    for i in 0..n {
        log.append(AppendRequest::new(tag(), format!("e{i}")))
            .await
            .unwrap();
    }
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_file_where_the_log_directory_should_be_is_invalid_input() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"not a log").unwrap();
    let below = file.join("log");
    for path in [&file, &below] {
        let kinds = [
            DirStorage::open(path).await.unwrap_err().kind(),
            DirFollower::open(path).await.unwrap_err().kind(),
            check(path).await.unwrap_err().kind(),
        ];
        assert_eq!(kinds, [ErrorKind::InvalidInput; 3], "{}", path.display());
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a log");
}

/// A tmpfs mounted at a fresh directory, unmounted when dropped.
struct Mount {
    at: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Mount {
    /// Mounts a tmpfs, or `None` when this process may not mount.
    fn tmpfs() -> Option<Mount> {
        let tmp = tempfile::tempdir().unwrap();
        let at = tmp.path().join("mnt");
        std::fs::create_dir(&at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(&at)
            .output()
            .is_ok_and(|o| o.status.success());
        mounted.then_some(Mount { at, _tmp: tmp })
    }

    fn remount(&self, mode: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.at)
            .output()
            .unwrap();
        assert!(out.status.success(), "remount {mode}: {out:?}");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).output();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test]
async fn a_read_only_filesystem_is_read_only_and_still_readable() {
    if !is_root() {
        return unwritable_directory_is_permission_denied().await;
    }
    let Some(mount) = Mount::tmpfs() else {
        eprintln!(
            "a_read_only_filesystem_is_read_only_and_still_readable: running as root \
             without the right to mount, so no read-only filesystem can be made here; \
             only the errno table in error::os checks EROFS"
        );
        return;
    };
    let log_dir = mount.at.join("log");
    make_log(&log_dir, 3).await;
    mount.remount("ro");

    let err = DirStorage::open(&log_dir).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly, "{err}");
    let fresh = DirStorage::open(mount.at.join("fresh")).await.unwrap_err();
    assert_eq!(fresh.kind(), ErrorKind::ReadOnly, "{fresh}");
    // Reading needs no write: a follower and a check work.
    let follower = Log::new(DirFollower::open(&log_dir).await.unwrap());
    assert_eq!(follower.read_all(&tag()).await.unwrap().len(), 3);
    follower.close().await.unwrap();
    assert!(check(&log_dir).await.unwrap().is_ok());
    mount.remount("rw");
}

/// As a user that is not root: a log whose files may not be written.
async fn unwritable_directory_is_permission_denied() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let log_dir = tmp.path().join("log");
    make_log(&log_dir, 3).await;
    let set = |mode| {
        for e in std::fs::read_dir(&log_dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
    };
    set(0o444);
    let err = DirStorage::open(&log_dir).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let follower = Log::new(DirFollower::open(&log_dir).await.unwrap());
    assert_eq!(follower.read_all(&tag()).await.unwrap().len(), 3);
    follower.close().await.unwrap();
    set(0o644);
}
