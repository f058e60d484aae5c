//! The one public error type of weft.
//!
//! Every fallible weft function returns [`Error`]. Its [`ErrorKind`] tells the
//! caller what to do next; the message is for humans and must never be
//! matched on. Structured facts that a caller may act on (the current version
//! after a conflict, the seqnum that failed to decode, the first position
//! still readable after a trim) are carried in [`ErrorDetail`].
//!
//! Errors are `Clone` (the cause is shared, not copied), so a component that
//! stops for good keeps the error that stopped it and hands every later
//! caller the same kind and detail: see [`Error::after_stop`].
//!
//! ```
//! use weft::{Error, ErrorKind};
//!
//! let err = Error::invalid_input("tag namespace is empty");
//! assert_eq!(err.kind(), ErrorKind::InvalidInput);
//! assert!(!err.kind().is_retryable());
//! ```

pub(crate) mod os;

use std::fmt;
use std::sync::Arc;

/// A `Result` whose error is weft's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the caller should do about an error.
///
/// The kinds are deliberately few; each names a different reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The arguments or bytes handed in are not valid. Fix the call; retrying
    /// the same call fails the same way. Nothing was written.
    InvalidInput,
    /// A conditional operation lost: the stream is not at the expected
    /// version, or a compare-and-set saw another value. Re-read, decide again.
    /// Nothing was written.
    Conflict,
    /// Another writer claimed the log with a higher epoch. This writer will
    /// never commit again; step down or open a new writer.
    Fenced,
    /// A transient failure (network, throttling, server error). Retrying
    /// later, with backoff, may succeed. Nothing was written.
    Unavailable,
    /// The outcome is unknown: the write may or may not have happened (a
    /// request timed out after it was sent). Re-read before retrying.
    Indeterminate,
    /// Stored bytes failed validation (checksum, framing, invariants). Do not
    /// retry blindly; the data needs attention.
    Corrupt,
    /// The requested position was trimmed away. Restore from a snapshot or
    /// read from the first live position (see [`ErrorDetail::Trimmed`]).
    Trimmed,
    /// The log, producer or subscription is closed or halted. Re-open.
    Closed,
    /// A write was attempted on a read-only handle (a follower).
    ReadOnly,
    /// The backend cannot perform this operation atomically, so it refuses
    /// instead of pretending.
    Unsupported,
    /// The log, bucket, object or key does not exist.
    NotFound,
    /// The log is already open for writing by this or another process.
    Locked,
    /// The store refused the credentials or the operation.
    PermissionDenied,
    /// A bug in weft. Please report it.
    Internal,
}

impl ErrorKind {
    /// True when the same call may succeed if simply retried later.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Unavailable)
    }

    /// A short lowercase name, stable across releases (useful for metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Fenced => "fenced",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Indeterminate => "indeterminate",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Trimmed => "trimmed",
            ErrorKind::Closed => "closed",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Locked => "locked",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Structured facts attached to some errors, for callers that act on them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorDetail {
    /// A conditional append found the stream elsewhere.
    VersionConflict {
        /// The version the caller expected the new entry to get.
        expected: u64,
        /// The version the next entry of the stream would get now
        /// (0 for an empty stream). Pass this to retry.
        next: u64,
    },
    /// A conditional append expected its stream to be in a state
    /// ([`Expected::NoStream`](crate::Expected::NoStream) or
    /// [`Expected::StreamExists`](crate::Expected::StreamExists)) it was not in.
    StreamStateConflict {
        /// The condition that failed.
        expected: crate::Expected,
        /// The version the next entry of the stream would get now (0 for a
        /// stream that never had an entry).
        next: u64,
    },
    /// A read asked for a position below the trim point. For seqnum-keyed
    /// reads both fields are seqnums; for version-keyed reads (of one
    /// stream) both are versions of that stream.
    Trimmed {
        /// The position the caller asked for.
        requested: u64,
        /// The first position that is still readable.
        first_available: u64,
    },
    /// An entry's payload could not be decoded by a typed view's codec.
    Decode {
        /// The seqnum of the entry that failed.
        seqnum: u64,
    },
    /// A writer was fenced by a newer epoch.
    Fenced {
        /// This writer's epoch.
        ours: u64,
        /// The epoch found in the manifest.
        theirs: u64,
    },
}

/// The cause of an [`Error`], shared between its clones.
type Source = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// weft's error: a kind that prescribes the reaction, a message, an optional
/// cause and optional structured detail.
///
/// Cloning is cheap and keeps everything, the cause included (it is shared).
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    detail: Option<ErrorDetail>,
    source: Option<Source>,
}

impl Error {
    /// Make an error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            detail: None,
            source: None,
        }
    }

    /// Attach the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Attach structured detail.
    pub fn with_detail(mut self, detail: ErrorDetail) -> Self {
        self.detail = Some(detail);
        self
    }

    /// What the caller should do.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable message (never match on it).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Structured detail, where the error carries any.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        self.detail.as_ref()
    }

    /// For a version conflict: the version the next entry of the stream would
    /// get now.
    pub fn conflict_next_version(&self) -> Option<u64> {
        match self.detail {
            Some(ErrorDetail::VersionConflict { next, .. })
            | Some(ErrorDetail::StreamStateConflict { next, .. }) => Some(next),
            _ => None,
        }
    }

    /// Prefix the message with context, keeping kind, detail and source.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The error every later call gets from `who` (a writer, a producer)
    /// after `self` stopped it for good.
    ///
    /// `Fenced` stays `Fenced` with its detail (a newer writer owns the log:
    /// step down) and `Closed` stays `Closed`; any other kind becomes
    /// `Closed` (this handle will not work again: re-open), because the
    /// later call itself did nothing that could be retried or be in doubt.
    /// `self` is kept as the source either way.
    ///
    /// ```
    /// use weft::{Error, ErrorDetail, ErrorKind};
    ///
    /// let fenced = Error::fenced(1, 2);
    /// let later = fenced.after_stop("the bucket writer");
    /// assert_eq!(later.kind(), ErrorKind::Fenced);
    /// assert_eq!(later.detail(), Some(&ErrorDetail::Fenced { ours: 1, theirs: 2 }));
    ///
    /// let io = Error::new(ErrorKind::Indeterminate, "sync failed");
    /// assert_eq!(io.after_stop("the log directory").kind(), ErrorKind::Closed);
    /// ```
    pub fn after_stop(&self, who: impl fmt::Display) -> Error {
        let kind = match self.kind {
            ErrorKind::Fenced | ErrorKind::Closed => self.kind,
            _ => ErrorKind::Closed,
        };
        let stopped = Error::new(kind, format!("{who} stopped after an earlier failure"))
            .with_source(self.clone());
        match (&self.detail, kind == self.kind) {
            (Some(detail), true) => stopped.with_detail(detail.clone()),
            _ => stopped,
        }
    }

    /// Shorthand for [`ErrorKind::InvalidInput`].
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }

    /// Shorthand for [`ErrorKind::Corrupt`].
    pub fn corrupt(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Corrupt, message)
    }

    /// Shorthand for [`ErrorKind::Closed`].
    pub fn closed(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Closed, message)
    }

    /// Shorthand for [`ErrorKind::Internal`].
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }

    /// Shorthand for [`ErrorKind::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unsupported, message)
    }

    /// A version conflict on a conditional append.
    pub fn version_conflict(tag: impl fmt::Display, expected: u64, next: u64) -> Self {
        Error::new(
            ErrorKind::Conflict,
            format!("stream {tag} is at version {next}, the append expected {expected}"),
        )
        .with_detail(ErrorDetail::VersionConflict { expected, next })
    }

    /// A conditional append on `tag` whose state condition `expected` failed
    /// with the stream at next version `next`.
    pub fn stream_state_conflict(
        tag: impl fmt::Display,
        expected: crate::Expected,
        next: u64,
    ) -> Self {
        let found = if next == 0 {
            "has never had an entry".to_owned()
        } else {
            format!("exists (next version {next})")
        };
        Error::new(
            ErrorKind::Conflict,
            format!("stream {tag} {found}, the append expected {expected}"),
        )
        .with_detail(ErrorDetail::StreamStateConflict { expected, next })
    }

    /// A version-keyed read of `tag` below its first live version.
    pub fn trimmed_version(tag: impl fmt::Display, requested: u64, first_available: u64) -> Self {
        Error::new(
            ErrorKind::Trimmed,
            format!(
                "version {requested} of {tag} was trimmed; the first readable version is {first_available}"
            ),
        )
        .with_detail(ErrorDetail::Trimmed {
            requested,
            first_available,
        })
    }

    /// A seqnum-keyed read below the trim point.
    pub fn trimmed(requested: u64, first_available: u64) -> Self {
        Error::new(
            ErrorKind::Trimmed,
            format!(
                "seqnum {requested} was trimmed; the first readable seqnum is {first_available}"
            ),
        )
        .with_detail(ErrorDetail::Trimmed {
            requested,
            first_available,
        })
    }

    /// A writer fenced by a newer epoch.
    pub fn fenced(ours: u64, theirs: u64) -> Self {
        Error::new(
            ErrorKind::Fenced,
            format!("writer with epoch {ours} was fenced by epoch {theirs}"),
        )
        .with_detail(ErrorDetail::Fenced { ours, theirs })
    }

    /// An I/O error from the local filesystem, classified by its errno
    /// (or its `io::ErrorKind` when it has none) in one place: ENOENT is
    /// `NotFound`; EACCES and EPERM `PermissionDenied`; EROFS `ReadOnly`;
    /// ENOTDIR, EISDIR and bad names `InvalidInput`; EEXIST `Conflict`;
    /// ENOSPC, EDQUOT, EINTR, EAGAIN, EMFILE and the like `Unavailable`;
    /// `UnexpectedEof` and `InvalidData` `Corrupt`; ENOSYS and EXDEV
    /// `Unsupported`; EIO and anything else `Closed`.
    pub fn io(context: impl fmt::Display, err: std::io::Error) -> Self {
        let kind = os::classify(&err).error_kind();
        Error::new(kind, format!("{context}: {err}")).with_source(err)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(detail) = &self.detail {
            d.field("detail", detail);
        }
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.kind)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_carries_next_version() {
        let err = Error::version_conflict("orders", 3, 5);
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert_eq!(err.conflict_next_version(), Some(5));
    }

    #[test]
    fn clones_keep_kind_detail_and_source() {
        let err = Error::fenced(3, 4).with_source(std::io::Error::other("cause"));
        let copy = err.clone();
        assert_eq!(copy.kind(), ErrorKind::Fenced);
        assert_eq!(copy.detail(), err.detail());
        assert_eq!(copy.to_string(), err.to_string());
        assert!(std::error::Error::source(&copy).is_some());
    }

    #[test]
    fn after_stop_keeps_lasting_kinds_only() {
        for (kind, after) in [
            (ErrorKind::Fenced, ErrorKind::Fenced),
            (ErrorKind::Closed, ErrorKind::Closed),
            (ErrorKind::Indeterminate, ErrorKind::Closed),
            (ErrorKind::Unavailable, ErrorKind::Closed),
            (ErrorKind::Corrupt, ErrorKind::Closed),
        ] {
            let later = Error::new(kind, "x").after_stop("w");
            assert_eq!(later.kind(), after, "{kind}");
            let source = std::error::Error::source(&later).expect("cause kept");
            let cause = source.downcast_ref::<Error>().expect("a weft error");
            assert_eq!(cause.kind(), kind);
        }
        let conflict = Error::version_conflict("t", 1, 2).after_stop("w");
        assert_eq!(conflict.detail(), None, "a changed kind drops the detail");
    }

    #[test]
    fn io_errors_are_classified_by_kind() {
        let err = Error::io("open", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let err = Error::io(
            "read",
            std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
        );
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }
}
