//! What an operating-system error means: the one place that reads an
//! `std::io::Error` — by its raw errno first, by its `io::ErrorKind` when it
//! carries none — and names its [`OsClass`].
//!
//! Two consumers turn a class into what they report: [`Error::io`]
//! (local files: the `dir` backend, cursor files, the CLI) through
//! [`OsClass::error_kind`], and the object-store outcome classification
//! (`store::outcome`, for errors a store client surfaces as `io::Error`),
//! which adds whether a write may have landed. Neither matches on an io
//! error itself, and nothing matches on an error's text.
//!
//! [`Error::io`]: crate::Error::io

use std::io;

use crate::error::ErrorKind;

/// What kind of failure an OS error reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OsClass {
    /// ENOENT: the file or directory does not exist.
    NotFound,
    /// EACCES, EPERM: the OS refused the operation to this user.
    Permission,
    /// EROFS: the filesystem is mounted read-only.
    ReadOnlyFs,
    /// ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, EINVAL: the caller named a
    /// path that cannot be what it has to be (a file where a directory
    /// belongs, a name the filesystem refuses).
    WrongPath,
    /// EEXIST, ENOTEMPTY: something is already where a new one was to go.
    Exists,
    /// ENOSPC, EDQUOT, EFBIG: no room for the write.
    NoSpace,
    /// EINTR, ETIMEDOUT: the call was cut short.
    Interrupted,
    /// EAGAIN, EBUSY, ETXTBSY, EMFILE, ENFILE, ENOMEM, ENOBUFS: a resource
    /// is exhausted or held for now.
    Busy,
    /// ECONNREFUSED, ENOTCONN, EADDRNOTAVAIL, EHOSTUNREACH, ENETUNREACH,
    /// ENETDOWN: the peer could not be reached; nothing was sent.
    Unreachable,
    /// ECONNRESET, ECONNABORTED, EPIPE: a connection died in use.
    ConnectionLost,
    /// The data ended early (`UnexpectedEof`: a file shorter than its
    /// contents say, or a response cut off).
    ShortRead,
    /// Bytes that do not make sense (`InvalidData`).
    BadData,
    /// ENOSYS, EOPNOTSUPP, EXDEV: the filesystem cannot do this.
    Unsupported,
    /// EIO, ESTALE and everything else: the device or the OS failed.
    Failed,
}

/// The class of `err`.
pub(crate) fn classify(err: &io::Error) -> OsClass {
    match err.raw_os_error() {
        Some(errno) => by_errno(errno).unwrap_or_else(|| by_kind(err.kind())),
        None => by_kind(err.kind()),
    }
}

fn by_errno(errno: i32) -> Option<OsClass> {
    use OsClass::*;
    Some(match errno {
        libc::ENOENT => NotFound,
        libc::EACCES | libc::EPERM => Permission,
        libc::EROFS => ReadOnlyFs,
        libc::ENOTDIR | libc::EISDIR | libc::ENAMETOOLONG | libc::ELOOP | libc::EINVAL => WrongPath,
        libc::EEXIST | libc::ENOTEMPTY => Exists,
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => NoSpace,
        libc::EINTR | libc::ETIMEDOUT => Interrupted,
        libc::EAGAIN
        | libc::EBUSY
        | libc::ETXTBSY
        | libc::EMFILE
        | libc::ENFILE
        | libc::ENOMEM
        | libc::ENOBUFS => Busy,
        libc::ECONNREFUSED
        | libc::ENOTCONN
        | libc::EADDRNOTAVAIL
        | libc::EHOSTUNREACH
        | libc::ENETUNREACH
        | libc::ENETDOWN => Unreachable,
        libc::ECONNRESET | libc::ECONNABORTED | libc::EPIPE => ConnectionLost,
        libc::ENOSYS | libc::EOPNOTSUPP | libc::EXDEV => Unsupported,
        libc::EIO | libc::ESTALE => Failed,
        _ => return None,
    })
}

fn by_kind(kind: io::ErrorKind) -> OsClass {
    use OsClass::*;
    use io::ErrorKind as K;
    match kind {
        K::NotFound => NotFound,
        K::PermissionDenied => Permission,
        K::ReadOnlyFilesystem => ReadOnlyFs,
        K::NotADirectory
        | K::IsADirectory
        | K::InvalidFilename
        | K::InvalidInput
        | K::NotSeekable => WrongPath,
        K::AlreadyExists | K::DirectoryNotEmpty => Exists,
        K::StorageFull | K::QuotaExceeded | K::FileTooLarge => NoSpace,
        K::Interrupted | K::TimedOut => Interrupted,
        K::WouldBlock | K::ResourceBusy | K::ExecutableFileBusy | K::OutOfMemory | K::Deadlock => {
            Busy
        }
        K::ConnectionRefused
        | K::NotConnected
        | K::AddrNotAvailable
        | K::AddrInUse
        | K::HostUnreachable
        | K::NetworkUnreachable
        | K::NetworkDown => Unreachable,
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ConnectionLost,
        K::UnexpectedEof => ShortRead,
        K::InvalidData => BadData,
        K::Unsupported | K::CrossesDevices => Unsupported,
        _ => Failed,
    }
}

impl OsClass {
    /// The error kind a local-file operation failing this way reports.
    ///
    /// A failed write or sync of the `dir` log's data is reported as
    /// `Indeterminate` to its appenders whatever the class (see the
    /// writer); this is the kind of every other file operation.
    pub(crate) fn error_kind(self) -> ErrorKind {
        match self {
            OsClass::NotFound => ErrorKind::NotFound,
            OsClass::Permission => ErrorKind::PermissionDenied,
            OsClass::ReadOnlyFs => ErrorKind::ReadOnly,
            OsClass::WrongPath => ErrorKind::InvalidInput,
            // Someone else put a file where this one was to go: re-read.
            OsClass::Exists => ErrorKind::Conflict,
            // Free space (or wait for a resource), then try again.
            OsClass::NoSpace
            | OsClass::Interrupted
            | OsClass::Busy
            | OsClass::Unreachable
            | OsClass::ConnectionLost => ErrorKind::Unavailable,
            OsClass::ShortRead | OsClass::BadData => ErrorKind::Corrupt,
            OsClass::Unsupported => ErrorKind::Unsupported,
            // The device failed: the handle cannot be trusted to have kept
            // going; re-open.
            OsClass::Failed => ErrorKind::Closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every errno the module names, as the OS reports it, and the kind a
    /// local-file operation then returns.
    #[test]
    fn each_errno_maps_to_its_kind() {
        let table = [
            (libc::ENOENT, OsClass::NotFound, ErrorKind::NotFound),
            (
                libc::EACCES,
                OsClass::Permission,
                ErrorKind::PermissionDenied,
            ),
            (
                libc::EPERM,
                OsClass::Permission,
                ErrorKind::PermissionDenied,
            ),
            (libc::EROFS, OsClass::ReadOnlyFs, ErrorKind::ReadOnly),
            (libc::ENOTDIR, OsClass::WrongPath, ErrorKind::InvalidInput),
            (libc::EISDIR, OsClass::WrongPath, ErrorKind::InvalidInput),
            (
                libc::ENAMETOOLONG,
                OsClass::WrongPath,
                ErrorKind::InvalidInput,
            ),
            (libc::ELOOP, OsClass::WrongPath, ErrorKind::InvalidInput),
            (libc::EINVAL, OsClass::WrongPath, ErrorKind::InvalidInput),
            (libc::EEXIST, OsClass::Exists, ErrorKind::Conflict),
            (libc::ENOTEMPTY, OsClass::Exists, ErrorKind::Conflict),
            (libc::ENOSPC, OsClass::NoSpace, ErrorKind::Unavailable),
            (libc::EDQUOT, OsClass::NoSpace, ErrorKind::Unavailable),
            (libc::EFBIG, OsClass::NoSpace, ErrorKind::Unavailable),
            (libc::EINTR, OsClass::Interrupted, ErrorKind::Unavailable),
            (
                libc::ETIMEDOUT,
                OsClass::Interrupted,
                ErrorKind::Unavailable,
            ),
            (libc::EAGAIN, OsClass::Busy, ErrorKind::Unavailable),
            (libc::EBUSY, OsClass::Busy, ErrorKind::Unavailable),
            (libc::ETXTBSY, OsClass::Busy, ErrorKind::Unavailable),
            (libc::EMFILE, OsClass::Busy, ErrorKind::Unavailable),
            (libc::ENFILE, OsClass::Busy, ErrorKind::Unavailable),
            (libc::ENOMEM, OsClass::Busy, ErrorKind::Unavailable),
            (libc::ENOBUFS, OsClass::Busy, ErrorKind::Unavailable),
            (
                libc::ECONNREFUSED,
                OsClass::Unreachable,
                ErrorKind::Unavailable,
            ),
            (libc::ENOTCONN, OsClass::Unreachable, ErrorKind::Unavailable),
            (
                libc::EADDRNOTAVAIL,
                OsClass::Unreachable,
                ErrorKind::Unavailable,
            ),
            (
                libc::EHOSTUNREACH,
                OsClass::Unreachable,
                ErrorKind::Unavailable,
            ),
            (
                libc::ENETUNREACH,
                OsClass::Unreachable,
                ErrorKind::Unavailable,
            ),
            (libc::ENETDOWN, OsClass::Unreachable, ErrorKind::Unavailable),
            (
                libc::ECONNRESET,
                OsClass::ConnectionLost,
                ErrorKind::Unavailable,
            ),
            (
                libc::ECONNABORTED,
                OsClass::ConnectionLost,
                ErrorKind::Unavailable,
            ),
            (libc::EPIPE, OsClass::ConnectionLost, ErrorKind::Unavailable),
            (libc::ENOSYS, OsClass::Unsupported, ErrorKind::Unsupported),
            (
                libc::EOPNOTSUPP,
                OsClass::Unsupported,
                ErrorKind::Unsupported,
            ),
            (libc::EXDEV, OsClass::Unsupported, ErrorKind::Unsupported),
            (libc::EIO, OsClass::Failed, ErrorKind::Closed),
            (libc::ESTALE, OsClass::Failed, ErrorKind::Closed),
            // An errno the table does not name falls back to std's kind.
            (libc::ENXIO, OsClass::Failed, ErrorKind::Closed),
        ];
        for (errno, class, kind) in table {
            let err = io::Error::from_raw_os_error(errno);
            assert_eq!(classify(&err), class, "errno {errno} ({err})");
            assert_eq!(class.error_kind(), kind, "errno {errno} ({err})");
        }
    }

    /// Errors built from a kind alone (no errno), as libraries and tests
    /// make them.
    #[test]
    fn each_io_kind_maps_to_its_class() {
        use io::ErrorKind as K;
        let table = [
            (K::NotFound, OsClass::NotFound),
            (K::PermissionDenied, OsClass::Permission),
            (K::ReadOnlyFilesystem, OsClass::ReadOnlyFs),
            (K::NotADirectory, OsClass::WrongPath),
            (K::IsADirectory, OsClass::WrongPath),
            (K::InvalidFilename, OsClass::WrongPath),
            (K::InvalidInput, OsClass::WrongPath),
            (K::AlreadyExists, OsClass::Exists),
            (K::DirectoryNotEmpty, OsClass::Exists),
            (K::StorageFull, OsClass::NoSpace),
            (K::QuotaExceeded, OsClass::NoSpace),
            (K::FileTooLarge, OsClass::NoSpace),
            (K::Interrupted, OsClass::Interrupted),
            (K::TimedOut, OsClass::Interrupted),
            (K::WouldBlock, OsClass::Busy),
            (K::ResourceBusy, OsClass::Busy),
            (K::OutOfMemory, OsClass::Busy),
            (K::ConnectionRefused, OsClass::Unreachable),
            (K::NotConnected, OsClass::Unreachable),
            (K::ConnectionReset, OsClass::ConnectionLost),
            (K::BrokenPipe, OsClass::ConnectionLost),
            (K::UnexpectedEof, OsClass::ShortRead),
            (K::InvalidData, OsClass::BadData),
            (K::Unsupported, OsClass::Unsupported),
            (K::CrossesDevices, OsClass::Unsupported),
            (K::Other, OsClass::Failed),
        ];
        for (kind, class) in table {
            assert_eq!(classify(&io::Error::from(kind)), class, "{kind:?}");
        }
    }
}
